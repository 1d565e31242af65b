"""The verdict side of the application gate (issue 17): two correctness checks, self-checked and
inconclusive verdicts, time units, the Amdahl ceiling's flag, the state an `appgate run` leaves,
and where each is shown. Timing rules are tested on a program that prints exact times
(tests/appgate/fixtures.py), so no assertion depends on how loaded the machine is."""
from __future__ import annotations

import io
import time
from types import SimpleNamespace

import pytest
from django.core.management import call_command

from appgate import runner
from appgate.checks import RunResult, agreement, clock_step
from appgate.manifest import load_manifest
from appgate.models import AppRow
from appgate.proposers import AppCandidate
from appgate.services import AppGateError, AppProtocol, record_candidate, run_gate
from appgate.verdicts import spread
from frontend.tables import application_rows
from ledger.models import Event
from ledger.services import record_from_row
from tests.appgate.fixtures import HEAT3D_CPU, clocked_app, heat3d_with_another_weight
from tests.appgate.test_manifest import write_app

QUICK = AppProtocol(passes=3, warmup=0, max_attempts=1)


@pytest.mark.one_database
def test_a_wrong_candidate_that_prints_pass_is_rejected_by_the_output_comparison(ledger):
    """heat3d (bundled) with another diffusion number: the program's own check passes, the
    comparison of the printed amplitude and exact decay with the baseline's rejects it."""
    loaded = load_manifest(HEAT3D_CPU)
    patch = record_candidate(loaded, AppCandidate("test", "another weight", "r = 0.12 converges as well",
                                                  {"src/heat3d.c": heat3d_with_another_weight()}), "user:test")
    outcome = run_gate(HEAT3D_CPU, "user:test", QUICK, candidate=str(patch.event_id))
    assert outcome.verdict == "rejected" and outcome.reasons == ["candidate_incorrect"], outcome.detail
    assert "VERIFICATION: PASSED" in outcome.detail  # its own check passed ...
    assert "compare.0 (output values, max_rel): max_rel difference" in outcome.detail  # ... the comparison did not
    assert outcome.verdict_event.data["checks"] == ["own_check", "compare"] and not outcome.verdict_event.data["real"]
    assert not Event.objects.filter(type="AppDatasetMeasured").exists()  # rejected before any timing


def test_without_a_comparison_a_wrong_candidate_passes_only_as_self_checked(ledger, tmp_path):
    compared = run_gate(clocked_app(tmp_path, "-DFORGED -DWRONG"), "user:test", QUICK)
    assert compared.reasons == ["candidate_incorrect"]
    assert "max_rel difference 0.333 > tolerance 1e-12" in compared.detail
    own_only = {"own_check": {"result_pattern": "VERIFICATION: PASSED", "failure_pattern": "VERIFICATION: FAILED"},
                "no_comparison": "the test declares nothing comparable"}
    outcome = run_gate(clocked_app(tmp_path, "-DFORGED -DWRONG", correctness=own_only), "user:test", QUICK)
    data = outcome.verdict_event.data
    assert (outcome.verdict, data["real"], data["checks"]) == ("self-checked", False, ["own_check"])
    row = application_rows()[0]
    assert (row["status"], row["real"], row["checks"]) == ("self-checked", False, "own_check")


def test_a_dataset_still_noisy_after_every_attempt_makes_the_first_verdict_inconclusive(ledger, tmp_path):
    path = clocked_app(tmp_path, datasets=[{"name": "quiet", "args": "1.0"}, {"name": "slowing", "args": "1.0 1"}])
    outcome = run_gate(path, "user:test", AppProtocol(passes=3, warmup=0, max_attempts=2))
    data = outcome.verdict_event.data
    assert outcome.verdict == "inconclusive" and data["noisy"] == ["slowing"] and not data["real"]
    assert outcome.detail.startswith("noisy: spread ") and " on slowing, CI " in outcome.detail
    timed = Event.objects.filter(type="AppDatasetMeasured").count()
    assert timed == 2  # recorded, with every sample, but not admitted
    row = application_rows()[0]
    assert (row["status"], row["noisy"], row["real"]) == ("inconclusive", "slowing", False)
    out = io.StringIO()
    call_command("appgate", "list", stdout=out)
    assert "inconclusive" in out.getvalue() and "noisy: slowing" in out.getvalue()


