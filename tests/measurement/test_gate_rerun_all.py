"""The whole-matrix gate re-run (`manage.py gate operator --all`, benchmarks/matrix_rerun.py) on
the CPU backend: two small cases admitted once a session with real measurements, re-run for real.
The rule by which a re-run revises a result only on conclusive evidence is pinned at its edges in
test_decisions.py."""
import dataclasses
import json
import os
import re
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError

from ledger.checkpoints import public_key_text, signing_key
from ledger.selectors import stream_events
from ledger.verification import verify_ledger
from measurement import reruns as measurement_reruns
from measurement.backends.base import Kernel
from measurement.events import matrix_rerun_stream, tuning_stream
from measurement.harness.plan import DEFAULT_PROTOCOL, ProtocolSettings
from measurement.models import OperatorResult
from measurement.services import MeasurementError, gate_candidate, result_key
from tests.conftest import lift_speed_rule, replay_or_record

HONEST = (Path(__file__).parent / "cheats" / "honest.c").read_text()
QUICK = ProtocolSettings(passes=2, launches=2, warmup=1, max_attempts=1)  # the time goes on cache flushes
CASES = ["star_1/32x32x32/f32", "star_1/64x64x64/f32"]  # in case-id order, as the re-run goes
RECORDING = "two-admitted-cpu"
SUMMARY = re.compile(r"re-ran 2 cpu results in [\d.]+ s: (\d+) reconfirmed, (\d+) downgraded, (\d+) retracted, "
                     r"(\d+) inconclusive, (\d+) failed")
# The re-run loop and its benchmark, not SQL: once per `./dev test` (see pytest.ini, one_database).
pytestmark = pytest.mark.one_database


@pytest.fixture
def two_admitted(ledger, recorded_runs) -> dict[str, str]:
    """Two admitted results (the speed rule lifted for admission only: a shared 2-core CPU
    cannot promise a CI above 1); returns each case's admitted verdict id."""

    def record() -> None:
        with pytest.MonkeyPatch.context() as patch:
            lift_speed_rule(patch)
            for case in CASES:
                outcome = gate_candidate(case, "cpu", Kernel(HONEST, {"threads": 1}), "agent:test", protocol=QUICK)
                assert outcome.verdict == "admitted", outcome.detail

    replay_or_record(recorded_runs, RECORDING, record)
    return {row.case: row.verdict_event for row in OperatorResult.objects.filter(status="admitted")}


def reruns(case: str) -> tuple[list, list]:
    """The re-run verdicts and the revisions of a case's stream."""
    events = stream_events(result_key("cpu", case))
    verdicts = [e for e in events if e.type == "GateVerdict" and e.data["revises"]]
    return verdicts, [e for e in events if e.type in ("ResultRetracted", "ResultDowngraded")]


