"""Gate re-runs requested by reviewers, run as Celery tasks, with progress visible while they run.

A re-run is a stream of events (RerunRequested → RerunStarted → RerunProgress… →
RerunFinished) projected into `RerunRow`, which a page polls. The work itself is the gate's
own re-run (measurement.reruns.rerun_gate, appgate.services.rerun): it records the new
verdict and, when the result no longer holds, the ResultDowngraded / ResultRetracted event.

A re-run whose measurement is noisy, or whose speedup CI spans the public bound, is
`inconclusive` (measurement.reruns): it changes nothing, and another re-run can be asked later.

Dispatch: with a broker the task goes to the `cpu` or `gpu` queue. Without one (the embedded
default) Celery runs tasks eagerly, i.e. inside the HTTP request that asked for it, and the page
could show no progress; so then the eager task runs on a daemon thread of the web process,
started after the request's transaction commits. The web process stands in for the `cpu` queue
only: a CUDA result's re-run needs a worker on the `gpu` queue, so without a broker it is refused
with that reason (and the pages offer no button), instead of failing on a machine without a GPU.

Dead workers: the claim (RerunStarted) takes the re-run's lease in the same transaction
(ledger/leases.py). When the process running it dies (a killed worker, a stopped web server),
the reaper appends RerunAbandoned with the reason and the worker's identity, and the page stops
saying "running". Every append of the worker names the stream version it expects, so its own end
and the reaper's never both land.
"""
from __future__ import annotations

import threading
import uuid
from typing import Any, Mapping

from django.conf import settings
from django.db import connections, transaction

from appgate.models import AppRow
from ledger import leases
from ledger.errors import ConcurrencyError
from ledger.models import Event, Lease
from ledger.selectors import events_at, stream_events
from ledger.services import NewEvent, append, iso_utc, record_from_row
from measurement.harness.cases import CaseError, parse_case
from measurement.harness.plan import DEFAULT_PROTOCOL, ProtocolSettings
from measurement.models import OperatorResult

from .models import RerunRow
from .provenance import UnknownResult
from .recorded import day
from .tables import BACKENDS, STANDING, known_value, operator_result_key

KINDS = ("case", "app")
PROTOCOL_FIELDS = ("passes", "launches", "warmup", "max_attempts")  # what a re-run request may change
ENDED = ("finished", "failed", "abandoned")
STATES = ("queued", "running", *ENDED)
FILTERS = {"state": STATES, "backend": BACKENDS, "kind": KINDS}  # of the re-runs page and GET /api/reruns/


class RerunError(ValueError):
    """A re-run that cannot be requested; the message says why."""


class UnknownRerun(LookupError):
    pass


def _stream(rerun_id: str) -> str:
    return f"rerun/{rerun_id}"


def queue_of(backend: str) -> str:
    return "gpu" if backend == "cuda" else "cpu"


def worker_missing(backend: str) -> str | None:
    """Why no re-run of this backend can run in this deployment (None: it can). Without a broker
    the web process runs re-runs itself, on the `cpu` queue's behalf only."""
    queue = queue_of(backend)
    if settings.CELERY_TASK_ALWAYS_EAGER and queue != "cpu":
        return (f"a {backend.upper()} re-run needs a worker on the `{queue}` queue: this server has no broker and runs "
                f"CPU re-runs only (set CELERY_BROKER_URL and run `celery -A config worker -Q {queue}` on a GPU host)")
    return None


def rerun_target(kind: str, target: str, backend: str) -> tuple[str, str, str]:
    """(result key, backend, status) of what a re-run would revise; RerunError / UnknownResult
    when there is none that stands, or no worker here could run it."""
    if kind not in KINDS:
        raise RerunError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
    result, backend, status = _target(kind, target, backend)
    if status not in STANDING:
        raise RerunError(f"{result} has no standing result to re-run (status: {status})")
    missing = worker_missing(backend)
    if missing:
        raise RerunError(missing)
    return result, backend, status


def still_standing(rerun: dict[str, Any]) -> bool:
    """Whether the result a re-run checked can be re-run again (it was not retracted meanwhile)."""
    try:
        rerun_target(rerun["kind"], rerun["target"], rerun["backend"])
    except (RerunError, UnknownResult):
        return False
    return True


def _target(kind: str, target: str, backend: str) -> tuple[str, str, str]:
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


