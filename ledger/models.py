"""The event table (the only source of truth) and the projection tables derived from it.

Event rows are never updated or deleted: database triggers (migration 0002) refuse it.
Projection tables are disposable: `manage.py ledger rebuild` recreates them from events.
"""
from django.db import models


class Event(models.Model):
    position = models.BigIntegerField(primary_key=True)
    event_id = models.UUIDField(unique=True)
    stream = models.CharField(max_length=255)
    version = models.PositiveIntegerField()
    type = models.CharField(max_length=100)
    schema_version = models.PositiveSmallIntegerField()
    actor = models.CharField(max_length=255)
    recorded_at = models.DateTimeField()
    # The RFC 8785 canonical JSON of every hashed field (payload and origin included),
    # stored verbatim because databases such as PostgreSQL reorder JSON keys.
    body = models.TextField()
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64, unique=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["stream", "version"], name="ledger_event_stream_version")]
        # Each filter of the event browser (and the pages' lookups by stream or type) walks one
        # of these in position order: "newest 50 of a type / stream / actor" reads 50 index
        # entries, not every match (migration 0004; they replace the single-column type and
        # actor indexes, which a (column, position) index covers).
        indexes = [
            models.Index(fields=["type", "position"], name="ledger_event_type_pos"),
            models.Index(fields=["stream", "position"], name="ledger_event_stream_pos"),
            models.Index(fields=["actor", "position"], name="ledger_event_actor_pos"),
        ]

    def __str__(self) -> str:
        return f"#{self.position} {self.type} {self.stream}@{self.version}"


class ProjectionState(models.Model):
    name = models.CharField(max_length=100, primary_key=True)
    last_position = models.BigIntegerField(default=0)


class VerificationRun(models.Model):
    """Operational record of a `verify` run (not a ledger fact: verifying must not move the head)."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        PASSED = "passed"
        FAILED = "failed"

    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    requested_by = models.CharField(max_length=255)
    requested_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True)
    head_position = models.BigIntegerField(null=True)
    head_hash = models.CharField(max_length=64, blank=True)
    summary = models.TextField(blank=True)


class Lease(models.Model):
    """Operational record of running work and the live process holding it (ledger/leases.py).

    Not a ledger fact: heartbeats must not append events. The work's start and end are events of
    its own stream; a lease whose process died is ended by the reaper with an `…Abandoned` event."""

    key = models.CharField(max_length=255, primary_key=True)  # the work's stream, e.g. rerun/<id>
    kind = models.CharField(max_length=40)  # names the owning app's handler that closes it
    subject = models.CharField(max_length=255)  # what that handler is given (a re-run id, a round id…)
    host = models.CharField(max_length=255)
    pid = models.IntegerField()
    process = models.CharField(max_length=200)  # boot id, pid namespace, start time: tells a dead local pid
    scratch = models.CharField(max_length=1000, blank=True)  # the work's scratch folder, removed with the lease
    started_at = models.DateTimeField()
    heartbeat_at = models.DateTimeField(db_index=True)


# ---- projections -------------------------------------------------------------------------
# Rows hold plain JSON-like values only (timestamps as ISO text) so that a live table and a
# scratch replay can be compared value for value.


class StreamHead(models.Model):
    stream = models.CharField(max_length=255, primary_key=True)
    version = models.PositiveIntegerField()
    first_position = models.BigIntegerField()
    last_position = models.BigIntegerField()
    last_type = models.CharField(max_length=100)
    last_recorded_at = models.CharField(max_length=40)


class EventTypeCount(models.Model):
    type = models.CharField(max_length=100, primary_key=True)
    count = models.BigIntegerField()


class KnownLedger(models.Model):
    """This ledger's identity and every ledger whose events were imported into it."""

    ledger_id = models.CharField(max_length=36, primary_key=True)
    name = models.CharField(max_length=255)
    position = models.BigIntegerField()
    imported = models.BooleanField()


class Checkpoint(models.Model):
    position = models.BigIntegerField(primary_key=True)
    ledger_id = models.CharField(max_length=36)
    head_position = models.BigIntegerField()
    head_hash = models.CharField(max_length=64)
    public_key = models.CharField(max_length=100)
    imported = models.BooleanField()


class ResultStatus(models.Model):
    """Status of a reported result as reviewers last decided it; history stays in the events."""

    result = models.CharField(max_length=255, primary_key=True)
    status = models.CharField(max_length=20)
    value = models.FloatField(null=True)
    unit = models.CharField(max_length=20, blank=True)
    revisions = models.PositiveIntegerField()
    last_reason = models.TextField(blank=True)
    last_position = models.BigIntegerField()


class ResultVersion(models.Model):
    """How many times a result's value has been set: each admitted verdict and each revision
    makes a new version, and sign-offs count only on the current one."""

    result = models.CharField(max_length=255, primary_key=True)
    version = models.PositiveIntegerField()
    position = models.BigIntegerField()  # the event that made this version


class SignOff(models.Model):
    key = models.CharField(max_length=400, primary_key=True)
    result = models.CharField(max_length=255, db_index=True)
    result_version = models.PositiveIntegerField()
    reviewer = models.CharField(max_length=255)
    position = models.BigIntegerField()
    signed_at = models.CharField(max_length=40)
