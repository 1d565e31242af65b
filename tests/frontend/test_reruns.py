"""Gate re-runs requested through frontend.reruns: a real task on a real tiny CPU case, its
progress readable while it runs, its outcome and history line, and idempotence."""
import time

import pytest

from frontend.provenance import UnknownResult
from frontend.reruns import RerunError, request_rerun, rerun_status, run_rerun
from ledger.models import Event
from ledger.review import retract
from measurement.harness import plan
from tests.frontend.test_tables import QUICK, TINY


def wait_until_ended(rerun_id: str, seconds: float = 300) -> tuple[dict, set[str]]:
    """Poll as a page would; returns the final status and every state seen on the way."""
    seen = set()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        status = rerun_status(rerun_id)
        seen.add(status["state"])
        if status["state"] in ("finished", "failed"):
            return status, seen
        time.sleep(0.05)
    raise AssertionError(f"re-run {rerun_id} still {status['state']} after {seconds} s: {status['progress']}")


def test_a_rerun_runs_in_the_background_and_finishes_with_an_outcome(transactional_ledger, speed_rule_lifted, monkeypatch,
                                                                      admit, settings):
    monkeypatch.setitem(plan.DEFAULT_PROTOCOL, "cpu", QUICK)  # the re-run's protocol: short, every step still real
    settings.CELERY_TASK_ALWAYS_EAGER = True  # the embedded default's thread (the browser tests take the worker path)
    admitted = admit()
    rerun_id = request_rerun("case", TINY, "user:alice")  # no broker here: a thread, after commit
    assert rerun_status(rerun_id)["state"] in ("queued", "running")
    status, seen = wait_until_ended(rerun_id)
    assert status["state"] == "finished", status["detail"]
    assert "running" in seen or "queued" in seen
    assert any("timing" in message for message in status["progress"])
    outcome = status["outcome"]
    assert outcome["verdict"] in ("reconfirmed", "revised")
    verdict = Event.objects.get(position=outcome["verdict_position"])
    assert verdict.type == "GateVerdict" and verdict.actor == "user:alice"
    assert outcome["before"]["value"] == admitted.speedup
    assert status["history_line"].startswith(f"was {admitted.speedup:.3f}× on ")
    assert f"re-run #{outcome['verdict_position']}" in status["history_line"]
    if outcome["revision"]:
        assert Event.objects.get(position=outcome["revision"]["position"]).type in ("ResultDowngraded", "ResultRetracted")
    events = Event.objects.filter(stream=f"rerun/{rerun_id}").count()
    assert run_rerun(rerun_id) == status  # idempotent: claimed once, never run again
    assert Event.objects.filter(stream=f"rerun/{rerun_id}").count() == events


def test_requests_that_cannot_run_are_refused(ledger, speed_rule_lifted, admit):
    with pytest.raises(UnknownResult):
        request_rerun("case", TINY, "user:alice")
    with pytest.raises(UnknownResult):
        request_rerun("app", "nope", "user:alice")
    with pytest.raises(RerunError, match="kind must be"):
        request_rerun("kernel", TINY, "user:alice")
    admit()
    retract(f"operator/cpu/{TINY}", "measured on a throttled machine", "user:maintainer")
    with pytest.raises(RerunError, match="no standing result"):
        request_rerun("case", TINY, "user:alice")


def test_a_failing_gate_run_is_recorded_as_failed(ledger, speed_rule_lifted, monkeypatch, admit):
    admit()
    rerun_id = request_rerun("case", TINY, "user:alice")  # inside the test's transaction: not dispatched
    assert rerun_status(rerun_id)["state"] == "queued"
    monkeypatch.setattr("measurement.services.measure", lambda *args, **kwargs: (_ for _ in ()).throw(OSError("no compiler")))
    status = run_rerun(rerun_id)
    assert status["state"] == "failed" and status["detail"] == "OSError: no compiler" and status["outcome"] is None