def request_rerun(kind: str, target: str, actor: str, backend: str = "cpu", *, protocol: dict[str, int] | None = None) -> str:
    """Record the request and dispatch the task once it is committed; returns the re-run id.
    `protocol`: ProtocolSettings fields (passes, launches, warmup, max_attempts) that replace
    the backend's defaults for this re-run; operator re-runs only."""
    if protocol is not None and kind != "case":
        raise RerunError("only an operator re-run takes a timing protocol; an application's is in its manifest")
    if protocol is not None and (set(protocol) - set(PROTOCOL_FIELDS) or any(v < 1 for v in protocol.values())):
        raise RerunError(f"a re-run's protocol takes positive {', '.join(PROTOCOL_FIELDS)}, not {protocol}")
    result, backend, _ = rerun_target(kind, target, backend)
    rerun_id = str(uuid.uuid4())
    append(NewEvent(stream=_stream(rerun_id), type="RerunRequested", actor=actor, expected_version=0, payload={
        "rerun": rerun_id, "kind": kind, "target": target, "backend": backend, "result": result, "protocol": protocol}))
    transaction.on_commit(lambda: dispatch(rerun_id, queue_of(backend)))
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
    stream = _stream(rerun_id)
    try:
        with transaction.atomic():  # no claimed re-run without a lease, so none is left running for good
            append(NewEvent(stream=stream, type="RerunStarted", actor=row.requested_by, expected_version=1,
                            payload={"rerun": rerun_id}))
            lease = leases.take("rerun", rerun_id, stream)
    except (ConcurrencyError, leases.LeaseHeld):
        return rerun_status(rerun_id)
    with leases.holding(lease):
        try:
            _carry_out(row, stream)
        except ConcurrencyError:
            pass  # the reaper closed it meanwhile (its heartbeats were late): it stays abandoned
    return rerun_status(rerun_id)


def _carry_out(row: RerunRow, stream: str) -> None:
    """The claimed re-run's work. Each append expects the stream's next version: a ConcurrencyError
    means the reaper abandoned it, and nothing more is written to it."""
    rerun_id, actor = row.rerun, row.requested_by
    version = 2  # RerunRequested, RerunStarted

    def write(event_type: str, payload: dict[str, Any]) -> None:
        nonlocal version
        append(NewEvent(stream=stream, type=event_type, actor=actor, expected_version=version, payload={"rerun": rerun_id, **payload}))
        version += 1

    def say(message: str) -> None:
        write("RerunProgress", {"message": message})

    before = _standing(row)
    try:
        if row.kind == "case":
            from measurement.reruns import rerun_gate

            outcome, revision = rerun_gate(row.target, row.backend, actor, _protocol(stream, row.backend), progress=say)
            value = outcome.speedup
        else:
            from appgate.services import rerun

            outcome, revision = rerun(row.target, actor, progress=say)
            value = outcome.headline
    except ConcurrencyError:
        raise
    except Exception as error:  # any failure of the gate run is this re-run's outcome, not the worker's crash
        write("RerunFinished", {"state": "failed", "detail": f"{type(error).__name__}: {error}"})
        return
    verdict = outcome.verdict_event
    result = {
        "verdict": outcome.verdict, "reasons": outcome.reasons, "detail": outcome.detail, "value": value,
        "inconclusive": outcome.inconclusive, "verdict_position": verdict.position, "before": before,
        "revision": None if revision is None else {
            "type": revision.type, "position": revision.position, "reason": revision.data["reason"],
            "from_value": revision.data.get("from_value"), "to_value": revision.data.get("to_value")},
    }
    write("RerunFinished", {"state": "finished", "outcome": result, "detail": outcome.detail,
                            "history_line": history_line(before, verdict, value, revision, outcome.inconclusive)})


def _protocol(stream: str, backend: str) -> ProtocolSettings | None:
    asked = stream_events(stream)[0].data["protocol"]  # RerunRequested (version 1 payloads: None)
    return ProtocolSettings(**{**DEFAULT_PROTOCOL[backend].__dict__, **asked}) if asked else None


def abandon_rerun(rerun_id: str, reason: str, worker: dict[str, Any]) -> bool:
    """The reaper's handler for lease kind "rerun": the worker running it died. Appends at the
    version read, so a last message or end of the worker that lands first is read again."""
    return leases.append_while_open(_stream(rerun_id), RerunRow.objects.filter(rerun=rerun_id, state="running").exists,
                                    "RerunAbandoned", {"rerun": rerun_id, "reason": reason, "worker": worker})


