"""The CUDA backend's "halide" baseline on a real GPU (marker `gpu`), from the AOT folder that
scripts/halide_aot.py builds here and the device call carries (scripts/halide_device_check.sh).

The baseline goes through the services path, in the sandboxed harness children, with its
identity recorded (first: it is the one test that needs the AOT folder visible in the sandbox);
then every compiled schedule of a case of every type and precision of the GPU matrix is run on
small shapes (one odd) against the float64 oracle, as the gate's checks run a baseline that
was prepared for the matrix case. On the H200 (docs/benchmarks/halide_h200_aot_check.json) the
autoscheduler's schedules (ShiftInwards splits) refused the odd shapes of four types and the
sliding-window diamond_ts8 schedules failed to launch: loud failures, allowed for non-defaults.
"""
from __future__ import annotations

import numpy as np
import pytest

from measurement.backends.base import Variant
from measurement.backends.halide_aot import case_entries, read_index
from measurement.harness.cases import parse_case
from measurement.harness.oracle import TOLERANCE, make_inputs, reference, relative_error
from measurement.harness.plan import ProtocolSettings, odd_shape
from measurement.services import measure_baselines

pytestmark = pytest.mark.gpu

QUICK = ProtocolSettings(passes=3, launches=3, warmup=1, max_attempts=1, check_timeout=180, timing_timeout=300)
# Every type, every precision, the temporal depths; prepared as the matrix case, run small.
CASES = [
    "star_1/512x512x512/f16",
    "star_1/512x512x512/f32",
    "star_1/512x512x512/f64",
    "star_2/512x512x512/f64",
    "star_4/512x512x512/f16",
    "box_1/512x512x512/f16",
    "box_2/256x256x256/f32",
    "star2d_1/8192x8192/f64",
    "box2d_1/8192x8192/f16",
    "varcoef_star_1/512x512x512/f16",
    "varcoef_star_1/512x512x512/f64",
    "diamond_ts1/512x512x512/f32",
    "diamond_ts4/256x256x256/f32",
    "diamond_ts8/256x256x256/f32",
]
SMALL = {3: (40, 36, 72), 2: (96, 130)}


@pytest.fixture(scope="module")
def index():
    found = read_index()
    assert found is not None, "no Halide AOT folder: run scripts/halide_aot.py here and carry device_carry/halide"
    return found


@pytest.fixture(scope="module")
def backend():
    from measurement.backends import cuda

    return cuda.create()


def run_small(backend, case, variant, shape, seed):
    """Prepare for the matrix case, run on `shape`; (output, inputs, coefficients, buffers)."""
    prepared = backend.prepare(case, variant)
    shaped = case.with_shape(shape)
    inputs = make_inputs(shaped, seed)
    coef = np.asarray(case.coefficients()) * np.linspace(0.9, 1.1, len(case.stencil.classes))  # not the case's own
    buffers = backend.allocate(shaped, inputs)
    buffers.poison_output()
    prepared.run(buffers, backend.coefficients(coef))
    backend.synchronize()
    return prepared, shaped, buffers.output(), inputs, coef, buffers


def test_halide_through_the_services_in_the_sandbox(ledger, index, monkeypatch):
    monkeypatch.setenv("FORGESTENCIL_CUDA_BASELINES", "halide")
    case_id = "star_1/128x128x128/f32"
    _, event = measure_baselines(case_id, "cuda", "user:test", QUICK)
    variants = {v["name"]: v for v in event.data["variants"]}
    assert list(variants) == ["straightforward", "halide"]
    halide = variants["halide"]
    assert halide["correctness"]["correct"], halide["correctness"]["detail"]
    assert halide["timing"] is not None and halide["timing"]["timed_output_ok"]
    default = next(e for e in case_entries(index, case_id) if e["default"])
    assert halide["identity"]["schedule"] == default["schedule"]
    assert halide["identity"]["aot_sha256"] == default["aot_sha256"]


@pytest.mark.parametrize("case_id", CASES)
def test_the_default_schedule_is_correct_and_no_schedule_is_silently_wrong(backend, index, case_id):
    """The default must be right on every shape; another schedule may fail loudly (a RuntimeError
    with Halide's message: the gate records it and a tuning run never picks it), never by a
    wrong value or a write outside the region."""
    case = parse_case(case_id)
    entries = case_entries(index, case_id)
    compiled = [e for e in entries if "error" not in e]
    assert compiled, f"no schedule of {case_id} compiled: {[e.get('error') for e in entries]}"
    assert "halide" in backend.baseline_names(case)
    for entry in compiled:
        schedule = entry["schedule"]
        for seed, shape in enumerate((odd_shape(case), SMALL[case.stencil.dims])):
            try:
                prepared, shaped, out, inputs, coef, buffers = run_small(backend, case, Variant("halide", schedule=schedule), shape, seed)
            except RuntimeError as error:
                assert not entry["default"], f"the default {schedule} failed on {case_id} at {shape}: {error}"
                assert f"Halide pipeline {schedule} on " in str(error)
                continue
            error = relative_error(out[shaped.region], reference(shaped, inputs, coef))
            assert error <= TOLERANCE[case.precision], f"{schedule} on {shaped.id}: error {error:.3g}"
            outside = np.ones(shaped.shape, dtype=bool)
            outside[shaped.region] = False
            assert np.isnan(out[outside].astype(np.float64)).all(), f"{schedule} wrote outside the region of {shaped.id}"
            assert buffers.inputs_unchanged(), schedule
            assert prepared.identity["schedule"] == schedule


def test_the_default_schedule_and_its_identity(backend, index):
    case = parse_case("star_1/512x512x512/f32")
    prepared = backend.prepare(case, Variant("halide"))
    default = next(e for e in case_entries(index, case.id) if e["default"])
    assert prepared.identity == {
        "library": "halide",
        "version": index["halide_version"],
        "schedule": default["schedule"],
        "schedule_text": default["schedule_text"],
        "target": index["target"],
        "aot_sha256": default["aot_sha256"],
        "computes_in": "f32",
    }
    with pytest.raises(ValueError, match="no Halide schedule 'gpu_nonesuch' for star_1/512x512x512/f32; compiled: "):
        backend.prepare(case, Variant("halide", schedule="gpu_nonesuch"))


def test_a_case_outside_the_aot_folder_offers_no_halide_and_says_why(backend):
    case = parse_case("star_1/40x36x45/f32")
    assert "halide" not in backend.baseline_names(case)
    with pytest.raises(ValueError, match=r"no Halide AOT pipeline for star_1/40x36x45/f32: run scripts/halide_aot.py"):
        backend.prepare(case, Variant("halide"))
