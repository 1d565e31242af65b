"""Composite (column, position) indexes on ledger_event for the event browser's filters and the
pages' stream / type lookups, replacing the single-column type and actor indexes.

The old indexes are dropped by name as the database reports them (on PostgreSQL a varchar
db_index also has a `_like` twin) rather than by AlterField: on SQLite, AlterField remakes
the table, which would drop the append-only triggers of migration 0002 with it.
"""
from django.db import migrations, models

COLUMNS = ("type", "actor")


def drop_single_column_indexes(apps, schema_editor):
    Event = apps.get_model("ledger", "Event")
    with schema_editor.connection.cursor() as cursor:
        constraints = schema_editor.connection.introspection.get_constraints(cursor, Event._meta.db_table)
    for name, info in constraints.items():
        if info["index"] and not info["unique"] and not info["primary_key"] and info["columns"] in ([c] for c in COLUMNS):
            schema_editor.execute(schema_editor._delete_index_sql(Event, name))


def restore_single_column_indexes(apps, schema_editor):
    Event = apps.get_model("ledger", "Event")
    for column in COLUMNS:
        schema_editor.add_index(Event, models.Index(fields=[column], name=f"ledger_event_{column}_single"))


class Migration(migrations.Migration):
    dependencies = [("ledger", "0003_result_versions")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(model_name="event", name="type", field=models.CharField(max_length=100)),
                migrations.AlterField(model_name="event", name="actor", field=models.CharField(max_length=255)),
            ],
            database_operations=[migrations.RunPython(drop_single_column_indexes, restore_single_column_indexes)],
        ),
        migrations.AddIndex(model_name="event", index=models.Index(fields=["type", "position"], name="ledger_event_type_pos")),
        migrations.AddIndex(model_name="event", index=models.Index(fields=["stream", "position"], name="ledger_event_stream_pos")),
        migrations.AddIndex(model_name="event", index=models.Index(fields=["actor", "position"], name="ledger_event_actor_pos")),
    ]