def test_all_reruns_every_standing_result_and_counts_them(two_admitted, speed_rule_lifted, monkeypatch):
    assert sorted(two_admitted) == CASES
    # One timing attempt (the command has no option for it); --passes/--launches must win over the rest.
    monkeypatch.setitem(DEFAULT_PROTOCOL, "cpu", ProtocolSettings(warmup=1, max_attempts=1))
    out = StringIO()
    call_command("gate", "operator", "--all", "--passes", "2", "--launches", "2", stdout=out)
    lines = out.getvalue().splitlines()
    assert [line.split(":")[0] for line in lines[:2]] == CASES
    counts = {"reconfirmed": 0, "downgraded": 0, "retracted": 0, "inconclusive": 0}
    for case, line in zip(CASES, lines):
        verdicts, revisions = reruns(case)
        assert len(verdicts) == 1 and verdicts[0].data["revises"] == two_admitted[case]
        measured = next(e for e in stream_events(result_key("cpu", case)) if str(e.event_id) == verdicts[0].data["measurement"])
        assert (measured.data["protocol"]["passes"], measured.data["protocol"]["launches"]) == (2, 2)
        verdict = verdicts[0].data["verdict"]
        assert verdict in ("reconfirmed", "revised", "inconclusive") and line.startswith(f"{case}: {verdict}")
        assert all(r.data["revises"] == two_admitted[case] for r in revisions)
        assert all(r.data["rerun"] == str(verdicts[0].event_id) for r in revisions)
        kind = revisions[0].type if revisions else None
        assert (verdict == "revised") == (kind == "ResultRetracted") and (kind or "no revision") in line
        if verdict == "inconclusive":  # a noisy shared CPU: nothing may be revised, and the line says why
            assert kind is None and f"{case}: inconclusive (noisy: spread" in line
        counts["inconclusive" if verdict == "inconclusive" else
               {"ResultRetracted": "retracted", "ResultDowngraded": "downgraded"}.get(kind, "reconfirmed")] += 1
    summary = SUMMARY.fullmatch(lines[2])
    assert summary, lines
    assert [int(n) for n in summary.groups()] == [*counts.values(), 0]
    # the run as a unit: one MatrixRerunFinished with its wall time and what it re-ran
    (finished,) = stream_events(matrix_rerun_stream("cpu"))
    assert finished.type == "MatrixRerunFinished" and finished.data["whole"] and finished.data["standing"] == 2
    assert finished.data["cases"] == CASES and finished.data["not_run"] == []
    assert finished.data["counts"] == {**counts, "failed": 0}
    assert finished.data["wall_seconds"] > 0 and finished.data["deadline"] is None
    assert verify_ledger().ok


def test_a_failing_case_is_counted_and_the_others_go_on(two_admitted, monkeypatch):
    tried = []

    def broken(case_id, *args, **kwargs):
        tried.append(case_id)
        raise MeasurementError(f"the cpu backend is not usable here ({case_id})")

    monkeypatch.setattr(measurement_reruns, "rerun_gate", broken)
    out = StringIO()
    with pytest.raises(CommandError, match="2 of 2 re-runs failed"):
        call_command("gate", "operator", "--all", stdout=out)
    assert tried == CASES
    lines = out.getvalue().splitlines()
    assert lines[0].startswith(f"{CASES[0]}: FAILED (the cpu backend is not usable here")
    assert SUMMARY.fullmatch(lines[2]).groups() == ("0", "0", "0", "0", "2")


@pytest.mark.parametrize(
    "args, message",
    [([], "one of the arguments --case --all is required"), (["--case", CASES[0], "--all"], "not allowed with argument")],
)
def test_exactly_one_of_case_and_all(ledger, args, message):
    with pytest.raises(CommandError, match=message):
        call_command("gate", "operator", *args)


