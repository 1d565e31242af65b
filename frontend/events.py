"""Event types owned by the audit UI: gate re-runs requested by reviewers.

A re-run's own stream (rerun/<id>) records the request, the worker's claim, its progress
messages and the outcome; the gate's verdict and any ResultDowngraded / ResultRetracted go to
the result's stream, written by the gate itself.
"""
from __future__ import annotations

from typing import Any, Literal, Optional

from ledger.event_types import Payload, event_type

RerunKind = Literal["case", "app"]


@event_type("RerunRequested", owner="frontend")
class RerunRequested(Payload):
    rerun: str
    kind: RerunKind
    target: str  # the case id or the application's name
    backend: str  # the case's backend, or the application's architecture
    result: str  # the result key the re-run may revise


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
