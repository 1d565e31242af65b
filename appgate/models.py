"""Projection tables of the application gate: one row per application (state, milestones and
its latest gate verdict). Rebuilt from the ledger like every projection."""
from django.db import models


class AppRow(models.Model):
    name = models.CharField(max_length=64, primary_key=True)
    architecture = models.CharField(max_length=8)
    domain = models.CharField(max_length=200)
    manifest_path = models.CharField(max_length=500)
    manifest_hash = models.CharField(max_length=64)
    registered_position = models.BigIntegerField()
    state = models.CharField(max_length=16, default="IN_PROGRESS")
    state_reason = models.TextField(blank=True)
    state_code = models.CharField(max_length=40, blank=True)  # the reason's machine-readable code ("": none recorded)
    milestones = models.JSONField(default=list)  # [{milestone, detail, position}]
    result = models.CharField(max_length=120, blank=True)  # app/<architecture>/<name>
    verdict = models.CharField(max_length=16, blank=True)  # admitted | self-checked | rejected | inconclusive
    # admitted | downgraded | retracted | rejected | self-checked | inconclusive
    status = models.CharField(max_length=12, blank=True)
    headline = models.FloatField(null=True)
    headline_ci = models.JSONField(null=True)
    datasets = models.JSONField(default=dict)
    real = models.BooleanField(default=False)
    amdahl_ceiling = models.FloatField(null=True)
    hotspot_fraction = models.FloatField(null=True)
    noisy = models.JSONField(default=list)  # datasets still noisy after every attempt (the verdict's)
    checks = models.JSONField(null=True)  # the verdict's correctness checks; None: not recorded (before issue 17)
    verdict_event = models.CharField(max_length=36, blank=True)
    revisions = models.PositiveIntegerField(default=0)
    position = models.BigIntegerField()
