"""forge.kernelgen against the float64 oracle.

CPU: every stencil type at small odd shapes, through measurement.backends.cpu (compiled with the
backend's flags, guard pages on), for the default plan, every lever applicable to the default
plan, several multi-parameter combinations and a short deterministic forging walk; f32 mostly,
f64 and f16 on a few. The output must match the oracle within TOLERANCE over the written region,
stay NaN (poisoned) outside it, and leave the inputs unchanged. All sources are compiled up front
in parallel (compile_shared caches by source hash), so the tests themselves only load and run.

CUDA: every type x precision x plan renders (no GPU needed); a few sources are compile-checked
with nvcc where it exists; on a GPU (marker `gpu`) the same checks as the CPU run through
get_backend("cuda").
"""
from __future__ import annotations

import concurrent.futures
import os
import shutil
import subprocess

import numpy as np
import pytest

from forge.kernelgen import CUDA_DEFAULTS, Plan, effective, render
from forge.levers import applicable, apply, initial_plan, rank
from measurement.backends.base import Variant
from measurement.harness import codegen
from measurement.harness.cases import parse_case
from measurement.harness.oracle import TOLERANCE, make_inputs, reference, relative_error

TYPES = ["star_1", "star_2", "star_4", "box_1", "box_2", "star2d_1", "box2d_1", "varcoef_star_1", "diamond_ts3"]
SHAPES = {3: "19x21x23", 2: "37x41"}
CPU = Plan.default("cpu")
CUDA = Plan.default("cuda")

CPU_COMBOS = {
    "zyx_all": CPU.with_(unroll_classes=True, simd=True, restrict=True, schedule="guided", collapse=1),
    "tiled_small": CPU.with_(loop_order="tiled", block_y=5, block_x=7, schedule="dynamic", collapse=2, simd=True),
    "tiled_rows": CPU.with_(loop_order="tiled", block_y=3, collapse=1, unroll_classes=True, restrict=True, threads=1),
    "blocked_small": CPU.with_(temporal="blocked", block_z=3, block_y=4, block_x=5, simd=True, unroll_classes=True, restrict=True),
    "blocked_rows": CPU.with_(temporal="blocked", block_z=2, block_y=5, collapse=1, schedule="dynamic"),
}
WALK_KINDS = [
    "memory-bound: 80% of copy bandwidth",
    "compute-bound: 30 flop/byte",
    "latency-bound: 20% of copy bandwidth",
    "unknown: no measurement",
]


def case_of(type_name: str, precision: str = "f32"):
    dims = 2 if "2d" in type_name else 3
    return parse_case(f"{type_name}/{SHAPES[dims]}/{precision}")


def walk(case, backend: str, rounds: int = 6) -> Plan:
    """A deterministic forging walk: each round applies the top-ranked applicable lever."""
    plan = initial_plan(case, backend)
    for n in range(rounds):
        options = rank(applicable(case, plan), WALK_KINDS[n % len(WALK_KINDS)])
        if not options:
            break
        plan = apply(options[0], case, plan)
    return plan


# ---------------------------------------------------------------- CPU work list


def _cpu_work() -> list[tuple[str, str, str, Plan]]:
    """(test group, case id, label, plan) of every CPU kernel the tests run."""
    work = []
    for t in TYPES:
        case = case_of(t)
        work.append(("default", case.id, "default", CPU))
        for lever in applicable(case, initial_plan(case, "cpu")):
            work.append(("lever", case.id, lever.name, apply(lever, case, initial_plan(case, "cpu"))))
        for label, plan in CPU_COMBOS.items():
            work.append(("combo", case.id, label, plan))
        work.append(("walk", case.id, "walk", walk(case, "cpu")))
    for cid in ("star_2/19x21x23/f64", "box2d_1/37x41/f16", "diamond_ts3/19x21x23/f16", "varcoef_star_1/19x21x23/f64", "box_2/19x21x23/f16"):
        case = parse_case(cid)
        work.append(("precision", cid, "default", CPU))
        for label in ("zyx_all", "tiled_small", "blocked_small"):
            work.append(("precision", cid, label, CPU_COMBOS[label]))
    return work


CPU_WORK = _cpu_work()


@pytest.fixture(scope="module")
def cpu_backend():
    from measurement.backends import cpu

    sources = sorted({render(parse_case(cid), "cpu", plan).source for _, cid, _, plan in CPU_WORK})
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1)) as pool:
        list(pool.map(cpu.compile_shared, sources))  # errors surface again in the test that uses it
    return cpu.create()


