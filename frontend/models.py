"""Tables of the audit UI: the re-runs projection and the reviewers' permissions."""
from django.db import models

from .apps import PERMISSIONS


class Review(models.Model):
    """Holds no rows: declares the permissions of the reviewers' actions (groups in apps.py)."""

    class Meta:
        managed = False
        default_permissions = ()
        permissions = list(PERMISSIONS.items())


class RerunRow(models.Model):
    """A re-run and where it stands (projection of the Rerun* events)."""

    rerun = models.CharField(max_length=36, primary_key=True)
    kind = models.CharField(max_length=4)
    target = models.CharField(max_length=160)
    backend = models.CharField(max_length=10)
    result = models.CharField(max_length=255, db_index=True)
    requested_by = models.CharField(max_length=255)
    requested_at = models.CharField(max_length=40)
    state = models.CharField(max_length=10)  # queued | running | finished | failed | abandoned
    progress = models.JSONField()
    outcome = models.JSONField(null=True)
    detail = models.TextField()
    history_line = models.TextField(null=True)
    position = models.BigIntegerField()
