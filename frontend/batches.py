"""Whole-matrix gate re-runs fanned out to the workers (issue 21): one re-run per standing operator
result of a backend, each its own Celery task, followed until every one has ended, then summed up.

Why re-runs: a re-run (frontend.reruns) is already the unit a worker claims once (RerunStarted at
stream version 1, with a lease), that a dead worker's reaper closes (RerunAbandoned), and that a
page shows while it runs. A batch is those re-runs requested in one transaction, plus a
`RerunBatchRequested` event naming them (`rerun-batch/<id>`); each task carries a re-run id only
and calls the gate's re-run service. A task delivered twice (acks_late after a pool process died,
or the broker's visibility timeout) finds its re-run claimed or closed and does nothing, so every
case is measured at most once per batch; the reaper, run by beat and by `follow` itself, ends a
dead worker's re-run as abandoned, which the summary counts as failed.

The fan-in reads the ledger, not the tasks' results (a killed worker never answers): `follow`
polls the re-runs' rows until all have ended and reports each as it ends, as the in-process
`measurement.reruns.rerun_all` does; the outcomes are the same `RerunOutcome`s, so the command,
the benchmark and the counts are one piece of code either way.
"""
from __future__ import annotations

import time
import uuid
from datetime import datetime
from typing import Any, Callable

from django.conf import settings
from django.db import transaction

from ledger import leases
from ledger.models import Event
from ledger.selectors import stream_events
from ledger.services import NewEvent, append, record_from_row
from measurement.reruns import RerunOutcome
from measurement.selectors import standing_operator_results

from .models import RerunRow
from .reruns import ENDED, RerunError, UnknownRerun, queue_of, request_rerun, rerun_status


class BatchError(RerunError):
    """A batch that cannot be requested, or whose re-runs no worker takes; the message says why."""


def _stream(batch_id: str) -> str:
    return f"rerun-batch/{batch_id}"


def request_batch(backend: str, actor: str, *, protocol: dict[str, int] | None = None,
                  only: set[str] | None = None) -> str:
    """Request a re-run of every standing operator result of `backend` (of `only`, when given), in
    case order, and the batch naming them, in one transaction; each is dispatched to its queue when
    it commits. Returns the batch id."""
    if settings.CELERY_TASK_ALWAYS_EAGER:
        raise BatchError("fanning out needs a broker (CELERY_BROKER_URL) and workers on the "
                         f"`{queue_of(backend)}` queue; without one, re-run in this process")
    cases = [row.case for row in standing_operator_results(backend) if only is None or row.case in only]
    if not cases:
        raise BatchError(f"no standing {backend} result to re-run")
    batch_id = str(uuid.uuid4())
    with transaction.atomic():  # all re-runs and their batch, or none; dispatched at the commit
        named = [{"rerun": request_rerun("case", case, actor, backend, protocol=protocol), "case": case} for case in cases]
        append(NewEvent(stream=_stream(batch_id), type="RerunBatchRequested", actor=actor, expected_version=0,
                        payload={"batch": batch_id, "backend": backend, "reruns": named, "protocol": protocol}))
    return batch_id


def batch_request(batch_id: str) -> dict[str, Any]:
    """The batch's RerunBatchRequested payload; UnknownRerun when there is none."""
    events = stream_events(_stream(batch_id))
    if not events:
        raise UnknownRerun(f"no re-run batch {batch_id}")
    return events[0].data


def batch_status(batch_id: str) -> dict[str, Any]:
    """Where the batch stands: its re-runs as their pages show them (case order), how many have
    ended, and the count of each state."""
    request = batch_request(batch_id)
    rows = [{**rerun_status(item["rerun"]), "case": item["case"]} for item in request["reruns"]]
    states = {state: sum(row["state"] == state for row in rows) for state in dict.fromkeys(row["state"] for row in rows)}
    return {"batch": batch_id, "backend": request["backend"], "total": len(rows),
            "ended": sum(row["state"] in ENDED for row in rows), "states": states, "reruns": rows}


def outcome(case: str, status: dict[str, Any]) -> RerunOutcome:
    """An ended re-run as the whole-matrix re-run reports a case: its verdict and revision, or, when
    it failed or its worker died (abandoned), the reason as its error. Seconds: from the worker's
    claim to the end, by the ledger's times of record."""
    events = stream_events(f"rerun/{status['id']}")
    times = [datetime.fromisoformat(e.recorded_at) for e in events if e.type != "RerunRequested"]
    seconds = (times[-1] - times[0]).total_seconds() if len(times) > 1 else 0.0
    found = status["outcome"] or {}
    item = RerunOutcome(case, (found.get("before") or {}).get("value"), seconds)
    if status["state"] != "finished":
        item.error = f"{status['state']}: {status['detail']}"
        return item
    verdict = record_from_row(Event.objects.get(position=found["verdict_position"])).data
    item.verdict, item.speedup, item.reasons = found["verdict"], found["value"], found["reasons"]
    item.speedup_ci = tuple(verdict["speedup_ci"]) if verdict["speedup_ci"] else None
    item.inconclusive = found["inconclusive"]
    item.revision = found["revision"]["type"] if found["revision"] else None
    item.left_out = list(verdict.get("left_out") or [])
    return item


def follow(batch_id: str, progress: Callable[[int, int, RerunOutcome], None] | None = None,
           poll: float = 0.5) -> list[RerunOutcome]:
    """Wait until every re-run of the batch has ended; `progress(n, total, outcome)` as each ends.
    The outcomes in case order. Runs the reaper on the batch's running re-runs every
    REAPER_INTERVAL_S (beat may not run here: a dead worker's re-run must not be waited on for
    good). BatchError when no re-run was running and nothing changed for FORGE_ROUND_CLAIM_TIMEOUT_S
    (no worker on the queue): the re-runs stay queued, and a worker started later runs them."""
    items = batch_request(batch_id)["reruns"]
    ended: dict[str, RerunOutcome] = {}
    last: dict[str, str] = {}
    changed = next_reap = time.monotonic()
    while len(ended) < len(items):
        states = dict(RerunRow.objects.filter(rerun__in=[i["rerun"] for i in items]).values_list("rerun", "state"))
        if states != last:
            last, changed = states, time.monotonic()
        for item in items:
            if item["rerun"] not in ended and states[item["rerun"]] in ENDED:
                ended[item["rerun"]] = outcome(item["case"], rerun_status(item["rerun"]))
                if progress is not None:
                    progress(len(ended), len(items), ended[item["rerun"]])
        running = [f"rerun/{rerun}" for rerun, state in states.items() if state == "running"]
        if time.monotonic() >= next_reap and running:
            leases.reap(keys=running)
            next_reap = time.monotonic() + settings.REAPER_INTERVAL_S
        if not running and len(ended) < len(items) and time.monotonic() - changed > settings.FORGE_ROUND_CLAIM_TIMEOUT_S:
            raise BatchError(f"no worker took a re-run of batch {batch_id} within {settings.FORGE_ROUND_CLAIM_TIMEOUT_S:g} s: "
                             f"{len(ended)} of {len(items)} ended; the rest stay queued until a worker runs them")
        time.sleep(poll)
    return [ended[item["rerun"]] for item in items]
