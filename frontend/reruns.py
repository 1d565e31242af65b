"""Gate re-runs requested by reviewers, run as Celery tasks, with progress visible while they run.

A re-run is a stream of events (RerunRequested → RerunStarted → RerunProgress… →
RerunFinished) projected into `RerunRow`, which a page polls. The work itself is the gate's
own re-run (measurement.services.rerun_gate, appgate.services.rerun): it records the new
verdict and, when the result no longer holds, the ResultDowngraded / ResultRetracted event.

Dispatch: with a broker the task goes to the `cpu` or `gpu` queue. Without one (the embedded
default) Celery runs tasks eagerly, i.e. inside the HTTP request that asked for it, and the page
could show no progress; so then the eager task runs on a daemon thread of the web process,
started after the request's transaction commits. That thread dies with the process: a re-run
that was running then stays "running" (request a new one).
"""
from __future__ import annotations

import threading
import uuid
from typing import Any

from django.conf import settings
from django.db import connections, transaction

from appgate.models import AppRow
from ledger.errors import ConcurrencyError
from ledger.models import Event
from ledger.services import NewEvent, append
from measurement.harness.cases import CaseError, parse_case
from measurement.models import OperatorResult

from .models import RerunRow
from .provenance import UnknownResult
from .tables import STANDING, operator_result_key

KINDS = ("case", "app")


class RerunError(ValueError):
    """A re-run that cannot be requested; the message says why."""


class UnknownRerun(LookupError):
    pass


def _stream(rerun_id: str) -> str:
    return f"rerun/{rerun_id}"


def _target(kind: str, target: str, backend: str) -> tuple[str, str, str]:
    """(result key, backend, status) of what a re-run would revise."""
    if kind == "case":
        try:
            parse_case(target)  # one spelling per case: an alias is refused with the canonical id
        except CaseError as error:
            raise RerunError(str(error)) from None
        key = operator_result_key(backend, target)
        status = OperatorResult.objects.filter(result=key).values_list("status", flat=True).first()
        if status is None:
            raise UnknownResult(f"no kernel was ever admitted for {target} on the {backend} backend")
        return key, backend, status
    row = AppRow.objects.filter(name=target).values("result", "architecture", "status").first()
    if row is None:
        raise UnknownResult(f"no application named {target!r} is registered")
    return row["result"], row["architecture"], row["status"] or "never gated"


def request_rerun(kind: str, target: str, actor: str, backend: str = "cpu") -> str:
    """Record the request and dispatch the task once it is committed; returns the re-run id."""
    if kind not in KINDS:
        raise RerunError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
    result, backend, status = _target(kind, target, backend)
    if status not in STANDING:
        raise RerunError(f"{result} has no standing result to re-run (status: {status})")
    rerun_id = str(uuid.uuid4())
    append(NewEvent(stream=_stream(rerun_id), type="RerunRequested", actor=actor, expected_version=0, payload={
        "rerun": rerun_id, "kind": kind, "target": target, "backend": backend, "result": result}))
    queue = "gpu" if backend == "cuda" else "cpu"
    transaction.on_commit(lambda: dispatch(rerun_id, queue))
    return rerun_id


def dispatch(rerun_id: str, queue: str) -> None:
    from .tasks import rerun_task

    if settings.CELERY_TASK_ALWAYS_EAGER:
        threading.Thread(target=_run_eagerly, args=(rerun_id,), name=f"rerun-{rerun_id[:8]}", daemon=True).start()
    else:
        rerun_task.apply_async(args=[rerun_id], queue=queue)


def _run_eagerly(rerun_id: str) -> None:
    from .tasks import rerun_task

    try:
        rerun_task.apply(args=[rerun_id])
    finally:
        connections.close_all()  # this thread's own connections


