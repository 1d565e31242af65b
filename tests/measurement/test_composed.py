"""The composed bound of a temporal case on the CPU: T launches of a star_1 kernel, a baseline like any other."""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from measurement.backends import cpu
from measurement.backends.base import Kernel, Variant
from measurement.composed import composed_bounds, straightforward_step
from measurement.harness import codegen
from measurement.harness.cases import parse_case
from measurement.harness.oracle import make_inputs, reference, relative_error
from measurement.harness.plan import ProtocolSettings
from ledger.models import Event
from measurement.harness.judge import Correctness, VariantTiming
from measurement.reports import VariantReport
from measurement.services import MeasurementError, gate_candidate, refuse_failed_bounds, result_key

QUICK = ProtocolSettings(passes=2, launches=2, warmup=1, max_attempts=1)
# Several times faster than the straightforward f16 kernel, which GCC 12 leaves scalar: T launches
# of it beat the straightforward diamond kernel by far more than a shared machine's noise.
F16C = (Path(__file__).parent / "cheats" / "honest_f16c.c").read_text()
SHAPE = "32x32x32"



def repeated(source: str, case, times: int) -> str:
    """The C kernel `source` as a `stencil` that does all its work `times` times a launch: the same
    output, `times` times slower."""
    t = codegen.c_type(case.precision)
    return ("#define stencil forgestencil_once\n" + source + "\n#undef stencil\n"
            f"void stencil(const {t}* u, const {t}* a, {t}* y, const double* coef, int nz, int ny, int nx)\n"
            f"{{\n    for (int r = 0; r < {times}; ++r)\n        forgestencil_once(u, a, y, coef, nz, ny, nx);\n}}\n")

def test_a_composed_bound_launches_its_single_step_kernel_t_times_into_y_and_nan_around_the_region():
    backend = cpu.create()
    case = parse_case("diamond_ts4/19x21x23/f32")
    single = parse_case("star_1/19x21x23/f32")
    variant = Variant("composed(straightforward x4)", straightforward_step(single, "cpu"), steps=4)
    prepared = backend.prepare(case, variant)
    inputs = make_inputs(case, 11)
    buffers = backend.allocate(case, inputs, "end")
    buffers.poison_output()
    prepared.run(buffers, backend.coefficients(case.coefficients()))
    assert prepared.launches == 4  # T launches of the single step, no copy pass
    prepared.run(buffers, backend.coefficients(case.coefficients()))
    assert prepared.launches == 8
    out = buffers.output()
    assert relative_error(out[case.region], reference(case, inputs, case.coefficients())) < 1e-6
    outside = out.copy()
    outside[case.region] = np.nan
    assert np.isnan(outside).all() and buffers.inputs_unchanged()
    assert prepared.identity == {"steps": 4, "single_step_case": single.id, "single_step_launch": {},
                                 "single_step_source_hash": hashlib.sha256(codegen.straightforward_c(single).encode()).hexdigest()}


def test_the_straightforward_single_step_is_the_backends_own():
    single = parse_case(f"star_1/{SHAPE}/f16")
    assert straightforward_step(single, "cpu") == cpu.create().straightforward(single)
    cuda = straightforward_step(single, "cuda")
    assert cuda.source == codegen.straightforward_cuda(single) and cuda.launch == codegen.straightforward_cuda_launch(single)


def test_a_case_that_is_not_temporal_has_no_composed_bound(ledger):
    assert composed_bounds(parse_case(f"star_1/{SHAPE}/f32"), "cpu") == []


