"""Two real workers gate two different candidates for the same case at the same time (issue 21): each
reads the result stream before measuring and appends its verdict at the version it read, so exactly
one admission lands per decision, the faster kernel stands, and the other verdict is decided again
against it and says so. Real Redis, the test database (PostgreSQL in CI), real worker processes,
real measurements; the order of the two appends is made with a barrier the test releases
(tests/measurement/gate_barrier.py), never raced."""
from __future__ import annotations

import uuid

import pytest

from ledger.selectors import stream_events
from ledger.verification import verify_ledger
from measurement.models import OperatorResult
from measurement.reports import source_hash
from measurement.services import result_key
from tests.measurement.gate_barrier import gate_at_barrier
from tests.measurement.test_gate_concurrency import CASE, FAST, QUICK, SLOW
from tests.measurement.workers import celery_workers, skip_without_broker, wait_for

KEY = result_key("cpu", CASE)
pytestmark = [pytest.mark.services, pytest.mark.one_database]


def test_two_workers_gating_one_case_admit_once_and_the_slower_verdict_is_decided_again(transactional_ledger, tmp_path):
    skip_without_broker()
    queues = [f"gate-{name}-{uuid.uuid4().hex[:8]}" for name in ("fast", "slow")]  # one worker each: nothing left over
    with celery_workers(tmp_path, queues, include="tests.measurement.gate_barrier") as logs:
        tasks = {name: gate_at_barrier.apply_async(
            args=[CASE, kernel.source, kernel.launch, QUICK.__dict__, str(tmp_path), name], queue=queue)
            for name, kernel, queue in (("fast", FAST, queues[0]), ("slow", SLOW, queues[1]))}
        wait_for(lambda: all((tmp_path / f"{name}.measured").exists() for name in tasks), "both workers to measure", 600)
        assert not [e for e in stream_events(KEY) if e.type == "GateVerdict"]  # both measured against no kernel
        (tmp_path / "fast.release").touch()
        fast = tasks["fast"].get(timeout=300)
        (tmp_path / "slow.release").touch()
        slow = tasks["slow"].get(timeout=600)
    texts = [log.read_text() for log in logs]  # once the workers have stopped: a task's last log line comes after its result
    assert fast["verdict"] == "admitted" and fast["measurements"] == 1, fast
    assert slow["verdict"] == "rejected" and slow["reasons"] == ["regresses_prior_best"], slow
    assert slow["detail"].startswith("decided again: the result changed while this candidate was measured")
    assert slow["measurements"] == 2  # measured again, this time beside the admitted kernel
    verdicts = [e for e in stream_events(KEY) if e.type == "GateVerdict"]
    assert [(v.actor, v.data["verdict"]) for v in verdicts] == [("agent:fast", "admitted"), ("agent:slow", "rejected")]
    assert verdicts[1].data["prior_best"]["source_hash"] == source_hash(FAST.source)
    assert 0 < verdicts[1].data["prior_best"]["median"] < verdicts[1].data["candidate_median"]
    row = OperatorResult.objects.get(result=KEY)
    assert (row.source, row.status, row.revisions) == (FAST.source, "admitted", 0)  # the faster kernel stands
    measured = [e for e in stream_events(KEY) if e.type == "CandidateMeasured"]
    assert len(measured) == 2  # the slower candidate's stale first measurement is not recorded
    assert all(m.data["description"]["worker"]["device_index"] is None for m in measured)  # CPU workers: no device
    assert all("ForkPoolWorker" in text and "tests.gate_at_barrier" in text for text in texts)
    assert verify_ledger().ok
