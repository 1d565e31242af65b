"""Event types owned by the audit UI: gate re-runs requested by reviewers.

A re-run's own stream (rerun/<id>) records the request, the worker's claim, its progress
messages and the outcome, or that its worker died (RerunAbandoned, by the reaper); the gate's
verdict and any ResultDowngraded / ResultRetracted go to the result's stream, written by the
gate itself.
"""
from __future__ import annotations

from typing import Any, Literal, Optional

from ledger.event_types import Payload, event_type
from ledger.leases import WorkerIdentity

RerunKind = Literal["case", "app"]


@event_type("RerunRequested", owner="frontend")
class RerunRequested(Payload):
    rerun: str
    kind: RerunKind
    target: str  # the case id or the application's name
    backend: str  # the case's backend, or the application's architecture
    result: str  # the result key the re-run may revise


@event_type("RerunRequested", owner="frontend", version=2, upcast_from_previous=lambda payload: {**payload, "protocol": None})
class RerunRequestedV2(Payload):
    """Version 2 may name a shorter or longer timing protocol than the backend's default (the
    ProtocolSettings fields passes, launches, warmup, max_attempts; operator re-runs only): a
    re-run that came back inconclusive can be asked with more attempts. The measurement event
    records the protocol used either way."""

    rerun: str
    kind: RerunKind
    target: str
    backend: str
    result: str
    protocol: Optional[dict[str, int]]


@event_type("RerunStarted", owner="frontend")
class RerunStarted(Payload):
    """A worker's claim (appended at stream version 1, so only one worker ever runs it)."""

    rerun: str


@event_type("RerunProgress", owner="frontend")
class RerunProgress(Payload):
    rerun: str
    message: str


@event_type("RerunFinished", owner="frontend")
class RerunFinished(Payload):
    rerun: str
    state: Literal["finished", "failed"]
    outcome: Optional[dict[str, Any]] = None  # verdict, value, revision; None when failed
    detail: str = ""
    history_line: Optional[str] = None


@event_type("RerunAbandoned", owner="frontend")
class RerunAbandoned(Payload):
    """The reaper's: the worker running the re-run died (ledger/leases.py). Appended at the stream's
    version as read, so it never lands after the re-run's own end (nor its end after it)."""

    rerun: str
    reason: str
    worker: WorkerIdentity


@event_type("RerunBatchRequested", owner="frontend")
class RerunBatchRequested(Payload):
    """A whole-matrix re-run fanned out to the workers (frontend/batches.py): one re-run per standing
    result of `backend`, requested in the same transaction, each its own task; this names them, so
    the command and the re-runs page can follow the batch and sum it up."""

    batch: str
    backend: str
    reruns: list[dict[str, str]]  # {"rerun": id, "case": case id}, in case order
    protocol: Optional[dict[str, int]]
