from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("ledger", "0004_event_position_indexes")]

    operations = [
        migrations.CreateModel(
            name="Lease",
            fields=[
                ("key", models.CharField(max_length=255, primary_key=True, serialize=False)),
                ("kind", models.CharField(max_length=40)),
                ("subject", models.CharField(max_length=255)),
                ("host", models.CharField(max_length=255)),
                ("pid", models.IntegerField()),
                ("process", models.CharField(max_length=200)),
                ("scratch", models.CharField(blank=True, max_length=1000)),
                ("started_at", models.DateTimeField()),
                ("heartbeat_at", models.DateTimeField(db_index=True)),
            ],
        ),
    ]
