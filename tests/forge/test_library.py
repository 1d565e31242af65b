"""The forged-kernel library on the CPU backend: kernels admitted by the real gate and sealed by
the real loop, served by exact case or nearest sealed shape, run and compared with the oracle."""
from pathlib import Path

import numpy as np
import pytest

from forge.library import NoForgedKernel, lookup, run_forged
from forge.library_offers import EXACT_CASE, NEAREST_SHAPE_CELL, verdict_standing
from forge.models import MapCell
from forge.selectors import straightforward_kernel
from forge.services import start_campaign
from ledger.services import append
from measurement.backends.base import Kernel
from measurement.harness.cases import parse_case
from measurement.harness.oracle import TOLERANCE, make_inputs, reference
from measurement.harness.plan import ProtocolSettings
from measurement.reruns import rerun_gate
from measurement.services import gate_candidate, result_key, source_hash
from tests.conftest import downgrade
from tests.forge.fixtures import CASE, HONEST, QUICK, Scripted, run_rounds


def seal(cases: list[str], source: str) -> None:
    """One committed round per case through the real loop: the budget converges, the cell is sealed."""
    campaign = start_campaign(cases, "cpu", "scripted", 1, "user:test")
    for case in cases:
        outcomes = run_rounds(campaign, case, Scripted([source]))
        assert [o.status for o in outcomes] == ["committed"], outcomes
    assert {c.case for c in MapCell.objects.all()} >= set(cases)


def toggled(toggle: str) -> str:
    """HONEST, but doubling its output while the environment variable `toggle` is set (a broken
    update after admission); the sandbox passes it to kernels when FORGESTENCIL_SANDBOX_PASS_ENV names it."""
    body = HONEST.replace("#include <stddef.h>", "#include <stddef.h>\n#include <stdlib.h>")
    marker = "    const float c0 = (float)coef[0], c1 = (float)coef[1];\n"
    body = body.replace(marker, marker + f'    const float scale = getenv("{toggle}") != NULL ? 2.0f : 1.0f;\n', 1)
    return body.replace("                y[i] = ", "                y[i] = scale * ", 1)


def error_against_oracle(kernel, case_id: str, seed: int, coefficients=None, reference_coefficients=None) -> float:
    case = parse_case(case_id)
    inputs = make_inputs(case, seed)
    result = kernel.run(inputs, coefficients)
    assert result.shape == tuple(n - 2 * case.stencil.halo for n in case.shape) and result.dtype == case.dtype
    wanted = reference_coefficients if reference_coefficients is not None else coefficients
    expected = reference(case, inputs, case.coefficients() if wanted is None else np.asarray(wanted))
    return float(np.linalg.norm(result.astype(np.float64) - expected) / np.linalg.norm(expected))


def test_the_exact_case_kernel_is_served_with_its_provenance_and_runs_like_the_oracle(ledger, admit):
    outcome = admit()  # the honest kernel gated on CASE, measured once a session (tests/conftest.py)
    kernel = lookup(CASE, "cpu")
    assert (kernel.dispatch, kernel.case, kernel.requested, kernel.cell) == (EXACT_CASE, CASE, CASE, None)
    assert kernel.verdict_event == str(outcome.verdict_event.event_id)
    assert kernel.source_hash == source_hash(HONEST) and kernel.status == "admitted"
    assert kernel.speedup == pytest.approx(outcome.speedup) and kernel.bound["name"] == outcome.verdict_event.data["bound"]["name"]
    device = outcome.measured_event.data["description"]["device"]
    assert kernel.architecture["device"] == device and device in kernel.reason

    tolerance = TOLERANCE["f32"]
    assert error_against_oracle(kernel, CASE, seed=11) <= tolerance
    assert error_against_oracle(kernel, "star_1/12x13x14/f32", seed=12) <= tolerance  # extents are run-time arguments
    fresh = [0.4, 0.1]
    assert error_against_oracle(kernel, CASE, seed=13, coefficients=fresh) <= tolerance
    # The comparison has teeth: the case's own coefficients are not the ones used.
    assert error_against_oracle(kernel, CASE, seed=13, coefficients=fresh, reference_coefficients=parse_case(CASE).coefficients()) > 0.1

    one_call = run_forged("star_1", make_inputs(parse_case(CASE), 14))
    assert one_call.shape == (62, 62, 62)

    assert lookup(CASE, "cpu", architecture=device.upper()).verdict_event == kernel.verdict_event
    with pytest.raises(NoForgedKernel) as other_machine:
        lookup(CASE, "cpu", architecture="Imaginary CPU 9000")
    assert "'Imaginary CPU 9000'" in str(other_machine.value) and device in str(other_machine.value)

    # Admitted but never sealed: served for its own case only, and the error says so.
    with pytest.raises(NoForgedKernel) as unsealed:
        lookup("star_1/32x32x32/f32", "cpu")
    message = str(unsealed.value)
    assert f"{CASE} (admitted, not sealed: this exact case only)" in message
    assert "manage.py forge run --case star_1/32x32x32/f32" in message

    append(downgrade(result_key("cpu", CASE), to_value=1.01))
    downgraded = lookup(CASE, "cpu")
    assert (downgraded.status, downgraded.speedup) == ("downgraded", 1.01)


