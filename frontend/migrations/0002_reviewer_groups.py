from django.db import migrations


def create_groups(apps, schema_editor):
    from frontend.apps import ensure_groups

    ensure_groups(apps.get_model("auth", "Group"), apps.get_model("auth", "Permission"),
                  apps.get_model("contenttypes", "ContentType"))


class Migration(migrations.Migration):
    """Groups Reviewer and Maintainer with the permissions declared on frontend.Review."""

    dependencies = [
        ("frontend", "0001_reruns_and_review"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(create_groups, migrations.RunPython.noop)]
