"""Issue 17: the verdict's noisy datasets and correctness checks on the application row, and room
for the "self-checked" / "inconclusive" verdicts. A projection: `ledger rebuild` fills them."""
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("appgate", "0001_applications"),
    ]

    operations = [
        migrations.AlterField(model_name="approw", name="verdict", field=models.CharField(blank=True, max_length=16)),
        migrations.AddField(model_name="approw", name="noisy", field=models.JSONField(default=list)),
        migrations.AddField(model_name="approw", name="checks", field=models.JSONField(null=True)),
    ]