def test_an_unsealed_shape_is_served_by_the_nearest_sealed_shape_of_its_type_and_precision(ledger, speed_rule_lifted):
    cube, slab = CASE, "star_1/16x128x128/f32"  # the same number of points, different aspect
    seal([cube, slab], HONEST)
    tolerance = TOLERANCE["f32"]

    small = lookup("star_1/12x13x14/f32", "cpu")  # equal point distance to both: the cube's aspect wins
    assert (small.dispatch, small.case, small.cell, small.requested) == (NEAREST_SHAPE_CELL, cube, f"cpu|{cube}", "star_1/12x13x14/f32")
    assert "nearest sealed shape" in small.reason and small.source_hash == source_hash(HONEST)
    assert small.verdict_event == MapCell.objects.get(case=cube).verdict_event
    assert error_against_oracle(small, "star_1/12x13x14/f32", seed=21) <= tolerance

    flat = lookup("star_1/8x96x96/f32", "cpu")
    assert (flat.dispatch, flat.case) == (NEAREST_SHAPE_CELL, slab)
    assert error_against_oracle(flat, "star_1/8x96x96/f32", seed=22) <= tolerance

    assert lookup(slab, "cpu").dispatch == EXACT_CASE

    with pytest.raises(NoForgedKernel) as other_precision:
        lookup("star_1/64x64x64/f64", "cpu")
    message = str(other_precision.value)
    assert "star_1/64x64x64/f64 on cpu" in message and f"{cube} (admitted, sealed" in message
    assert "same type and precision" in message and "forge run --case star_1/64x64x64/f64" in message
    with pytest.raises(NoForgedKernel, match=r"Available for box_1 on cpu: none\."):
        lookup("box_1/64x64x64/f32", "cpu")


def test_a_retracted_result_is_never_served_for_its_case_or_as_a_neighbour(ledger, speed_rule_lifted, monkeypatch):
    toggle = "TEST_KERNEL_TOGGLE"
    monkeypatch.setenv("FORGESTENCIL_SANDBOX_PASS_ENV", toggle)
    monkeypatch.delenv(toggle, raising=False)
    broken_later = toggled(toggle)
    seal([CASE], broken_later)
    cell = MapCell.objects.get(case=CASE)
    assert lookup(CASE, "cpu").source_hash == cell.source_hash
    assert lookup("star_1/20x20x20/f32", "cpu").cell == cell.key

    monkeypatch.setenv(toggle, "1")
    rerun, revision = rerun_gate(CASE, "cpu", "user:reviewer", QUICK)
    assert revision is not None and revision.type == "ResultRetracted", rerun.detail
    for case in (CASE, "star_1/20x20x20/f32"):
        with pytest.raises(NoForgedKernel) as refused:
            lookup(case, "cpu")
        assert f"{CASE} (retracted: not served)" in str(refused.value)
    with pytest.raises(NoForgedKernel, match="is retracted; a retracted result is never served"):
        lookup(CASE, "cpu")

    # A new kernel admitted for the case is served for it; the sealed cell still holds the
    # retracted kernel, so other shapes stay refused.
    readmitted = gate_candidate(CASE, "cpu", Kernel(HONEST, {"threads": 1}), "agent:test", protocol=QUICK)
    assert readmitted.verdict == "admitted", readmitted.detail
    served = lookup(CASE, "cpu")
    assert (served.dispatch, served.source_hash) == (EXACT_CASE, source_hash(HONEST))
    assert cell.verdict_event not in verdict_standing("cpu", CASE)
    with pytest.raises(NoForgedKernel):
        lookup("star_1/20x20x20/f32", "cpu")