def test_a_further_attempt_that_would_not_end_within_the_gates_budget_is_not_started(ledger, tmp_path):
    path = clocked_app(tmp_path, datasets=[{"name": "slowing", "args": "1.0 1"}, {"name": "quiet", "args": "1.0"}])
    roomy = run_gate(path, "user:test", AppProtocol(passes=3, warmup=0, max_attempts=2, deadline=time.monotonic() + 3600))
    timed = [record_from_row(e).data for e in Event.objects.filter(type="AppDatasetMeasured").order_by("position")]
    assert [(p["dataset"], p["attempts"], p["attempt_not_started"]) for p in timed] == \
        [("slowing", 2, None), ("quiet", 1, None)]
    assert roomy.verdict == "inconclusive"
    # a deadline already passed: the noisy dataset's first attempt is kept, no second started
    tight = run_gate(path, "user:test", AppProtocol(passes=3, warmup=0, max_attempts=2, deadline=time.monotonic()))
    slowing = record_from_row(Event.objects.filter(type="AppDatasetMeasured").order_by("-position")[1]).data
    assert (slowing["dataset"], slowing["attempts"], slowing["noisy"]) == ("slowing", 1, True)
    assert slowing["attempt_not_started"].startswith("attempt 2 not started: it would take about ")
    assert tight.verdict == "inconclusive" and "slowing: attempt 2 not started" in tight.detail


def test_clocks_in_other_units_are_converted_and_a_headline_above_the_amdahl_ceiling_is_flagged(ledger, tmp_path):
    out = io.StringIO()
    call_command("appgate", "run", str(clocked_app(tmp_path)), "--passes", "3", stdout=out)
    row = AppRow.objects.get(name="clocked")
    detail = record_from_row(Event.objects.filter(type="AppGateVerdict").last()).data["detail"]
    assert row.status == "admitted" and row.state == "INTEGRATED", out.getvalue()  # `appgate run` settles the state
    assert row.headline == pytest.approx(4 / 3) and row.hotspot_fraction == pytest.approx(0.5)  # ms and us, in seconds
    assert row.amdahl_ceiling == pytest.approx(4 / 3) and "measurement problem" not in detail
    call_command("appgate", "run", str(clocked_app(tmp_path, "-DFORGED -DOUTSIDE")), "--passes", "3", stdout=out)
    row = AppRow.objects.get(name="clocked")
    assert row.headline == pytest.approx(8 / 3) and row.amdahl_ceiling == pytest.approx(4 / 3)
    assert "measurement problem: the headline 2.67x is above the Amdahl ceiling 1.33x" in out.getvalue()
    assert application_rows()[0]["above_ceiling"] is True


def test_a_pattern_that_matches_nothing_shows_the_output_tail(tmp_path):
    loaded = load_manifest(clocked_app(tmp_path))
    ok, why = runner.own_verdict(loaded, runner.RunResult(True, 0, 0.1, "VERIFICATION: PASSED\nresult=1\ntime=3 s\n"))
    assert not ok and why == "the program did not report its time (timing.pattern); output tail: " \
                             "'VERIFICATION: PASSED\\nresult=1\\ntime=3 s'"


def test_a_cuda_manifest_where_cuda_cannot_run_is_refused_before_anything_is_recorded(ledger, tmp_path):
    path = write_app(tmp_path, architecture="cuda",
                     real_program={"description": "a program that only exits", "language": "cuda",
                                   "entry": "src/main.c"})
    before = Event.objects.count()
    try:
        run_gate(path, "user:test", QUICK)
    except AppGateError as error:
        assert "this machine cannot run cuda applications" in str(error)
        assert Event.objects.count() == before and not AppRow.objects.exists()
    else:
        pytest.skip("this machine runs CUDA applications")


def test_appgate_list_aligns_long_names(ledger, tmp_path):
    from appgate.services import register

    for folder, name in (("a", "a-rather-long-application-name-of-forty-chars"), ("b", "short")):
        (tmp_path / folder).mkdir()
        register(write_app(tmp_path / folder, name=name), "user:test")
    out = io.StringIO()
    call_command("appgate", "list", stdout=out)
    lines = out.getvalue().splitlines()
    assert len({line.index(" cpu ") if " cpu " in line else line.index(" arch ") for line in lines}) == 1, lines


