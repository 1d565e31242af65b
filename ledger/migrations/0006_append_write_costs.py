"""PostgreSQL only: the event hash's `varchar_pattern_ops` twin index (which Django adds to a
unique varchar on PostgreSQL, for LIKE) is dropped. Nothing looks hashes up by prefix, and every
append wrote to it: the event INSERT now maintains seven indexes, each used by a lookup
(docs/ledger_benchmarks.md lists them)."""
from django.db import migrations

LIKE_INDEX = "ledger_event_hash_like"


def _hash_like_indexes(schema_editor) -> list[str]:
    with schema_editor.connection.cursor() as cursor:
        constraints = schema_editor.connection.introspection.get_constraints(cursor, "ledger_event")
    return [name for name, info in constraints.items()
            if info["index"] and not info["unique"] and info["columns"] == ["hash"] and name.endswith("_like")]


def forward(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for name in _hash_like_indexes(schema_editor):
        schema_editor.execute(f'DROP INDEX IF EXISTS "{name}"')


def backward(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(f'CREATE INDEX IF NOT EXISTS "{LIKE_INDEX}" ON ledger_event (hash varchar_pattern_ops)')


class Migration(migrations.Migration):
    dependencies = [("ledger", "0005_lease")]

    operations = [migrations.RunPython(forward, backward)]