@pytest.mark.one_database
def test_bad_inputs_are_refused_with_a_clear_message(ledger, speed_rule_lifted):
    case_id = "varcoef_star_1/64x64x64/f32"
    # Setup, not the subject: an admitted kernel to look up. At 64^3 the measured time sits near the
    # copy-bandwidth floor, and a CI machine under load once measured it below (rejected: "below the
    # copy-bandwidth floor"), so the gate may run up to three times before the test gives up.
    for _ in range(3):
        outcome = gate_candidate(case_id, "cpu", straightforward_kernel(case_id, "cpu"), "agent:test", protocol=QUICK)
        if outcome.verdict == "admitted":
            break
    else:
        pytest.skip(f"the straightforward kernel was not admitted on this machine this time: {outcome.detail}")
    kernel = lookup(case_id, "cpu")
    case = parse_case("varcoef_star_1/20x21x22/f32")
    inputs = make_inputs(case, 31)
    assert error_against_oracle(kernel, case.id, seed=31) <= TOLERANCE["f32"]

    u, a = inputs["u"], inputs["a"]
    refusals = [
        ({"u": u}, None, r"needs inputs \['u', 'a'\] and the variable coefficient field 'a'.*missing \['a'\]"),
        ({"u": u.astype(np.float64), "a": a}, None, r"input 'u' is float64 but this kernel computes in f32"),
        ({"u": u[0], "a": a[0]}, None, r"varcoef_star_1 is 3D: input 'u' must be \(nz, ny, nx\), got shape \(21, 22\)"),
        ({"u": u, "a": a[:, :, :-1]}, None, r"inputs 'u' \(20, 21, 22\) and 'a' \(20, 21, 21\) must have the same shape"),
        ({"u": u[:2], "a": a[:2]}, None, r"cannot run varcoef_star_1 on shape \(2, 21, 22\).*at least 3"),
        ({"u": u, "a": a, "v": u}, None, r"takes only inputs \['u', 'a'\]; unexpected \['v'\]"),
        ({"u": u, "a": a}, [0.5, 0.25, 0.25], r"takes 2 coefficients .*got shape \(3,\)"),
        ({"u": u, "a": a}, [np.nan, 0.1], r"coefficients must be finite"),
        ([u, a], None, r"inputs must be a dict of arrays"),
    ]
    for arrays, coefficients, message in refusals:
        with pytest.raises(ValueError, match=message):
            kernel.run(arrays, coefficients)
    with pytest.raises(ValueError, match="unknown backend 'tpu'"):
        lookup(case_id, "tpu")
    with pytest.raises(ValueError, match="forged kernels exist for f16, f32, f64 only"):
        run_forged("varcoef_star_1", {"u": u.astype(np.int32), "a": a})


@pytest.mark.gpu
def test_a_cuda_kernel_is_served_for_its_architecture_and_runs_on_the_device(ledger, speed_rule_lifted, monkeypatch):
    """On the device machine only (scripts/gpu_tests.sh): the CUDA path of lookup and run."""
    monkeypatch.setenv("FORGESTENCIL_CUDA_BASELINES", "")  # the straightforward kernel alone is the bound
    case_id = "star_1/256x256x256/f32"  # large enough that the impossible-speed floor means something
    source = (Path(__file__).parents[1] / "measurement" / "cheats_cuda" / "honest.cu").read_text()
    protocol = ProtocolSettings(passes=3, launches=3, warmup=1, max_attempts=1, check_timeout=180, timing_timeout=300)
    outcome = gate_candidate(case_id, "cuda", Kernel(source, {"block": [32, 8, 1]}), "agent:test", protocol=protocol)
    assert outcome.verdict == "admitted", outcome.detail
    description = outcome.measured_event.data["description"]
    capability = description["compute_capability"]

    kernel = lookup(case_id, "cuda", architecture=f"sm_{capability.replace('.', '')}")
    assert kernel.architecture == {"device": description["device"], "compute_capability": capability}
    assert kernel.dispatch == EXACT_CASE and description["device"] in kernel.reason
    assert lookup(case_id, "cuda", architecture=description["device"]).verdict_event == kernel.verdict_event
    with pytest.raises(NoForgedKernel) as elsewhere:
        lookup(case_id, "cuda", architecture="sm_10")
    assert capability in str(elsewhere.value) and "--backend cuda" in str(elsewhere.value)

    for shape, seed in (("256x256x256", 41), ("37x43x65", 42)):
        assert error_against_oracle(kernel, f"star_1/{shape}/f32", seed=seed) <= TOLERANCE["f32"]
    with pytest.raises(NoForgedKernel):
        lookup(case_id, "cpu")  # admitted on cuda only
