"""A gate re-run times the baselines still in contention (measurement.contenders): one that lost to
the bound by 3x or more in the standing measurement is left out where the installed library is the
recorded one, and the re-run's evidence says so."""
from pathlib import Path

import pytest

from ledger.verification import verify_ledger
from measurement.backends.base import Kernel
from measurement import contenders
from measurement.contenders import CONTENTION_FACTOR, carried, out_of_contention
from measurement.harness.cases import parse_case
from measurement.harness.plan import ProtocolSettings, check_plan
from measurement.harness.session_info import baseline_session
from measurement.models import OperatorResult
from measurement.reruns import RerunOutcome, rerun_gate
from measurement.services import gate_candidate, result_key

HONEST = (Path(__file__).parent / "cheats" / "honest.c").read_text()
QUICK = ProtocolSettings(passes=2, launches=2, warmup=1, max_attempts=1)
CASE = "star_1/64x64x64/f32"
SCIPY = {"library": "scipy.ndimage", "version": "1.0"}


def test_only_baselines_far_behind_the_bound_are_out_of_contention():
    bound = {"name": "pystencils", "median": 1.0}
    baselines = {
        "straightforward": {"median": 9.0, "identity": {}},  # the floor: always timed
        "scipy.ndimage": {"median": CONTENTION_FACTOR, "identity": SCIPY},
        "pystencils": {"median": 1.0, "identity": {"library": "pystencils"}},
        "halide": {"median": 2.9, "identity": {"library": "halide"}},
        "unnamed": {"median": 50.0},  # no identity recorded: nothing to compare the installed one with
    }
    assert out_of_contention(baselines, bound) == {"scipy.ndimage": SCIPY}
    assert out_of_contention(None, bound) == {} and out_of_contention(baselines, None) == {}


def test_a_left_out_baseline_keeps_its_standing_entry_marked_carried():
    standing = {"scipy.ndimage": {"median": 3.0, "speedup": 9.1, "identity": SCIPY}, "pystencils": {"median": 1.0}}
    assert carried(standing, ["scipy.ndimage", "gone"]) == {
        "scipy.ndimage": {"median": 3.0, "speedup": 9.1, "identity": SCIPY, "carried": True}}


def test_the_baselines_child_leaves_out_only_the_identity_it_finds_installed(ledger):
    specs = check_plan(parse_case(CASE), "cpu", 7)[:1]
    description, _, runs = baseline_session("cpu", CASE, specs)
    installed = description["identities"]["scipy.ndimage"]
    assert description["left_out"] == [] and "scipy.ndimage" in runs

    description, _, runs = baseline_session("cpu", CASE, specs, leave_out={"scipy.ndimage": installed})
    assert description["left_out"] == ["scipy.ndimage"] and "scipy.ndimage" not in runs and "straightforward" in runs

    upgraded = {**installed, "version": "0.0-not-this-one"}
    description, _, runs = baseline_session("cpu", CASE, specs, leave_out={"scipy.ndimage": upgraded})
    assert description["left_out"] == [] and "scipy.ndimage" in runs


@pytest.mark.one_database
def test_a_rerun_times_the_contenders_and_records_what_it_left_out(ledger, speed_rule_lifted, monkeypatch):
    # Which baselines trail the bound by 3x depends on the machine's load (on a quiet 2-core machine
    # scipy.ndimage ran ~9x the bound; under load the OpenMP pystencils fell further behind): any
    # baseline slower than the bound is out of contention here, so at least one of the three is.
    monkeypatch.setattr(contenders, "CONTENTION_FACTOR", 1.000001)
    admitted = gate_candidate(CASE, "cpu", Kernel(HONEST, {"threads": 1}), "agent:test", protocol=QUICK)
    assert admitted.verdict == "admitted"
    admitted_measurement = admitted.measured_event.data
    assert admitted_measurement["description"]["left_out"] == []  # a gate that admits times every baseline
    row = OperatorResult.objects.get(result=result_key("cpu", CASE))
    expected = out_of_contention(row.baselines, row.bound)
    assert expected and row.bound["name"] not in expected and "straightforward" not in expected

    rerun, _ = rerun_gate(CASE, "cpu", "user:reviewer", QUICK)
    measured = rerun.measured_event.data
    left_out = measured["description"]["left_out"]
    assert sorted(left_out) == sorted(expected)
    timed = {v["name"] for v in measured["variants"] if v["timing"]}
    everything = {v["name"] for v in admitted_measurement["variants"]}
    assert timed == everything - set(left_out), (timed, everything, left_out)
    assert rerun.verdict_event.data["bound"]["name"] in timed
    assert set(rerun.verdict_event.data["baselines"]).isdisjoint(left_out)  # never a carried value as this run's
    assert verify_ledger().ok


def test_a_matrix_rerun_line_names_what_the_case_left_out():
    line = RerunOutcome("star_4/512x512x512/f16", 1.140, 5.0, verdict="reconfirmed", speedup=1.137,
                        left_out=["cupyx.ndimage", "torch.conv"]).line()
    assert line.endswith("no revision; left out: cupyx.ndimage, torch.conv [5.0 s]"), line
    assert "left out" not in RerunOutcome("box_1/512x512x512/f64", 1.77, 9.8, verdict="reconfirmed", speedup=1.77).line()
