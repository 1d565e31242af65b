"""Three real workers on Redis against the test database (PostgreSQL in CI) re-gate a small matrix
fanned out as one re-run task per case (issue 21; frontend/batches.py): the committed CPU
campaign's eight standing 64^3 / 512^2 results, each measured exactly once, the chain verifying,
the summary matching the events the workers wrote. Which worker takes which case is not asserted
(it is the broker's choice); every measurement names its worker's host. And the worker settings of
one worker per device (measurement/workers.py), with real worker processes."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from frontend.batches import BatchError, batch_status, follow, request_batch
from ledger.selectors import stream_events
from ledger.services import head
from ledger.transfer import import_ledger
from ledger.verification import verify_ledger
from measurement import workers
from measurement.reruns import rerun_counts
from measurement.selectors import standing_operator_results
from measurement.services import result_key
from tests.conftest import subprocess_env
from tests.measurement.workers import ROOT, celery_workers, skip_without_broker

CAMPAIGN = ROOT / "docs" / "benchmarks" / "forge_cpu_levers.jsonl"  # real admitted CPU results (docs/forge.md)
QUICK = {"passes": 2, "launches": 2, "warmup": 1, "max_attempts": 1}  # every step real, the time on cache flushes
pytestmark = [pytest.mark.services, pytest.mark.one_database]


def expected_outcome(case: str, after: int) -> tuple[str, float | None]:
    """What the ledger says a case's re-run found (its events after position `after`): the summary's
    outcome word and speedup, read from the events alone."""
    events = [e for e in stream_events(result_key("cpu", case)) if e.position > after]
    verdict = next(e for e in events if e.type == "GateVerdict").data
    revision = next((e.type for e in events if e.type in ("ResultRetracted", "ResultDowngraded")), None)
    word = {"ResultRetracted": "retracted", "ResultDowngraded": "downgraded"}.get(revision or "")
    return word or ("inconclusive" if verdict["verdict"] == "inconclusive" else "reconfirmed"), verdict["speedup"]


def test_three_workers_regate_a_matrix_each_case_once_and_the_summary_matches(transactional_ledger, tmp_path):
    skip_without_broker()
    import_ledger(CAMPAIGN, "user:test")
    cases = [row.case for row in standing_operator_results("cpu")]
    assert len(cases) == 8
    imported = head()[0]
    seen = []
    with celery_workers(tmp_path, ["cpu"] * 3):
        batch = request_batch("cpu", "user:test", protocol=QUICK)
        outcomes = follow(batch, lambda done, total, item: seen.append((done, total, item.case)))
    assert [(done, total) for done, total, _ in seen] == [(n, 8) for n in range(1, 9)]  # n of N, once each
    assert [o.case for o in outcomes] == cases and sorted(c for _, _, c in seen) == cases
    for case in cases:
        events = [e for e in stream_events(result_key("cpu", case)) if e.position > imported]
        assert [e.type for e in events if e.type in ("CandidateMeasured", "GateVerdict")] == [
            "CandidateMeasured", "GateVerdict"], case  # measured exactly once
        assert events[0].data["description"]["worker"]["host"]
    counts = {"reconfirmed": 0, "downgraded": 0, "retracted": 0, "inconclusive": 0, "failed": 0}
    for item in outcomes:
        word, speedup = expected_outcome(item.case, imported)
        counts[word] += 1
        assert (item.outcome, item.speedup, item.error) == (word, speedup, None), item.line()
    assert rerun_counts(outcomes) == counts
    status = batch_status(batch)
    assert (status["ended"], status["total"], status["states"]) == (8, 8, {"finished": 8})
    page = Client().get(f"/reruns/?batch={batch}").content.decode()
    assert "<strong>8 of 8</strong> ended; 8 finished" in page and all(case in page for case in cases)
    assert verify_ledger().ok


def test_fanning_out_needs_a_broker_and_goes_with_all(ledger, settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    import_ledger(CAMPAIGN, "user:test")
    with pytest.raises(BatchError, match="fanning out needs a broker"):
        request_batch("cpu", "user:test")
    with pytest.raises(CommandError, match="fanning out needs a broker"):
        call_command("gate", "operator", "--all", "--fan-out")
    with pytest.raises(CommandError, match="--fan-out goes with --all"):
        call_command("gate", "operator", "--case", "star_1/64x64x64/f32", "--fan-out")


def start_worker(tmp_path: Path, name: str, *options: str, **env: str) -> subprocess.Popen:
    log = (tmp_path / f"{name}.log").open("w")
    return subprocess.Popen([str(Path(sys.executable).parent / "celery"), "-A", "config", "worker", "-Q", f"device-test-{name}",
                             "-n", f"{name}@%h", "-l", "info", *options], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                            env=subprocess_env(FORGESTENCIL_VAR_DIR=str(settings.VAR_DIR), **env))


def test_a_worker_per_device_sees_only_its_device_runs_one_task_at_a_time_and_holds_the_device(tmp_path, db):
    skip_without_broker()
    index = str(9000 + os.getpid() % 1000)  # a device index no other test run on this host uses
    refused = start_worker(tmp_path, "wide", "--concurrency", "2", FORGESTENCIL_DEVICE_INDEX=index)
    assert refused.wait(timeout=240) != 0
    assert f"a worker pinned to device {index} runs one measurement at a time" in (tmp_path / "wide.log").read_text()
    with celery_workers(tmp_path, [f"device-test-{index}"], FORGESTENCIL_DEVICE_INDEX=index) as logs:
        second = start_worker(tmp_path, "second", "--concurrency", "1", FORGESTENCIL_DEVICE_INDEX=index)
        assert second.wait(timeout=240) != 0
        assert f"device {index} already has a worker on this host" in (tmp_path / "second.log").read_text()
        assert "concurrency: 1 (prefork)" in logs[0].read_text()


def test_the_worker_description_names_the_pinned_device(monkeypatch):
    monkeypatch.setenv(workers.DEVICE_ENV, "3")
    monkeypatch.setenv(workers.VISIBLE_ENV, "3")
    assert workers.description()["device_index"] == 3 and workers.description()[workers.VISIBLE_ENV] == "3"
    monkeypatch.setenv(workers.DEVICE_ENV, "gpu0")
    with pytest.raises(workers.DeviceRefused, match="must be a device index"):
        workers.device_index()
