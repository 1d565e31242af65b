from django.db import migrations

from ledger.db_guard import install_guards, remove_guards


def forwards(apps, schema_editor):
    install_guards(schema_editor.connection)


def backwards(apps, schema_editor):
    remove_guards(schema_editor.connection)


class Migration(migrations.Migration):
    dependencies = [("ledger", "0001_initial")]
    operations = [migrations.RunPython(forwards, backwards)]
