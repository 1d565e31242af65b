"""The CUDA backend on a real GPU (marker `gpu`: skipped where CuPy sees no device).

Run on the device machine with `scripts/gpu_tests.sh` (docs/gpu.md). Three groups:

* the backend in this process: facts, compile errors, padding, timing, and every baseline
  against the float64 oracle on small odd shapes in all three precisions;
* the full services path (spawned harness children, ledger events): measure_baselines and the
  gate on an honest kernel;
* the CUDA adversarial subset: the planted cheats of cheats_cuda/*.cu, each rejected for
  one exact reason, as tests/measurement/test_adversarial.py does for the CPU; among them the
  two that rely on an earlier launch (issue 14, point 11), which pass every check and are
  rejected by the output of their own timed launches.

The adversarial and honest-gate tests restrict the library baselines to none
(FORGESTENCIL_CUDA_BASELINES=""): the straightforward kernel is still timed as the bound, and
every cheat's reason is decided before the bound matters. That keeps each gate to four children.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from measurement.backends.base import CompileError, Kernel, Variant
from measurement.harness.cases import parse_case
from measurement.harness.oracle import TOLERANCE, make_inputs, reference, relative_error
from measurement.harness.plan import ProtocolSettings
from measurement.services import gate_candidate, measure_baselines

pytestmark = pytest.mark.gpu

CHEATS = Path(__file__).parent / "cheats_cuda"
QUICK = ProtocolSettings(passes=3, launches=3, warmup=1, max_attempts=1, check_timeout=180, timing_timeout=300)
F32 = "star_1/64x64x64/f32"
# Large enough that a copy is well past launch latency: the impossible-speed floor means something.
F32_LARGE = "star_1/256x256x256/f32"
ONE_BLOCK_PER_PLANE = {"block": [256, 1, 1], "tile": [65536, 65536, 1]}
ONE_THREAD_PER_ROW = {"block": [1, 128, 1], "tile": [65536, 128, 1]}


@pytest.fixture(scope="module")
def backend():
    from measurement.backends import cuda

    return cuda.create()


@pytest.fixture
def no_library_baselines(monkeypatch):
    monkeypatch.setenv("FORGESTENCIL_CUDA_BASELINES", "")


def run_variant(backend, case, variant, seed=3, coef=None):
    prepared = backend.prepare(case, variant)
    inputs = make_inputs(case, seed)
    coef = case.coefficients() if coef is None else coef
    buffers = backend.allocate(case, inputs)
    buffers.poison_output()
    prepared.run(buffers, backend.coefficients(coef))
    backend.synchronize()
    return prepared, buffers, inputs, coef


# ---------------------------------------------------------------- the backend itself


def test_describe_and_environment(backend):
    facts = backend.describe()
    assert facts["backend"] == "cuda" and facts["compiler"] == "nvrtc"
    for key in ("device", "compute_capability", "sm_count", "l2_bytes", "driver_version", "runtime_version", "nvrtc_version", "cupy"):
        assert facts[key], key
    assert facts["sm_count"] > 0 and facts["l2_bytes"] >= 1 << 20
    state = backend.environment()
    assert {"gpu", "compute_processes", "other_compute_processes", "idle", "memory_free_bytes", "time"} <= set(state)


def test_copy_bandwidth_and_timing_are_plausible(backend):
    rate = backend.copy_bandwidth(64 * 1024 * 1024)
    assert 1e11 < rate < 2e13  # 0.1 to 20 TB/s
    case = parse_case("star_1/128x128x128/f32")
    prepared, buffers, _, coef = run_variant(backend, case, Variant("straightforward"))
    seconds = backend.time_launches(prepared, buffers, backend.coefficients(coef), 5, flush=True)
    assert len(seconds) == 5 and all(0 < s < 0.1 for s in seconds)


def test_the_empty_kernel_times_only_the_launch_overhead(backend):
    case = parse_case("star_1/32x32x32/f16")  # f16: the source includes cuda_fp16.h
    empty = backend.prepare(case, Variant("empty", backend.empty(case)))
    assert empty.geometry(case.with_shape((512, 512, 512)))[0] == (1, 1, 1)  # one block whatever the shape
    buffers = backend.allocate(case, make_inputs(case, 1))
    seconds = sorted(backend.time_launches(empty, buffers, backend.coefficients(case.coefficients()), 9, flush=True))
    assert 0 < seconds[4] < 50e-6


def test_an_nvrtc_error_is_a_compile_error_with_the_log(backend):
    source = 'extern "C" __global__ void stencil(const float* u, const float* a, float* y, const double* c, int nz, int ny, int nx)\n{ y[0] = undeclared_name_xyz; }\n'
    with pytest.raises(CompileError) as raised:
        backend.prepare(parse_case(F32), Variant("candidate", Kernel(source), "candidate"))
    assert "undeclared_name_xyz" in str(raised.value) and "kernel.cu" in str(raised.value)


def test_a_missing_stencil_function_or_a_bad_launch_is_a_compile_error(backend):
    case = parse_case(F32)
    with pytest.raises(CompileError, match="stencil"):
        backend.prepare(case, Variant("candidate", Kernel('extern "C" __global__ void other() {}'), "candidate"))
    honest = (CHEATS / "honest.cu").read_text()
    for launch in ({"threads": 4}, {"block": [64, 32, 1]}, {"block": [32, 8]}, {"block": [32, 8, 1], "shared_bytes": 1 << 30}):
        with pytest.raises(CompileError):
            backend.prepare(case, Variant("candidate", Kernel(honest, launch), "candidate"))


def test_more_than_48_kib_of_dynamic_shared_memory_is_opted_into_and_correct(backend):
    """The pipe candidate at T = 8 takes 128 KiB a block: before the opt-in went through CuPy's
    RawKernel attribute, every launch over 48 KiB failed (H200 sweep of session 16)."""
    from forge.handwritten_temporal import render_pipe

    case = parse_case("diamond_ts8/40x44x48/f32")
    source, launch, _ = render_pipe(case, 64, 32, 8)
    assert launch["shared_bytes"] > 48 * 1024
    _, buffers, inputs, coef = run_variant(backend, case, Variant("candidate", Kernel(source, launch), "candidate"))
    output = np.asarray(buffers.output(), dtype=np.float64)[case.region]
    assert relative_error(output, reference(case, inputs, coef)) <= TOLERANCE[case.precision]


def test_padding_turns_out_of_bounds_reads_into_nan_and_writes_into_an_error(backend):
    from measurement.backends.cuda import OutOfBoundsWrite

    case = parse_case(F32)
    reads = (CHEATS / "reads_out_of_bounds.cu").read_text()
    _, buffers, _, _ = run_variant(backend, case, Variant("candidate", Kernel(reads), "candidate"))
    out = buffers.output()
    assert np.isnan(out[-2, -2, 1:-1]).all() and not np.isnan(out[1, 1, 1:-1]).any()
    writes = 'extern "C" __global__ void stencil(const float* u, const float* a, float* y, const double* c, int nz, int ny, int nx)\n{ if (threadIdx.x == 0 && blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0) y[-1] = 1.0f; }\n'
    _, buffers, _, _ = run_variant(backend, case, Variant("candidate", Kernel(writes), "candidate"))
    with pytest.raises(OutOfBoundsWrite):
        buffers.output()
    assert buffers.inputs_unchanged()


BASELINE_CASES = [
    "star_1/40x36x45/f32",
    "star_2/33x35x37/f64",
    "box_2/30x34x38/f16",
    "box_1/29x31x35/f32",
    "varcoef_star_1/33x35x37/f16",
    "varcoef_star_1/33x35x37/f64",
    "diamond_ts3/30x31x33/f32",
    "star2d_1/61x67/f16",
    "box2d_1/67x71/f64",
]


@pytest.mark.parametrize("case_id", BASELINE_CASES)
def test_every_baseline_matches_the_oracle(backend, case_id):
    case = parse_case(case_id)
    names = backend.baseline_names(case)
    assert names[:2] == ["straightforward", "cupyx.ndimage"]
    for name in names:
        coef = np.asarray(case.coefficients()) * np.linspace(0.9, 1.1, len(case.stencil.classes))  # not the case's own
        prepared, buffers, inputs, coef = run_variant(backend, case, Variant(name), seed=11, coef=coef)
        assert prepared.precision in ("f16", "f32", "f64")
        out = buffers.output()
        error = relative_error(out[case.region], reference(case, inputs, coef))
        assert error <= TOLERANCE[case.precision], f"{name} on {case_id}: error {error:.3g}"
        outside = np.ones(case.shape, dtype=bool)
        outside[case.region] = False
        assert np.isnan(out[outside].astype(np.float64)).all(), f"{name} wrote outside the region"
        assert buffers.inputs_unchanged(), name


# ---------------------------------------------------------------- the full services path


def test_measure_baselines_through_the_services(ledger):
    report, event = measure_baselines(F32, "cuda", "user:test", QUICK)
    data = event.data
    names = [v["name"] for v in data["variants"]]
    assert names[:2] == ["straightforward", "cupyx.ndimage"]
    for variant in data["variants"]:
        assert variant["correctness"]["correct"], (variant["name"], variant["correctness"]["detail"])
        assert variant["timing"] is not None and variant["timing"]["timed_output_ok"], variant["name"]
        assert all(s > 0 for p in variant["timing"]["samples"] for s in p)
    assert data["bound"]["name"] in names
    assert data["copy_bandwidth"] > 1e10
    assert data["description"]["compiler"] == "nvrtc" and data["description"]["precisions"]["straightforward"] == "f32"
    assert data["environment"]["before"]["time"] <= data["environment"]["after"]["time"]
    assert [c["shape"] for c in data["variants"][0]["correctness"]["checks"]][:2] == [[64, 64, 64], [37, 43, 65]]


def test_an_honest_kernel_is_judged_on_speed_alone(ledger, no_library_baselines):
    source = (CHEATS / "honest.cu").read_text()
    outcome = gate_candidate(F32_LARGE, "cuda", Kernel(source, {"block": [32, 8, 1]}), "agent:test", protocol=QUICK)
    data = outcome.verdict_event.data
    assert data["state"] == "correct", outcome.detail
    assert data["reasons"] in ([], ["not_faster_than_public_bound"]), outcome.detail
    assert data["bound"]["name"] == "straightforward"


# ---------------------------------------------------------------- the adversarial subset


@pytest.mark.parametrize(
    "cheat, case, launch, reason",
    [
        ("unwritten_output", F32, {}, "unwritten_output"),
        ("half_output", F32, {}, "unwritten_output"),
        ("modifies_input", F32, {}, "input_modified"),
        ("constant_output", F32, {}, "constant_output"),
        ("hardcoded_shape", F32, {}, "shape_specific"),
        ("input_alias", F32, {}, "output_aliases_input"),
        # Nothing faults on the GPU: the read past u lands in the NaN padding, and the NaN it
        # computes differs, bit for bit, from the output's poison (the CPU has guard pages).
        ("reads_out_of_bounds", F32, {}, "out_of_bounds"),
        ("impossible_speed", F32_LARGE, ONE_BLOCK_PER_PLANE, "impossible_speed"),
    ],
)
def test_cheat_is_rejected_for_the_right_reason(ledger, no_library_baselines, cheat, case, launch, reason):
    kernel = Kernel((CHEATS / f"{cheat}.cu").read_text(), launch)
    outcome = gate_candidate(case, "cuda", kernel, "agent:adversary", protocol=QUICK)
    assert outcome.verdict == "rejected"
    assert outcome.reasons == [reason], outcome.detail
    verdict = outcome.verdict_event.data
    assert verdict["reasons"] == [reason] and verdict["verdict"] == "rejected"
    candidates = [v for v in outcome.measured_event.data["variants"] if v["role"] == "candidate"]
    assert len(candidates) == 1 and candidates[0]["correctness"]["correct"] == (reason == "impossible_speed")


@pytest.mark.parametrize(
    "cheat, wrong_launches",
    [
        ("stale_output", QUICK.passes * QUICK.launches),  # every timed launch starts from a finite fill
        ("launch_counter", 4),  # its __device__ counter skips planes in launches 4, 5, 7, 8; 9 is whole
    ],
)
def test_a_kernel_that_relies_on_an_earlier_launch_is_rejected_by_its_timed_output(ledger, no_library_baselines, cheat,
                                                                                    wrong_launches):
    kernel = Kernel((CHEATS / f"{cheat}.cu").read_text(), ONE_THREAD_PER_ROW)
    outcome = gate_candidate(F32_LARGE, "cuda", kernel, "agent:adversary", protocol=QUICK)
    assert outcome.verdict == "rejected" and outcome.reasons == ["timed_output_mismatch"], outcome.detail
    assert "still the value the harness filled the output with" in outcome.verdict_event.data["detail"]
    (candidate,) = [v for v in outcome.measured_event.data["variants"] if v["role"] == "candidate"]
    assert candidate["correctness"]["correct"], "the checks alone cannot see it"
    assert candidate["timing"]["launches_checked"] == QUICK.passes * QUICK.launches
    assert candidate["timing"]["launches_wrong"] == wrong_launches


def test_the_honest_kernel_the_stale_output_cheat_was_made_from_passes_the_timed_output_check(ledger, no_library_baselines):
    source = "\n".join(line for line in (CHEATS / "stale_output.cu").read_text().splitlines() if "/* STALE */" not in line)
    assert "isnan(y[i])" not in source
    outcome = gate_candidate(F32_LARGE, "cuda", Kernel(source, ONE_THREAD_PER_ROW), "agent:honest", protocol=QUICK)
    assert outcome.verdict_event.data["state"] == "correct"
    assert "timed_output_mismatch" not in outcome.reasons and "impossible_speed" not in outcome.reasons, outcome.detail
    (candidate,) = [v for v in outcome.measured_event.data["variants"] if v["role"] == "candidate"]
    assert candidate["timing"]["timed_output_ok"] and candidate["timing"]["launches_wrong"] == 0


def test_a_compile_error_is_a_compilation_failure_through_the_gate(ledger, no_library_baselines):
    outcome = gate_candidate(F32, "cuda", Kernel('extern "C" __global__ void stencil( { broken'), "agent:x", protocol=QUICK)
    assert outcome.reasons == ["compilation_failure"]
    assert outcome.verdict_event.data["state"] == "compilation_failure"
    assert "error" in outcome.detail