@pytest.mark.one_database
def test_a_diamond_candidate_slower_than_t_launches_of_the_admitted_star_1_kernel_is_rejected_naming_them(
        ledger, monkeypatch):
    monkeypatch.setenv("FORGESTENCIL_CPU_BASELINES", "")  # the bound among straightforward and the composed ones
    star = f"star_1/{SHAPE}/f16"
    with monkeypatch.context() as lifted:
        from tests.conftest import lift_speed_rule

        lift_speed_rule(lifted)
        admission = gate_candidate(star, "cpu", Kernel(F16C, {"threads": 1}), "agent:test", protocol=QUICK)
    assert admission.verdict == "admitted", admission.detail
    diamond = f"diamond_ts4/{SHAPE}/f16"
    assert [b.variant.name for b in composed_bounds(parse_case(diamond), "cpu")] == [
        "composed(star_1 admitted x4)", "composed(straightforward x4)"]
    # The straightforward diamond kernel on one thread, run eight times a launch: correct, and
    # slower than four F16C launches by far more than a loaded machine's noise (once a launch it
    # was measured at 0.9-1.06x of them).
    slow = Kernel(repeated(codegen.straightforward_c(parse_case(diamond)), parse_case(diamond), 8), {"threads": 1})
    outcome = gate_candidate(diamond, "cpu", slow, "agent:test", protocol=QUICK)
    composed = outcome.report.variants["composed(star_1 admitted x4)"]
    assert composed.correctness.correct and composed.usable and composed.variant.steps == 4
    assert composed.identity["admitted_under"] == result_key("cpu", star)
    assert composed.identity["single_step_source_hash"] == hashlib.sha256(F16C.encode()).hexdigest()
    assert composed.identity["steps"] == 4 and composed.identity["single_step_case"] == star
    data = outcome.verdict_event.data
    assert outcome.verdict == "rejected" and data["reasons"] == ["not_faster_than_public_bound"]
    # Which baseline is the fastest, and so the bound the verdict names, depends on the machine's
    # load (the straightforward f16 kernel is the F16C one and runs on every core: under a load of
    # 4-5 on two cores its four launches were once measured 22x slower than the one-thread
    # candidate), so the test checks the one-thread composed bound and that the verdict names the
    # fastest usable baseline, whichever it is.
    over = {name: b["speedup"] for name, b in data["baselines"].items()}
    assert over["composed(star_1 admitted x4)"] < 1, over
    bound = outcome.report.bound.variant.name
    assert over[bound] == min(over[r.variant.name] for r in outcome.report.baselines() if r.usable)
    assert data["bound"]["name"] == bound and f"over {bound}" in data["detail"]
    recorded = {v["name"]: v for v in outcome.measured_event.data["variants"]}
    assert recorded["composed(star_1 admitted x4)"]["source_hash"] == hashlib.sha256(F16C.encode()).hexdigest()
    assert recorded["composed(straightforward x4)"]["identity"]["admitted_under"] is None


def test_fewer_launches_of_a_shorter_diamonds_kernel_compose_the_case_with_nan_around_the_region():
    """diamond_ts4 as two launches of a 2-step kernel: each writes the grid minus 2 cells, so the
    4-step result lands on the case's region and NaN in the ring between."""
    backend = cpu.create()
    case = parse_case("diamond_ts4/19x21x23/f32")
    part = parse_case("diamond_ts2/19x21x23/f32")
    kernel = backend.straightforward(part)
    variant = Variant("composed(diamond_ts2 admitted x2)", kernel, steps=2)
    prepared = backend.prepare(case, variant)
    inputs = make_inputs(case, 11)
    buffers = backend.allocate(case, inputs, "end")
    buffers.poison_output()
    prepared.run(buffers, backend.coefficients(case.coefficients()))
    assert prepared.launches == 2
    out = buffers.output()
    assert relative_error(out[case.region], reference(case, inputs, case.coefficients())) < 1e-6
    outside = out.copy()
    outside[case.region] = np.nan
    assert np.isnan(outside).all() and buffers.inputs_unchanged()
    assert prepared.identity["single_step_case"] == part.id and prepared.identity["steps"] == 2
    with pytest.raises(ValueError):  # three launches do not make four steps
        backend.prepare(case, Variant("composed(diamond_ts2 admitted x3)", kernel, steps=3))


@pytest.mark.one_database
def test_an_admitted_shorter_diamond_kernel_becomes_a_composed_bound_of_the_longer_one(ledger, monkeypatch):
    monkeypatch.setenv("FORGESTENCIL_CPU_BASELINES", "")
    diamond = f"diamond_ts4/{SHAPE}/f32"
    assert [b.variant.name for b in composed_bounds(parse_case(diamond), "cpu")] == ["composed(straightforward x4)"]
    shorter = f"diamond_ts2/{SHAPE}/f32"
    kernel = cpu.create().straightforward(parse_case(shorter))
    with monkeypatch.context() as lifted:
        from tests.conftest import lift_speed_rule

        lift_speed_rule(lifted)
        admission = gate_candidate(shorter, "cpu", kernel, "agent:test", protocol=QUICK)
    assert admission.verdict == "admitted", admission.detail
    bounds = {b.variant.name: b for b in composed_bounds(parse_case(diamond), "cpu")}
    assert list(bounds) == ["composed(straightforward x4)", "composed(diamond_ts2 admitted x2)"]
    identity = bounds["composed(diamond_ts2 admitted x2)"].identity
    assert identity["admitted_under"] == result_key("cpu", shorter) and identity["steps"] == 2
    assert identity["single_step_case"] == shorter and identity["composed_of"] == "diamond_ts2 admitted"
    # A gate of the longer case times it in its child beside the other baselines, correct and usable
    outcome = gate_candidate(diamond, "cpu", cpu.create().straightforward(parse_case(diamond)), "agent:test", protocol=QUICK)
    timed = outcome.report.variants["composed(diamond_ts2 admitted x2)"]
    assert timed.correctness.correct and timed.usable and timed.variant.steps == 2
    assert "composed(diamond_ts2 admitted x2)" in outcome.verdict_event.data["baselines"]
    # diamond_ts3 has no shorter diamond that divides it: star_1's two composed bounds only
    assert [b.variant.name for b in composed_bounds(parse_case(f"diamond_ts3/{SHAPE}/f32"), "cpu")] == [
        "composed(straightforward x3)"]


