"""The planted cheating kernels: each one is rejected, for the right reason, on the CPU backend.

The stale-output cheats (issue 14, point 11) pass every check; what rejects them is the
output of their own timed launches: each launch starts from a fresh fill of the output and
is read back (measurement/harness/protocol.py).
"""
from pathlib import Path

import pytest

from measurement.backends.base import Kernel
from measurement.harness.plan import ProtocolSettings
from measurement.services import gate_candidate

CHEATS = Path(__file__).parent / "cheats"
QUICK = ProtocolSettings(passes=3, launches=3, warmup=1, max_attempts=1, check_timeout=120, timing_timeout=300)
F32 = "star_1/64x64x64/f32"
# What is judged here is the gate, not SQL: once per `./dev test` (see pytest.ini, one_database).
pytestmark = pytest.mark.one_database


@pytest.mark.parametrize(
    "cheat, case, reason",
    [
        ("half_output", F32, "unwritten_output"),
        ("wrong_halo", F32, "wrote_outside_region"),
        ("lower_precision", "star_1/64x64x64/f64", "precision_below_floor"),
        ("modifies_input", F32, "input_modified"),
        ("cached_result", F32, "stale_result"),
        ("constant_output", F32, "constant_output"),
        ("coefficient_shortcut", F32, "mismatch"),
        ("hardcoded_shape", F32, "shape_specific"),
        ("reads_out_of_bounds", F32, "out_of_bounds"),
        ("unwritten_output", F32, "unwritten_output"),
        ("input_alias", F32, "output_aliases_input"),
        # a case whose copy floor is well above the CPU launch overhead, where the physics-floor
        # rule takes the overhead off (measurement/harness/rules.py); at 64^3 a loaded machine's
        # overhead can exceed the floor, and the timed-output check then catches it instead
        ("impossible_speed", "star_1/128x128x128/f32", "impossible_speed"),
    ],
)
def test_cheat_is_rejected_for_the_right_reason(ledger, cheat, case, reason):
    kernel = Kernel((CHEATS / f"{cheat}.c").read_text(), {"threads": 1})
    outcome = gate_candidate(case, "cpu", kernel, "agent:adversary", protocol=QUICK)
    assert outcome.verdict == "rejected"
    assert outcome.reasons == [reason], outcome.detail
    verdict = outcome.verdict_event.data
    assert verdict["reasons"] == [reason] and verdict["verdict"] == "rejected"
    assert [v["role"] for v in outcome.measured_event.data["variants"]].count("candidate") == 1


def test_a_compile_error_is_a_compilation_failure_with_the_compiler_message(ledger):
    outcome = gate_candidate(F32, "cpu", Kernel("void stencil( { broken"), "agent:x", protocol=QUICK)
    assert outcome.reasons == ["compilation_failure"]
    assert outcome.verdict_event.data["state"] == "compilation_failure"
    assert "error" in outcome.detail


def test_a_segfault_is_a_runtime_error_and_the_worker_carries_on(ledger):
    source = "void stencil(const float*u,const float*a,float*y,const double*c,int nz,int ny,int nx){ *(volatile int*)0 = 1; }"
    outcome = gate_candidate(F32, "cpu", Kernel(source), "agent:x", protocol=QUICK)
    assert outcome.reasons == ["runtime_error"] and "SIGSEGV" in outcome.detail
    assert outcome.verdict_event.data["state"] == "runtime_error"


def test_an_infinite_loop_is_a_timeout(ledger):
    source = "void stencil(const float*u,const float*a,float*y,const double*c,int nz,int ny,int nx){ for(;;){} }"
    hasty = ProtocolSettings(**{**QUICK.__dict__, "check_timeout": 8})
    outcome = gate_candidate(F32, "cpu", Kernel(source), "agent:x", protocol=hasty)
    assert outcome.reasons == ["timeout"]
    assert outcome.verdict_event.data["state"] == "runtime_error"


def candidate_evidence(outcome) -> dict:
    (candidate,) = [v for v in outcome.measured_event.data["variants"] if v["role"] == "candidate"]
    return candidate


def stale_output_source(honest: bool) -> str:
    """tests/measurement/cheats/stale_output.c, or the honest kernel it was made from (the
    same source without the line marked STALE)."""
    source = (CHEATS / "stale_output.c").read_text()
    if honest:
        source = "\n".join(line for line in source.splitlines() if "/* STALE */" not in line)
        assert "isnan(y[i])" not in source
    return source


@pytest.mark.parametrize(
    "source, wrong_launches",
    [
        # trusts a number it finds in the output: every timed launch starts from a finite fill
        (stale_output_source(honest=False), QUICK.passes * QUICK.launches),
        # its own launch counter: calls 4, 5, 7 and 8 skip planes; 9, the last one, does not
        ((CHEATS / "launch_counter.c").read_text(), 4),
    ],
    ids=["stale_output", "launch_counter"],
)
def test_a_kernel_that_relies_on_an_earlier_launch_is_rejected_by_its_timed_output(ledger, source, wrong_launches):
    outcome = gate_candidate(F32, "cpu", Kernel(source, {"threads": 1}), "agent:adversary", protocol=QUICK)
    assert outcome.verdict == "rejected" and outcome.reasons == ["timed_output_mismatch"], outcome.detail
    verdict = outcome.verdict_event.data
    assert verdict["reasons"] == ["timed_output_mismatch"] and verdict["state"] == "correct"
    assert "still the value the harness filled the output with before the launch" in verdict["detail"]
    candidate = candidate_evidence(outcome)
    assert candidate["correctness"]["correct"], "the checks alone cannot see it"
    timing = candidate["timing"]
    assert timing["launches_checked"] == QUICK.passes * QUICK.launches
    assert timing["launches_wrong"] == wrong_launches and not timing["timed_output_ok"]


def test_the_honest_kernel_the_stale_output_cheat_was_made_from_passes_the_timed_output_check(ledger):
    outcome = gate_candidate(F32, "cpu", Kernel(stale_output_source(honest=True), {"threads": 1}), "agent:honest",
                             protocol=QUICK)
    assert outcome.verdict_event.data["state"] == "correct"
    assert "timed_output_mismatch" not in outcome.reasons and "impossible_speed" not in outcome.reasons, outcome.detail
    timing = candidate_evidence(outcome)["timing"]
    assert timing["timed_output_ok"] and timing["launches_wrong"] == 0
    assert timing["launches_checked"] == QUICK.passes * QUICK.launches