def test_verdicts_recorded_before_issue_17_read_with_no_checks_and_no_noisy_list(ledger):
    from ledger.services import NewEvent, append

    payload = {"result": "app/cpu/old", "app": "old", "run": "r", "verdict": "admitted", "reasons": [], "headline": 1.5,
               "headline_ci": [1.4, 1.6], "real": True, "architecture": "cpu"}
    for version, extra in ((1, {}), (2, {"upstream": None})):
        event = append(NewEvent(stream="app/old", type="AppGateVerdict", actor="user:test", schema_version=version,
                                payload={**payload, **extra}))
        assert (event.data["checks"], event.data["noisy"]) == (None, None) and "checks" not in event.payload


def test_appgate_settle_gives_the_state_of_each_unsettled_last_verdict_once(ledger):
    """The H200 app-gate export recorded verdicts without states (appgate_bundled.py did not settle
    them): `appgate settle` records the state each app's last verdict leads to, and nothing twice."""
    from pathlib import Path

    from ledger.transfer import import_ledger

    import_ledger(Path(__file__).resolve().parents[2] / "docs/benchmarks/appgate_h200_hardened.jsonl", "user:test")
    out = io.StringIO()
    call_command("appgate", "settle", stdout=out)
    states = {row.name: (row.state, row.state_code) for row in AppRow.objects.all()}
    assert states["heat3d-cuda"] == ("INTEGRATED", "admitted")
    assert states["life-cuda"] == ("IN_PROGRESS", "inconclusive")
    assert "settled from their last verdicts: 6" in out.getvalue()
    again = io.StringIO()
    call_command("appgate", "settle", stdout=again)
    assert "settled from their last verdicts: 0" in again.getvalue()


def probed(pattern: str, norm: str = "max_rel", tolerance: float = 1e-7) -> SimpleNamespace:
    """A manifest comparing the groups of one printed line: all agreement() reads of it."""
    return SimpleNamespace(manifest=SimpleNamespace(correctness=SimpleNamespace(compare=[
        SimpleNamespace(source="stdout", pattern=pattern, norm=norm, tolerance=tolerance, file=None)])))


def printed(line: str) -> RunResult:
    return RunResult(ok=True, returncode=0, wall_seconds=1.0, stdout=f"PASS\nprobe: {line}\n")


@pytest.mark.parametrize("candidate", ["nan 2.5", "nan nan", "1.0 2.5", "nan inf"])
def test_a_nan_never_passes_a_comparison_and_the_detail_says_which_side_printed_it(candidate):
    """A NaN the baseline prints says nothing of the work behind it: a candidate that prints NaN
    there too may have done none (cbsfil's make-run, if upstream's overflows)."""
    ok, why = agreement(probed(r"^probe: (\S+) (\S+)$"), printed("nan 2.5"), printed(candidate))
    assert not ok
    assert f"(NaN at 1 of the baseline's 2 values, {candidate.split().count('nan')} of the candidate's)" in why


def test_an_infinity_both_print_does_not_make_l2_rel_absolute_or_blind():
    """l2_rel is relative to the baseline's finite values: an equal infinity in both made its norm
    infinite, and then any difference passed."""
    manifest = probed(r"^probe: (\S+) (\S+)$", norm="l2_rel", tolerance=1e-6)
    assert not agreement(manifest, printed("inf 1.0"), printed("inf 1000.0"))[0]
    assert not agreement(manifest, printed("inf 1e-9"), printed("inf 2e-9"))[0]
    assert agreement(manifest, printed("inf 1.0"), printed("inf 1.0000001"))[0]


@pytest.mark.parametrize("args, verdict", [
    ("4.0 0 1 1", "admitted"),      # 4.0/4.1 and 3.0/3.1 ms: one step of 0.1 ms apart, 2.5% and 3.3% of the medians
    ("4.0 0 1 2", "inconclusive"),  # two steps apart: the range counts whole
    ("2.8 0 1 1", "admitted"),      # the candidate's 2.1/2.2 ms: a step of 4.65% of its median, inside the 5% limit
    ("2.4 0 1 1", "inconclusive"),  # its 1.8/1.9 ms: 5.4%, too coarse a clock to excuse (or to judge the 2% band)
    ("4.0 0 6 0", "admitted"),      # a fine clock and a steady program, as before
])
def test_readings_one_step_of_the_printed_clock_apart_are_not_noise(ledger, tmp_path, args, verdict):
    """haccmk on the H200: its candidate's time printed as 0.000034 or 0.000035 s made a 2.9% spread
    and an inconclusive verdict; the spread now excuses one step of the printed clock, and the
    speedup's CI is widened by half a step on each median."""
    outcome = run_gate(clocked_app(tmp_path, datasets=[{"name": "one", "args": args}]), "user:test",
                       AppProtocol(passes=4, warmup=0, max_attempts=1))
    assert outcome.verdict == verdict, outcome.detail
    measured = record_from_row(Event.objects.get(type="AppDatasetMeasured")).data
    step = 10 ** -int(args.split()[2]) / 1000  # printed in ms, recorded in seconds
    assert measured["clock_step"] == {"baseline": pytest.approx(step), "candidate": pytest.approx(step)}
    if args == "4.0 0 1 1":
        assert measured["spread"] == {"baseline": 0.0, "candidate": 0.0} and not measured["noisy"]
        assert measured["excused"] == {"baseline": pytest.approx(0.1 / 4.05), "candidate": pytest.approx(0.1 / 3.05)}
        low, high = measured["speedup_ci"]
        assert low < 4.0 / 3.1 and high > 4.1 / 3.0  # beyond what any resample of the readings gives


