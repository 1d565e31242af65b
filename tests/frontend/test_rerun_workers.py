"""The README's worker pair (a prefork worker and beat) running re-runs against the real broker.

A module of their own: the pair is started once per module and beat reaps every second with a
3 s lease, so any other test's live work in the same module would be closed as dead under it.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from frontend.reruns import request_rerun, rerun_status, run_rerun
from ledger.models import Lease
from ledger.selectors import stream_events
from ledger.verification import verify_ledger
from measurement.models import OperatorResult
from tests.conftest import broker_unreachable, subprocess_env
from tests.frontend.test_reruns import QUICK_FIELDS, ROOT, wait_until_ended
from tests.frontend.test_tables import TINY
from tests.measurement.workers import wait_for


# ---- dead workers ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def readme_worker(django_db_setup, django_db_blocker, tmp_path_factory):
    """The README's worker command, `celery -A config worker -Q cpu -l info` (the prefork pool),
    and `celery -A config beat -l info`, as processes of their own against the test database and
    the real broker; leases refreshed every 0.5 s and dead after 3 s, the reaper every second.
    One pair for the module: each start-up costs seconds."""
    if not settings.CELERY_BROKER_URL:
        pytest.skip("CELERY_BROKER_URL is not set: there is no broker for a real worker")
    problem = broker_unreachable()
    if problem:
        pytest.skip(problem)
    with django_db_blocker.unblock():
        env = subprocess_env(WORKER_HEARTBEAT_S="0.5", WORKER_LEASE_S="3", REAPER_INTERVAL_S="1",
                             FORGESTENCIL_VAR_DIR=str(settings.VAR_DIR))  # this process's signing key: verify trusts it
    logs = tmp_path_factory.mktemp("workers")
    celery = str(Path(sys.executable).parent / "celery")
    started = {}
    for name, command in (("worker", ["worker", "-Q", "cpu"]), ("beat", ["beat"])):
        log = (logs / f"{name}.log").open("w")
        started[name] = (subprocess.Popen([celery, "-A", "config", *command, "-l", "info"], cwd=ROOT, env=env,
                                          stdout=log, stderr=subprocess.STDOUT), logs / f"{name}.log")
    try:
        for name, marker in (("worker", " ready."), ("beat", "beat: Starting")):
            process, path = started[name]
            wait_for(lambda: marker in path.read_text() or process.poll() is not None, f"the {name} to start", 180)
            assert process.poll() is None, path.read_text()[-3000:]
        yield started["worker"][1]
    finally:
        for process, _ in started.values():
            process.terminate()  # the worker's warm shutdown: a running task ends first
        for process, _ in started.values():
            try:
                process.wait(timeout=120)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@pytest.mark.services
@pytest.mark.one_database  # in the two-pass `./dev test`: in the PostgreSQL pass, with the real services
def test_the_readme_worker_command_measures_a_rerun_to_a_verdict(readme_worker, transactional_ledger, speed_rule_lifted, admit):
    admit()
    rerun_id = request_rerun("case", TINY, "user:alice", protocol=QUICK_FIELDS)  # dispatched to the cpu queue at commit
    status, _ = wait_until_ended(rerun_id)
    assert status["state"] == "finished", status["detail"]
    outcome = status["outcome"]
    assert outcome["verdict"] in ("reconfirmed", "revised", "inconclusive")
    verdict = next(e for e in stream_events(f"operator/cpu/{TINY}") if e.position == outcome["verdict_position"])
    measured = next(e for e in stream_events(f"operator/cpu/{TINY}") if str(e.event_id) == verdict.data["measurement"])
    assert verdict.actor == "user:alice" and (measured.data["protocol"]["passes"], measured.data["protocol"]["launches"]) == (2, 2)
    assert all(v["timing"] for v in measured.data["variants"] if v["correctness"]["correct"])  # harness children ran
    # the worker logs the task's success after the task has recorded its outcome: wait for the line, never race it
    succeeded = r"Task frontend\.rerun\[[0-9a-f-]+\] succeeded"
    wait_for(lambda: re.search(succeeded, readme_worker.read_text()), "the worker to log the re-run task's success", 60)
    assert "ForkPoolWorker" in readme_worker.read_text()


@pytest.mark.services
@pytest.mark.one_database
def test_a_worker_killed_mid_rerun_leaves_it_abandoned_and_the_next_one_takes_new_work(readme_worker, transactional_ledger,
                                                                                    speed_rule_lifted, admit):
    from ledger.tasks import verify_ledger_task
    from ledger.verification import request_verification

    admit()
    # The canonical 7 x 5 passes: tens of seconds of measuring, so the kill lands mid-run.
    rerun_id = request_rerun("case", TINY, "user:alice", protocol={"max_attempts": 1})
    key = f"rerun/{rerun_id}"
    lease = wait_for(lambda: Lease.objects.filter(key=key).first(), "the worker's claim")
    wait_for(lambda: rerun_status(rerun_id)["progress"], "the first progress message")
    assert rerun_status(rerun_id)["state"] == "running" and lease.pid != os.getpid()
    os.kill(lease.pid, signal.SIGKILL)  # the pool process running it
    status, _ = wait_until_ended(rerun_id, 120)  # the reaper, run by beat every second
    assert status["state"] == "abandoned" and f"pid {lease.pid}" in status["detail"], status
    abandoned = stream_events(key)[-1]
    assert abandoned.type == "RerunAbandoned" and abandoned.actor == "system:reaper"
    assert (abandoned.data["worker"]["host"], abandoned.data["worker"]["pid"]) == (lease.host, lease.pid)
    assert not Lease.objects.filter(key=key).exists()
    assert not OperatorResult.objects.filter(status="retracted").exists()
    run = request_verification("user:test")  # new work: the worker's new pool process takes it
    assert verify_ledger_task.delay(run.pk).get(timeout=120) == "passed"
    assert verify_ledger().ok
    page = rerun_status(rerun_id)
    assert page["state"] == "abandoned" and run_rerun(rerun_id)["state"] == "abandoned"  # a redelivery changes nothing