def run_rerun(rerun_id: str) -> dict[str, Any]:
    """Carry out a queued re-run. Idempotent: a re-run already claimed by a worker (running or
    ended) is returned as it stands, never run twice."""
    row = RerunRow.objects.filter(rerun=rerun_id).first()
    if row is None:
        raise UnknownRerun(f"no re-run {rerun_id}")
    stream, actor = _stream(rerun_id), row.requested_by
    try:
        append(NewEvent(stream=stream, type="RerunStarted", actor=actor, expected_version=1, payload={"rerun": rerun_id}))
    except ConcurrencyError:
        return rerun_status(rerun_id)

    def say(message: str) -> None:
        append(NewEvent(stream=stream, type="RerunProgress", actor=actor, payload={"rerun": rerun_id, "message": message}))

    before = _standing(row)
    try:
        if row.kind == "case":
            from measurement.services import rerun_gate

            outcome, revision = rerun_gate(row.target, row.backend, actor, progress=say)
            value = outcome.speedup
        else:
            from appgate.services import rerun

            outcome, revision = rerun(row.target, actor, progress=say)
            value = outcome.headline
    except Exception as error:  # any failure of the gate run is this re-run's outcome, not the worker's crash
        append(NewEvent(stream=stream, type="RerunFinished", actor=actor, payload={
            "rerun": rerun_id, "state": "failed", "detail": f"{type(error).__name__}: {error}"}))
        return rerun_status(rerun_id)
    verdict = outcome.verdict_event
    result = {
        "verdict": outcome.verdict, "reasons": outcome.reasons, "detail": outcome.detail, "value": value,
        "verdict_position": verdict.position, "before": before,
        "revision": None if revision is None else {
            "type": revision.type, "position": revision.position, "reason": revision.data["reason"],
            "from_value": revision.data.get("from_value"), "to_value": revision.data.get("to_value")},
    }
    append(NewEvent(stream=stream, type="RerunFinished", actor=actor, payload={
        "rerun": rerun_id, "state": "finished", "outcome": result, "detail": outcome.detail,
        "history_line": history_line(before, verdict, value, revision)}))
    return rerun_status(rerun_id)


def _standing(row: RerunRow) -> dict[str, Any]:
    """The result's value and admission date before the re-run, for its history line."""
    if row.kind == "case":
        current = OperatorResult.objects.filter(result=row.result).values("speedup", "verdict_event").first() or {}
        value, verdict = current.get("speedup"), current.get("verdict_event")
    else:
        current = AppRow.objects.filter(name=row.target).values("headline", "verdict_event").first() or {}
        value, verdict = current.get("headline"), current.get("verdict_event")
    since = Event.objects.filter(event_id=verdict).values_list("recorded_at", flat=True).first() if verdict else None
    return {"value": value, "since": since.date().isoformat() if since else None}


def history_line(before: dict[str, Any], verdict, value: float | None, revision) -> str:
    """"was 2.310× on 2026-01-02, downgraded to 1.940× on 2026-02-03 by re-run #57, because …"."""
    was = f"was {before['value']:.3f}× on {before['since']}" if before["value"] is not None else "had no value"
    day = verdict.recorded_at[:10]
    if revision is None:
        measured = f"{value:.3f}×" if value is not None else "no value"
        return f"{was}; re-run #{verdict.position} on {day} measured {measured}: the result holds"
    if revision.type == "ResultDowngraded":
        return (f"{was}, downgraded to {revision.data['to_value']:.3f}× on {day} by re-run #{verdict.position}, "
                f"because {revision.data['reason']}")
    return f"{was}, retracted on {day} by re-run #{verdict.position}, because {revision.data['reason']}"


def _as_dict(row: RerunRow) -> dict[str, Any]:
    return {"id": row.rerun, "kind": row.kind, "target": row.target, "backend": row.backend, "result": row.result,
            "requested_by": row.requested_by, "requested_at": row.requested_at, "state": row.state,
            "progress": row.progress, "outcome": row.outcome, "detail": row.detail, "history_line": row.history_line}


def rerun_status(rerun_id: str) -> dict[str, Any]:
    row = RerunRow.objects.filter(rerun=rerun_id).first()
    if row is None:
        raise UnknownRerun(f"no re-run {rerun_id}")
    return _as_dict(row)


def recent_reruns(result: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
    rows = RerunRow.objects.order_by("-requested_at")
    if result:
        rows = rows.filter(result=result)
    return [_as_dict(row) for row in rows[:limit]]
