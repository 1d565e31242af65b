"""Projection tables of the forge: rounds, perf and idea logs, per-case campaign state, the map."""
from django.db import models


class RoundRow(models.Model):
    round = models.CharField(max_length=36, primary_key=True)
    campaign = models.CharField(max_length=36, db_index=True)
    case = models.CharField(max_length=100, db_index=True)
    backend = models.CharField(max_length=10)
    number = models.PositiveIntegerField()
    status = models.CharField(max_length=12)  # started | proposed | committed | reverted | abandoned
    state = models.CharField(max_length=24, blank=True)  # the execution state once ended
    subject = models.TextField(blank=True)
    detail = models.TextField(blank=True)
    lever_tags = models.JSONField()
    source_hash = models.CharField(max_length=64, blank=True)
    verdict_event = models.CharField(max_length=36, blank=True)
    speedup = models.FloatField(null=True)
    improvement = models.FloatField(null=True)
    position = models.BigIntegerField()


class PerfEntry(models.Model):
    round = models.CharField(max_length=36, primary_key=True)
    case = models.CharField(max_length=100, db_index=True)
    change = models.TextField()
    state = models.CharField(max_length=24)
    measurement = models.TextField()
    speedup = models.FloatField(null=True)
    fraction_of_copy = models.FloatField(null=True)
    position = models.BigIntegerField()


class IdeaEntry(models.Model):
    round = models.CharField(max_length=36, primary_key=True)
    case = models.CharField(max_length=100, db_index=True)
    idea = models.TextField()
    position = models.BigIntegerField()


class CaseCampaign(models.Model):
    """One case inside one campaign: where its loop stands."""

    key = models.CharField(max_length=160, primary_key=True)  # campaign|case
    campaign = models.CharField(max_length=36, db_index=True)
    case = models.CharField(max_length=100)
    backend = models.CharField(max_length=10)
    budget = models.PositiveIntegerField()
    rounds = models.PositiveIntegerField()
    streak = models.PositiveIntegerField()  # consecutive non-improving rounds
    must_leave_history = models.BooleanField()
    improvements = models.JSONField()  # per ended round, the relative improvement (0 when none)
    borrowed_from = models.CharField(max_length=160, blank=True)
    borrowed_diagnosis = models.TextField(blank=True)
    pending = models.JSONField(null=True)  # the candidate of the round in flight
    best = models.JSONField(null=True)  # source, launch, plan, hash, speedup, fraction, tags, verdict
    branch = models.JSONField(null=True)  # the open branch: id, base_hash, opened_round, stale, head (as best)
    converged = models.CharField(max_length=40, blank=True)


class MapCell(models.Model):
    key = models.CharField(max_length=120, primary_key=True)  # backend|case
    case = models.CharField(max_length=100)
    backend = models.CharField(max_length=10)
    diagnosis = models.TextField()
    winning_lever = models.CharField(max_length=100, blank=True)
    source = models.TextField()
    launch = models.JSONField()
    source_hash = models.CharField(max_length=64)
    speedup = models.FloatField(null=True)
    fraction_of_copy = models.FloatField(null=True)
    verdict_event = models.CharField(max_length=36, blank=True)
    position = models.BigIntegerField()