def _standing(row: RerunRow) -> dict[str, Any]:
    """The result's value and admission date before the re-run, for its history line."""
    if row.kind == "case":
        current = OperatorResult.objects.filter(result=row.result).values("speedup", "verdict_event").first() or {}
        value, verdict = current.get("speedup"), current.get("verdict_event")
    else:
        current = AppRow.objects.filter(name=row.target).values("headline", "verdict_event").first() or {}
        value, verdict = current.get("headline"), current.get("verdict_event")
    admitted = Event.objects.filter(event_id=verdict).first() if verdict else None
    return {"value": value, "since": day(record_from_row(admitted)) if admitted else None}  # its time of record


def history_line(before: dict[str, Any], verdict, value: float | None, revision, inconclusive: str = "") -> str:
    """"was 2.310× on 2026-01-02, downgraded to 1.940× on 2026-02-03 by re-run #57, because …"."""
    was = f"was {before['value']:.3f}× on {before['since']}" if before["value"] is not None else "had no value"
    on = day(verdict)
    if inconclusive:
        return f"{was}; re-run #{verdict.position} on {on} was inconclusive ({inconclusive}): nothing was revised"
    if revision is None:
        measured = f"{value:.3f}×" if value is not None else "no value"
        return f"{was}; re-run #{verdict.position} on {on} measured {measured}: the result holds"
    if revision.type == "ResultDowngraded":
        return (f"{was}, downgraded to {revision.data['to_value']:.3f}× on {on} by re-run #{verdict.position}, "
                f"because {revision.data['reason']}")
    return f"{was}, retracted on {on} by re-run #{verdict.position}, because {revision.data['reason']}"


def _as_dict(row: RerunRow) -> dict[str, Any]:
    return {"id": row.rerun, "kind": row.kind, "target": row.target, "backend": row.backend, "result": row.result,
            "requested_by": row.requested_by, "requested_at": row.requested_at, "state": row.state,
            "progress": row.progress, "outcome": row.outcome, "detail": row.detail, "history_line": row.history_line}


def _with_left_out(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each re-run with `left_out`: the library baselines its verdict did not time, being out of
    contention (measurement.contenders; docs/measurement.md, "Re-runs time the contenders"), so a
    reviewer sees that its speedups over them are not this re-run's. Read from the verdict event
    itself, the one record of it (the RerunFinished outcome does not copy it); [] when it left none
    out, had no verdict, or was an application's (an AppGateVerdict records none)."""
    verdicts = events_at((row["outcome"] or {}).get("verdict_position") for row in rows)
    for row in rows:
        verdict = verdicts.get((row["outcome"] or {}).get("verdict_position"))
        row["left_out"] = list(verdict.data.get("left_out") or []) if verdict and verdict.type == "GateVerdict" else []
    return rows


def rerun_status(rerun_id: str) -> dict[str, Any]:
    """The re-run as its page shows it; a running one with its worker: host, pid, last heartbeat
    and whether that worker still lives (a dead one's re-run stays "running" until the reaper
    closes it, and the page says so instead of "measuring")."""
    row = RerunRow.objects.filter(rerun=rerun_id).first()
    if row is None:
        raise UnknownRerun(f"no re-run {rerun_id}")
    status = _with_left_out([_as_dict(row)])[0]
    if row.state == "running":
        key = _stream(rerun_id)
        lease = Lease.objects.filter(key=key).first()
        status["worker"] = None if lease is None else {
            "host": lease.host, "pid": lease.pid, "heartbeat_at": iso_utc(lease.heartbeat_at),
            "alive": leases.is_held(key) is not None}
    return status


def recent_reruns(result: str | None = None, limit: int = 50, *, state: str | None = None, backend: str | None = None,
                  kind: str | None = None) -> list[dict[str, Any]]:
    """Newest first. Filters are exact values (the pages and the API check them first)."""
    rows = RerunRow.objects.order_by("-requested_at")
    for field, value in (("result", result), ("state", state), ("backend", backend), ("kind", kind)):
        if value:
            rows = rows.filter(**{field: value})
    return _with_left_out([_as_dict(row) for row in rows[:limit]])


def listed(params: Mapping[str, str], limit: int = 50) -> list[dict[str, Any]]:
    """The re-runs a page or the API lists for its query: each of FILTERS a known value, matched
    ignoring case (TableQueryError names the known ones); `result` an exact result key."""
    query = {name: known_value(name, (params.get(name) or "").strip(), known) for name, known in FILTERS.items()}
    return recent_reruns((params.get("result") or "").strip() or None, limit, **query)