@pytest.mark.one_database
def test_a_composed_bound_that_fails_stops_the_measurement_and_records_nothing(ledger, monkeypatch):
    """Session 40's gate of diamond_ts4/512^3 on the H200 lost both composed bounds to an illegal
    address and admitted its candidate over the next baseline, tuned Halide, at 2.31x where the
    composed bound made it 1.80x. A composed bound launches a kernel the ledger holds correct, so
    when one fails nothing is judged. Here the admitted star_1 kernel is correct on its own case and
    does nothing when its input's first cell is NaN, as the composed bound's scratch grids' is."""
    monkeypatch.setenv("FORGESTENCIL_CPU_BASELINES", "")
    star, diamond = f"star_1/{SHAPE}/f32", f"diamond_ts4/{SHAPE}/f32"
    t = codegen.c_type("f32")
    source = ("#define stencil forgestencil_once\n" + codegen.straightforward_c(parse_case(star)) + "\n#undef stencil\n"
              f"void stencil(const {t}* u, const {t}* a, {t}* y, const double* coef, int nz, int ny, int nx)\n"
              "{\n    if (u[0] == u[0]) forgestencil_once(u, a, y, coef, nz, ny, nx);\n}\n")
    with monkeypatch.context() as lifted:
        from tests.conftest import lift_speed_rule

        lift_speed_rule(lifted)
        admission = gate_candidate(star, "cpu", Kernel(source, {"threads": 1}), "agent:test", protocol=QUICK)
    assert admission.verdict == "admitted", admission.detail
    before = Event.objects.count()
    with pytest.raises(MeasurementError, match=r"a bound the ledger vouches for failed \(composed\(star_1 admitted x4\): unwritten_output"):
        gate_candidate(diamond, "cpu", cpu.create().straightforward(parse_case(diamond)), "agent:test", protocol=QUICK)
    assert Event.objects.count() == before
    assert not Event.objects.filter(stream=result_key("cpu", diamond)).exists()


def _report(name: str, schedule: str | None, correct: bool = True, timed_ok: bool | None = None) -> VariantReport:
    timing = None if timed_ok is None else VariantTiming(name, [1e-3, 1e-3], 1e-3, 0.0, 1e9, 0.5, 1.0, False,
                                                         0.0 if timed_ok else 1.0, timed_ok)
    return VariantReport(Variant(name, None, "baseline", schedule), "f32",
                         Correctness(correct, None if correct else "runtime_error", "" if correct else "pipeline failed (-1)"),
                         timing)


def test_a_tuned_library_that_fails_stops_the_measurement_as_a_composed_bound_does():
    """The same rule for a library whose tuning run chose a schedule it found correct: failing in a
    gate it must stop the verdict, not drop out of the bound. No CPU gate makes a tuned Halide schedule
    fail for real (docs/testing.md, session 41), so the rule is checked on its reports here; the
    composed test above runs the same function inside a real gate."""
    reports = {"straightforward": _report("straightforward", None, timed_ok=True),
               "halide": _report("halide", "auto_anderson2021", correct=False),
               "pystencils": _report("pystencils", None, correct=False)}
    refuse_failed_bounds(reports, set())  # untuned libraries may fail (pystencils here): nothing vouched for them
    with pytest.raises(MeasurementError, match=r"\(halide \[auto_anderson2021\] \(tuned\): runtime_error: pipeline failed"):
        refuse_failed_bounds(reports, {"halide"})
    reports["halide"] = _report("halide", "auto_anderson2021", timed_ok=False)
    refuse_failed_bounds(reports, {"halide"})  # correct in the checks: timing is judged after it
    with pytest.raises(MeasurementError, match=r"halide \[auto_anderson2021\] \(tuned\): its timed output was wrong"):
        refuse_failed_bounds(reports, {"halide"}, timed=True)
    refuse_failed_bounds({"straightforward": reports["straightforward"]}, {"halide"})  # left out of this run: not here
