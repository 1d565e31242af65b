"""Projection tables of the measurement app (rebuildable from events)."""
from django.db import models


class CaseRow(models.Model):
    case = models.CharField(max_length=100, primary_key=True)
    type = models.CharField(max_length=40)
    precision = models.CharField(max_length=3)
    shape = models.JSONField()
    coefficients = models.JSONField()
    compulsory_bytes = models.BigIntegerField()
    flops = models.BigIntegerField()
    matrices = models.JSONField()
    position = models.BigIntegerField()


class OperatorResult(models.Model):
    """The headline of a (backend, case): its admitted kernel and how it stands now."""

    result = models.CharField(max_length=160, primary_key=True)
    case = models.CharField(max_length=100, db_index=True)
    backend = models.CharField(max_length=10)
    status = models.CharField(max_length=12)  # admitted | downgraded | retracted
    source_hash = models.CharField(max_length=64)
    source = models.TextField()
    launch = models.JSONField()
    median_seconds = models.FloatField()
    speedup = models.FloatField(null=True)
    speedup_ci = models.JSONField(null=True)
    bound = models.JSONField(null=True)
    baselines = models.JSONField(null=True)  # every public baseline of the standing measurement, with our speedup over it
    history = models.JSONField(default=list)  # one line per revision: "was 1.850x over ...; 0.770x over ..."
    same_precision = models.BooleanField(null=True)
    fraction_of_copy = models.FloatField(null=True)
    verdict_event = models.CharField(max_length=36)
    verdict_position = models.BigIntegerField()
    revisions = models.PositiveIntegerField()