def test_a_candidate_that_prints_its_time_more_coarsely_is_judged_by_the_baselines_step(ledger, tmp_path):
    """The candidate writes its own printf: with one decimal fewer than upstream's, its readings
    one step of its own clock apart are ten of upstream's, and count whole."""
    app = clocked_app(tmp_path, candidate="-DCOARSE", datasets=[{"name": "one", "args": "4.0 0 2 1"}])
    outcome = run_gate(app, "user:test", AppProtocol(passes=4, warmup=0, max_attempts=1))
    assert outcome.verdict == "inconclusive", outcome.detail
    measured = record_from_row(Event.objects.get(type="AppDatasetMeasured")).data
    assert measured["clock_step"] == {"baseline": pytest.approx(0.01 / 1000), "candidate": pytest.approx(0.1 / 1000)}
    assert measured["spread"]["candidate"] == pytest.approx(0.1 / 3.05)


def test_the_app_page_shows_the_printed_clocks_step_under_its_dataset(ledger, client, tmp_path):
    outcome = run_gate(clocked_app(tmp_path, datasets=[{"name": "one", "args": "4.0 0 1 1"}]), "user:test",
                       AppProtocol(passes=3, warmup=0, max_attempts=1))
    html = client.get(f"/apps/{outcome.verdict_event.data['app']}/").content.decode()
    assert "printed clock's step baseline 1.0000e-04 s candidate 1.0000e-04 s" in html  # 0.1 ms: one decimal
    assert "(passes one clock step apart: " in html
    walls = record_from_row(Event.objects.get(type="AppDatasetMeasured")).data["wall_samples"]
    assert [len(w) for w in walls.values()] == [3, 3] and all(0 < t < 60 for w in walls.values() for t in w)
    assert "wall time a run (median, the sandbox's timer, not the program's) baseline " in html


@pytest.mark.parametrize("printed_time, match, step", [
    ("0.000034", "last", 1e-6), ("3.4e-05", "last", 1e-6), ("2151", "last", 1.0), ("+1.5", "last", 0.1),
    ("0.5\nAverage 0.25", "sum", 0.1 + 0.01),  # ecdh adds two printed times: their steps add up
    ("0.0e400", "last", None), ("nan", "last", None), ("inf", "last", None),
])
def test_the_printed_clocks_step_is_one_unit_of_its_last_digit(printed_time, match, step):
    loaded = SimpleNamespace(manifest=SimpleNamespace(timing=SimpleNamespace(
        source="pattern", pattern=r"(?:^|Average )(\S+)$", unit="s", match=match)))
    found = clock_step(loaded, RunResult(ok=True, returncode=0, wall_seconds=1.0, stdout=printed_time + "\n"))
    assert found == (None if step is None else pytest.approx(step))


@pytest.mark.parametrize("steps, expected", [
    ((None, None), 0.5),     # wall time: no printed clock, nothing excused
    ((0.5, None), 0.5),      # the baseline's step unknown: nothing excused
    ((None, 0.5), 0.5),      # this variant's step unknown: nothing excused
    ((0.5, 0.5), 0.0),       # one step of both clocks apart: quiet
    ((0.5, 0.05), 0.5),      # the baseline prints finer: only its step is excused
])
def test_the_spread_excuses_a_step_only_where_both_clocks_steps_are_known(steps, expected):
    """Before this was pinned, a missing step counted as an infinite one, and every spread of a
    wall-timed dataset read 0 (quiet) whatever its passes."""
    assert spread([10.0, 10.5, 10.0, 10.5, 10.0], *steps) == pytest.approx(expected / 10.0)