def test_matrix_rerun_writes_the_export_and_the_summary(two_admitted, recorded_runs, tmp_path):
    """The benchmark re-runs an export in a scratch ledger of its own (a child process, a fresh
    var/ folder): its export holds the campaign plus the re-run, its summary the timings."""
    root = Path(settings.BASE_DIR)
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env["FORGESTENCIL_VAR_DIR"] = str(tmp_path / "var")
    # the export is signed by this session's key; the child, with a key of its own, is told to trust it
    env["LEDGER_TRUSTED_PUBLIC_KEYS"] = public_key_text(signing_key())
    out, summary_path = tmp_path / "rerun.jsonl", tmp_path / "rerun.json"
    done = subprocess.run(
        [sys.executable, "benchmarks/matrix_rerun.py", "--backend", "cpu", "--ledger", str(recorded_runs / f"{RECORDING}.jsonl"),
         "--out", str(out), "--summary", str(summary_path), "--passes", "2", "--launches", "2", "--attempts", "1"],
        cwd=root, env=env, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(summary_path.read_text())
    assert [c["case"] for c in summary["cases"]] == CASES and summary["not_run"] == []
    assert sum(summary["counts"].values()) == 2 and summary["counts"]["failed"] == 0
    assert summary["started_utc"] <= summary["finished_utc"]
    # each figure is rounded to the millisecond, so the cases' sum may pass the rounded wall by half of one per
    # figure; compared in whole milliseconds, since in float seconds both sides round differently (a flake:
    # 2.235 >= 2.2350000000000003)
    case_ms = sum(round(c["seconds"] * 1000) for c in summary["cases"])
    assert case_ms > 0 and 2 * round(summary["wall_seconds"] * 1000) + len(CASES) + 1 >= 2 * case_ms
    admitted = {row.case: row.speedup for row in OperatorResult.objects.all()}
    for item in summary["cases"]:
        assert item["admitted_speedup"] == pytest.approx(admitted[item["case"]])
        assert item["verdict"] in ("reconfirmed", "revised", "inconclusive")
        if item["speedup"] is not None:
            assert item["speedup_ci"][0] <= item["speedup"] <= item["speedup_ci"][1]
        assert item["case"] in done.stderr
    events = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    revising = {e["payload"]["case"]: e["payload"]["revises"] for e in events
                if e["type"] == "GateVerdict" and e["payload"]["revises"]}
    assert revising == two_admitted
    revisions = [e["payload"]["revises"] for e in events if e["type"] in ("ResultRetracted", "ResultDowngraded")]
    assert len(revisions) == summary["counts"]["retracted"] + summary["counts"]["downgraded"]
    assert summary["exported_events"] == len(events)
    # the export carries the run as a unit, and the operator table states the 300 s target from it
    (finished,) = [e["payload"] for e in events if e["type"] == "MatrixRerunFinished"]
    assert finished["cases"] == CASES and finished["whole"] and 0 < finished["wall_seconds"] <= summary["wall_seconds"]
    sys.path.insert(0, str(root / "benchmarks"))
    from operator_table_export import load
    from operator_table_history import rerun_time

    line = rerun_time(load(out, backend="cpu"))
    assert line.endswith(f"**met**: the latest (position {next(e['position'] for e in events if e['type'] == 'MatrixRerunFinished')}) "
                         f"re-ran 2 of 2 standing results in {finished['wall_seconds']:.1f} s.")


def test_matrix_rerun_tunes_each_case_before_its_rerun_within_the_deadline(recorded_runs, two_admitted, tmp_path):
    """--tune halide: the first case is tuned (every schedule of the CPU family checked and timed,
    BaselineTuned in the export) and re-run against the chosen schedule; a deadline shorter than
    one case starts nothing after it, so the second case is neither tuned nor re-run."""
    root = Path(settings.BASE_DIR)
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env.update(FORGESTENCIL_VAR_DIR=str(tmp_path / "var"), LEDGER_TRUSTED_PUBLIC_KEYS=public_key_text(signing_key()),
               FORGESTENCIL_CPU_BASELINES="halide")  # the bound this test is about; the others cost time only
    out, summary_path = tmp_path / "rerun.jsonl", tmp_path / "rerun.json"
    done = subprocess.run(
        [sys.executable, "benchmarks/matrix_rerun.py", "--backend", "cpu", "--ledger",
         str(recorded_runs / f"{RECORDING}.jsonl"), "--out", str(out), "--summary", str(summary_path),
         "--passes", "2", "--launches", "1", "--attempts", "1", "--tune", "halide", "--deadline", "1"],
        cwd=root, env=env, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(summary_path.read_text())
    assert [c["case"] for c in summary["cases"]] == CASES[:1] and summary["not_run"] == CASES[1:]
    assert summary["tune"] == "halide"
    assert summary["tuning_counts"] == {"tuned": 1, "no_correct_schedule": 0, "failed": 0}
    events = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    tuned = [e["payload"] for e in events if e["type"] == "BaselineTuned"]
    assert [t["case"] for t in tuned] == CASES[:1]
    candidates = tuned[0]["candidates"]
    tuning = summary["cases"][0]["tuning"]
    fastest = min((c for c in candidates if c["correct"]), key=lambda c: c["median"])
    assert tuning["chosen"] == tuned[0]["chosen"] == fastest["name"]
    assert (tuning["candidates"], tuning["correct"]) == (len(candidates), sum(c["correct"] for c in candidates))
    assert tuning["median"] > 0 and 0 < tuning["seconds"] < summary["cases"][0]["seconds"] and tuning["error"] is None
    assert tuning["measured_schedule"] == tuning["chosen"]  # the re-run held the kernel to the tuned schedule
    after = events[[e["type"] for e in events].index("BaselineTuned"):]  # an export lists events in ledger order
    measured = next(e["payload"] for e in after if e["type"] == "CandidateMeasured")
    halide = next(v for v in measured["variants"] if v["name"] == "halide")
    assert measured["case"] == CASES[0] and halide["identity"]["schedule"] == tuning["chosen"]
    line = next(line for line in done.stderr.splitlines() if line.startswith(f"{CASES[0]}: halide tuned: "))
    assert f"{tuning['chosen']} " in line and f"{tuning['correct']} of {tuning['candidates']} schedules correct" in line
    assert CASES[1] not in done.stderr.split("standing cpu results to re-run")[1]
    # a second call finishes what the deadline left out: the first call's export and summary in, that case alone run
    env["LEDGER_TRUSTED_PUBLIC_KEYS"] += "," + json.loads(out.read_text().splitlines()[-1])["payload"]["public_key"]
    second, second_summary = tmp_path / "rest.jsonl", tmp_path / "rest.json"
    rest = subprocess.run(
        [sys.executable, "benchmarks/matrix_rerun.py", "--backend", "cpu", "--ledger", str(out), "--out", str(second),
         "--summary", str(second_summary), "--passes", "2", "--launches", "1", "--attempts", "1",
         "--only", str(summary_path)],
        cwd=root, env=env, capture_output=True, text=True, timeout=300,
    )
    assert rest.returncode == 0, rest.stderr
    finished = json.loads(second_summary.read_text())
    assert [c["case"] for c in finished["cases"]] == CASES[1:] and finished["not_run"] == []
    carried = [json.loads(line) for line in second.read_text().splitlines() if line.strip()]
    assert [e["payload"]["case"] for e in carried if e["type"] == "BaselineTuned"] == CASES[:1]  # the first call's tuning came along


def test_a_failed_tuning_run_is_counted_and_the_case_is_rerun_with_the_schedule_it_had(two_admitted, monkeypatch):
    monkeypatch.setenv("FORGESTENCIL_CPU_BASELINES", "")  # the re-run must go on; what it measures is not the subject
    unflushed = dataclasses.replace(QUICK, launches=1, flush=False)
    outcomes = measurement_reruns.rerun_all("cpu", "user:test", unflushed, deadline=0.001, tune="devito")
    assert [o.case for o in outcomes] == CASES[:1]  # the deadline: one case
    tuning = outcomes[0].tuning
    assert tuning.outcome == "failed" and "the CPU backend has no schedule family for 'devito'" in tuning.error
    assert outcomes[0].error is None and outcomes[0].verdict in ("reconfirmed", "revised", "inconclusive")
    assert measurement_reruns.tuning_counts(outcomes) == {"tuned": 0, "no_correct_schedule": 0, "failed": 1}
    assert outcomes[0].line().startswith(f"{CASES[0]}: devito not tuned (no devito schedules for {CASES[0]} on cpu: ")
    assert stream_events(tuning_stream("cpu", CASES[0])) == []


@pytest.mark.parametrize("deadline, elapsed, durations, stop", [
    (None, 500.0, [10.0], False),      # no deadline: every item starts
    (100.0, 99.0, [], False),           # nothing timed yet: the first item starts
    (100.0, 88.0, [5.0, 10.0], False),  # 88 + 1.2 x 10 = 100: ends at the deadline
    (100.0, 88.5, [5.0, 10.0], True),   # ends after it
])
def test_the_next_item_starts_only_if_it_should_end_before_the_deadline(deadline, elapsed, durations, stop):
    assert measurement_reruns.past_deadline(deadline, elapsed, durations) is stop
