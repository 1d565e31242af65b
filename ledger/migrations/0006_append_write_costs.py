"""PostgreSQL only: what every append writes, made cheaper to write (docs/ledger_benchmarks.md).

- `ledger_projectionstate` (16 rows, every one updated by every append) and
  `ledger_eventtypecount` (a row per event type, one updated by every append) keep 90% of each
  page free (fillfactor 10), so a row's new version fits on its own page and the old one is pruned
  there (a HOT update). Packed full, as created, the new versions went to new pages: the table
  grew by a page every few appends until a VACUUM (this server runs without autovacuum), and every
  append's UPDATE and read scanned them all (364 pages, 2 ms an append, after 10,000 appends).
- The event hash's `varchar_pattern_ops` twin index (which Django adds to a unique varchar on
  PostgreSQL, for LIKE): nothing looks hashes up by prefix, and every append wrote to it.
"""
from django.db import migrations

HOT_TABLES = ("ledger_projectionstate", "ledger_eventtypecount")
LIKE_INDEX = "ledger_event_hash_like"


def _fillfactor(schema_editor, value: int) -> None:
    for table in HOT_TABLES:
        schema_editor.execute(f"ALTER TABLE {table} SET (fillfactor = {value})")


def _hash_like_indexes(schema_editor) -> list[str]:
    with schema_editor.connection.cursor() as cursor:
        constraints = schema_editor.connection.introspection.get_constraints(cursor, "ledger_event")
    return [name for name, info in constraints.items()
            if info["index"] and not info["unique"] and info["columns"] == ["hash"] and name.endswith("_like")]


def forward(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    _fillfactor(schema_editor, 10)
    for name in _hash_like_indexes(schema_editor):
        schema_editor.execute(f'DROP INDEX IF EXISTS "{name}"')


def backward(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    _fillfactor(schema_editor, 100)
    schema_editor.execute(f'CREATE INDEX IF NOT EXISTS "{LIKE_INDEX}" ON ledger_event (hash varchar_pattern_ops)')


class Migration(migrations.Migration):
    dependencies = [("ledger", "0005_lease")]

    operations = [migrations.RunPython(forward, backward)]