def run_and_check(backend, case, kernel, guard=None, seed=11):
    prepared = backend.prepare(case, Variant("candidate", kernel, "candidate"))
    inputs = make_inputs(case, seed)
    coef = case.coefficients()
    buffers = backend.allocate(case, inputs, guard)
    buffers.poison_output()
    prepared.run(buffers, backend.coefficients(coef))
    if hasattr(backend, "synchronize"):
        backend.synchronize()
    out = buffers.output()
    error = relative_error(out[case.region], reference(case, inputs, coef))
    assert error <= TOLERANCE[case.precision], f"{case.id}: relative error {error:.3g}"
    outside = np.ones(case.shape, dtype=bool)
    outside[case.region] = False
    assert np.isnan(out[outside].astype(np.float64)).all(), f"{case.id}: wrote outside the region"
    assert buffers.inputs_unchanged(), f"{case.id}: modified its inputs"
    return error


@pytest.mark.parametrize(
    "group,case_id,label,plan",
    CPU_WORK,
    ids=[f"{g}-{cid}-{label}" for g, cid, label, _ in CPU_WORK],
)
def test_cpu_kernel_matches_oracle(cpu_backend, group, case_id, label, plan):
    case = parse_case(case_id)
    kernel = render(case, "cpu", plan)
    assert "void stencil(" in kernel.source
    guard = ("end", "start", None)[sum(map(ord, case_id + label)) % 3]  # deterministic mix of guard modes
    run_and_check(cpu_backend, case, kernel, guard=guard)


def test_cpu_default_is_the_straightforward_kernel_shape():
    """Default plan: same loops and launch as codegen's straightforward kernel."""
    for t in TYPES:
        case = case_of(t)
        kernel = render(case, "cpu", CPU)
        assert kernel.launch == {}
        assert "#pragma omp parallel for" in kernel.source
        assert ("collapse(2)" in kernel.source) == (case.stencil.dims == 3)
        assert "malloc" in kernel.source if case.stencil.time_steps > 1 else "malloc" not in kernel.source


def test_cpu_threads_go_to_the_launch():
    case = case_of("star_1")
    assert render(case, "cpu", CPU.with_(threads=3)).launch == {"threads": 3}
    assert render(case, "cpu", CPU).launch == {}


def test_cpu_all_types_and_precisions_render():
    for t in TYPES + ["diamond_ts2", "diamond_ts1", "box_4", "varcoef_star_4", "box2d_4", "star2d_4"]:
        for precision in ("f16", "f32", "f64"):
            case = case_of(t, precision)
            for plan in [CPU, *CPU_COMBOS.values()]:
                kernel = render(case, "cpu", plan)
                assert kernel.source.count("void stencil(") == 1


def test_render_is_deterministic_and_shape_independent():
    a = render(parse_case("box_2/19x21x23/f32"), "cuda", CUDA.with_(z_march=8, vector_x=4))
    b = render(parse_case("box_2/64x64x64/f32"), "cuda", CUDA.with_(z_march=8, vector_x=4))
    assert a == b
    assert render(parse_case("star_1/19x21x23/f32"), "cpu", CPU) == render(parse_case("star_1/33x33x33/f32"), "cpu", CPU)


# ---------------------------------------------------------------- CUDA

CUDA_PLANS = {
    "default": CUDA,
    "ldg_unroll": CUDA.with_(ldg=True, unroll_classes=True),
    "block_odd": CUDA.with_(block=(16, 4, 2)),
    "vector2": CUDA.with_(vector_x=2),
    "vector4_ldg": CUDA.with_(vector_x=4, ldg=True),
    "smem": CUDA.with_(smem_tile=True),
    "smem_vector2": CUDA.with_(smem_tile=True, vector_x=2, block=(16, 8, 2)),
    "march": CUDA.with_(z_march=5),
    "march_vector4": CUDA.with_(z_march=8, vector_x=4, ldg=True, unroll_classes=True),
    "march_smem": CUDA.with_(z_march=4, smem_tile=True, block=(32, 4, 2)),
    "march_smem_vector2": CUDA.with_(z_march=3, smem_tile=True, vector_x=2, block=(16, 4, 1)),
    "temporal_march": CUDA.with_(temporal="march"),
    "temporal_march_all": CUDA.with_(temporal="march", z_march=4, vector_x=2, ldg=True, unroll_classes=True),
    "temporal_march_smem": CUDA.with_(temporal="march", smem_tile=True, block=(32, 4, 1)),
}


def expected_tile(case, plan):
    p = effective(case, plan)
    bx, by, bz = p["block"]
    composed_loops = case.stencil.time_steps > 1 and p["temporal"] == "composed"
    if composed_loops:
        return [bx, by, bz]
    return [bx * p["vector_x"], by, bz * (p["z_march"] or 1)]


