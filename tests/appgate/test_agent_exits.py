"""The App Agent's M1 exits (appgate/agent.py, docs/appgate.md): BLOCKED when the baseline does
not build, run or verify, OUT_OF_SCOPE when no stencil hotspot carries 20% of the time. Both end
the agent before any candidate is proposed or gated, on the program of exact clocks
(tests/appgate/fixtures.py)."""
from __future__ import annotations

import json

import pytest

from appgate.agent import MIN_HOTSPOT_FRACTION, run_agent
from appgate.services import AppProtocol
from ledger.models import Event
from tests.appgate.fixtures import clocked_app

QUICK = AppProtocol(passes=2, warmup=0, max_attempts=1)
HOTSPOT = {"source": "pattern", "pattern": r"hotspot_us=([0-9.]+)", "unit": "us", "case": "star2d_1/64x64/f64"}
OWN_CHECK = {"result_pattern": "VERIFICATION: PASSED", "failure_pattern": "VERIFICATION: FAILED"}
COMPARE = [{"source": "stdout", "pattern": "^result=([0-9.]+)$", "tolerance": 1e-12}]


def nothing_proposed_or_gated() -> bool:
    return not Event.objects.filter(type__in=["AppCandidateProposed", "AppGateVerdict", "AppDatasetMeasured"]).exists()


@pytest.mark.parametrize("changes, problem, code", [
    ({"build": {"command": "cc -O1 {switch} -include no_such_header.h -o {out} src/main.c"}},
     "M1: the baseline does not build: ", "build_failed"),
    ({"correctness": {"own_check": {**OWN_CHECK, "result_pattern": "VERIFICATION: CONVERGED"}, "compare": COMPARE}},
     "M1: the baseline fails on one: ", "own_check_failed"),
])
def test_a_baseline_that_does_not_build_or_verify_blocks_the_agent(ledger, tmp_path, changes, problem, code):
    row = run_agent(clocked_app(tmp_path, **changes), "agent:test", protocol=QUICK)
    assert row.state == "BLOCKED" and row.state_reason.startswith(problem), row.state_reason
    assert row.state_code == code
    assert row.milestones == [] and nothing_proposed_or_gated()


@pytest.mark.parametrize("hotspot, measured, code", [
    ({**HOTSPOT, "unit": "ns"}, "0%", "hotspot_below_share"),  # the same clock read as nanoseconds: 0.05% of the time
    ({"source": "none"}, "none", "hotspot_unmeasured"),
])
def test_an_application_whose_hotspot_carries_under_20_percent_is_out_of_scope(ledger, tmp_path, hotspot, measured,
                                                                                code):
    row = run_agent(clocked_app(tmp_path, hotspot=hotspot), "agent:test", protocol=QUICK)
    assert row.state == "OUT_OF_SCOPE" and row.state_code == code, row.state_reason
    assert row.state_reason == (f"no stencil hotspot carries at least {MIN_HOTSPOT_FRACTION:.0%} of the time "
                                f"(measured: {measured})")
    assert [m["milestone"] for m in row.milestones] == ["M1"] and nothing_proposed_or_gated()


def test_a_hotspot_of_half_the_time_is_in_scope(ledger, tmp_path):
    row = run_agent(clocked_app(tmp_path), "agent:test", protocol=QUICK)
    assert row.state not in ("OUT_OF_SCOPE", "BLOCKED"), row.state_reason
    assert "hotspot star2d_1/64x64/f64, 50% of the time" in row.milestones[0]["detail"]


def test_an_agent_whose_gate_would_outrun_its_budget_stops_after_m1_and_says_what_it_needs(ledger, tmp_path):
    """The budget, counted from the agent's start, is compared with M1's own wall time per run: both
    variants' correctness run, warm-ups and passes on every dataset (QUICK: 2 x (1 + 0 + 2) runs a
    dataset); M1 itself has used up the 1 ms allowed."""
    row = run_agent(clocked_app(tmp_path), "agent:test", protocol=QUICK, gate_budget_s=1e-3)
    assert (row.state, row.state_code) == ("RESEARCH", "over_budget") and nothing_proposed_or_gated()
    walls = {name: values["wall_seconds"] for name, values in
             json.loads(Event.objects.get(type="AppMilestoneReached").body)["payload"]["evidence"]["datasets"].items()}
    assert walls and all(wall > 0 for wall in walls.values())
    assert row.state_reason == (f"M1: not gated: its runs would take about {sum(walls.values()) * 6:.0f} s ("
                                + ", ".join(f"{name}: {wall:.2f} s a run" for name, wall in walls.items())
                                + "), more than the 0 s left of the 0.001 s allowed; gate it with a larger budget")
    assert [m["milestone"] for m in row.milestones] == ["M1"]


def test_a_budget_the_runs_fit_in_lets_the_agent_go_on_to_the_gate(ledger, tmp_path):
    row = run_agent(clocked_app(tmp_path), "agent:test", protocol=QUICK, gate_budget_s=3600)
    assert Event.objects.filter(type="AppGateVerdict").exists() and row.state_code != "over_budget"