def test_cuda_sources_render_for_every_type_precision_and_plan():
    for t in TYPES + ["diamond_ts2", "diamond_ts1", "box_4", "varcoef_star_4", "box2d_4"]:
        for precision in ("f16", "f32", "f64"):
            case = case_of(t, precision)
            for label, plan in CUDA_PLANS.items():
                kernel = render(case, "cuda", plan)
                assert kernel.source.count('extern "C" __global__ void stencil(') == 1, label
                assert set(kernel.launch) == {"block", "tile", "shared_bytes"}
                assert kernel.launch["tile"] == expected_tile(case, plan), (case.id, label)
                grid, block, shared = codegen.cuda_launch_geometry(case, kernel.launch)
                assert block == tuple(effective(case, plan)["block"]) and shared >= 0
                assert ("__ldg" in kernel.source) == bool(effective(case, plan)["ldg"]), (case.id, label)


def test_cuda_composed_diamond_ignores_the_general_parameters():
    case = case_of("diamond_ts3")
    composed = render(case, "cuda", CUDA)
    assert render(case, "cuda", CUDA.with_(smem_tile=True, vector_x=4, z_march=8, unroll_classes=True)) == composed
    assert "STEPS" in composed.source and composed.launch["tile"] == list(CUDA_DEFAULTS["block"])
    assert render(case, "cuda", CUDA.with_(temporal="march")) != composed


def test_cuda_2d_types_ignore_z_march():
    case = case_of("star2d_1")
    assert render(case, "cuda", CUDA.with_(z_march=8)) == render(case, "cuda", CUDA)


NVCC_SAMPLE = [
    ("box_2", "f32", "march_vector4"),
    ("star_4", "f16", "vector4_ldg"),
    ("varcoef_star_1", "f64", "march_smem"),
    ("diamond_ts3", "f32", "temporal_march_all"),
    ("box2d_1", "f16", "smem_vector2"),
    ("star_1", "f64", "vector2"),
]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_cuda_sources_compile_with_nvcc(tmp_path):
    def compile_one(item):
        t, precision, label = item
        path = tmp_path / f"{t}_{precision}_{label}.cu"
        path.write_text(render(case_of(t, precision), "cuda", CUDA_PLANS[label]).source)
        done = subprocess.run(
            ["nvcc", "-arch=sm_90", "-c", "-x", "cu", "-o", str(path.with_suffix(".o")), str(path)],
            capture_output=True, text=True, timeout=300,
        )
        return item, done.returncode, done.stderr[-2000:]

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1)) as pool:
        for item, code, log in pool.map(compile_one, NVCC_SAMPLE):
            assert code == 0, f"{item}: {log}"


@pytest.fixture(scope="module")
def cuda_backend():
    from measurement.backends import get_backend

    return get_backend("cuda")


GPU_WORK = [(t, "f32", label) for t in TYPES for label in CUDA_PLANS] + [
    (t, precision, label)
    for t in ("star_2", "box2d_1", "varcoef_star_1", "diamond_ts3", "box_1")
    for precision in ("f16", "f64")
    for label in ("default", "vector4_ldg", "smem_vector2", "march_vector4", "march_smem_vector2", "temporal_march_all")
]


@pytest.mark.gpu
@pytest.mark.parametrize("type_name,precision,label", GPU_WORK, ids=[f"{t}-{p}-{l}" for t, p, l in GPU_WORK])
def test_cuda_kernel_matches_oracle(cuda_backend, type_name, precision, label):
    case = case_of(type_name, precision)
    run_and_check(cuda_backend, case, render(case, "cuda", CUDA_PLANS[label]))


@pytest.mark.gpu
@pytest.mark.parametrize("shape", ["16x16x32", "9x7x40", "12x10x13"])
def test_cuda_vector_paths_on_aligned_and_unaligned_rows(cuda_backend, shape):
    """nx % 4 == 0 takes the vector-load path, other nx the scalar fallback: both correct."""
    for t in ("star_1", "box_1"):
        case = parse_case(f"{t}/{shape}/f32")
        for label in ("vector2", "vector4_ldg", "march_vector4"):
            run_and_check(cuda_backend, case, render(case, "cuda", CUDA_PLANS[label]))


@pytest.mark.gpu
@pytest.mark.parametrize("type_name", TYPES)
def test_cuda_every_lever_from_default_and_a_walk(cuda_backend, type_name):
    case = case_of(type_name)
    start = initial_plan(case, "cuda")
    for lever in applicable(case, start):
        run_and_check(cuda_backend, case, render(case, "cuda", apply(lever, case, start)))
    run_and_check(cuda_backend, case, render(case, "cuda", walk(case, "cuda")))
