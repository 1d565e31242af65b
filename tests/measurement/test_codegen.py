"""The straightforward kernels of measurement.harness.codegen against the float64 oracle.

C kernels are compiled and run through the CPU backend (every type, every precision, odd and
multiple-of-8 shapes). The CUDA sources are checked for compilation where nvcc exists and run
against the oracle where a GPU and CuPy exist (marker `gpu`). The composed-weights algebra of
the CUDA temporal kernel is checked in numpy everywhere.
"""
from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from measurement.backends import cpu
from measurement.backends.base import Variant
from measurement.harness import codegen
from measurement.harness.cases import parse_case
from measurement.harness.oracle import TOLERANCE, make_inputs, reference, reference_at, relative_error

TYPES = ["star_1", "star_2", "star_4", "box_1", "box_2", "star2d_1", "box2d_1", "varcoef_star_1", "diamond_ts4"]
ODD_SHAPE = {3: "19x21x23", 2: "37x41"}
EVEN_SHAPE = {3: "16x16x24", 2: "32x40"}
PRECISIONS = ["f16", "f32", "f64"]


def case_of(type_name: str, shapes: dict[int, str], precision: str):
    dims = 2 if "2d" in type_name else 3
    return parse_case(f"{type_name}/{shapes[dims]}/{precision}")


@pytest.fixture(scope="module")
def backend():
    return cpu.create()


def check_straightforward(backend, case, seed: int, guard: str | None) -> None:
    prepared = backend.prepare(case, Variant("straightforward"))
    assert prepared.precision == case.precision
    inputs = make_inputs(case, seed)
    coef = case.coefficients()
    buffers = backend.allocate(case, inputs, guard)
    buffers.poison_output()
    prepared.run(buffers, backend.coefficients(coef))
    backend.synchronize()
    out = buffers.output()
    error = relative_error(out[case.region], reference(case, inputs, coef))
    assert error <= TOLERANCE[case.precision], f"{case.id}: error {error:.3g}"
    outside = np.ones(case.shape, dtype=bool)
    outside[case.region] = False
    assert np.isnan(out[outside].astype(np.float64)).all(), f"{case.id} wrote outside its region"
    assert buffers.inputs_unchanged()


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("type_name", TYPES)
def test_straightforward_c_matches_oracle_odd_shape(backend, type_name, precision):
    check_straightforward(backend, case_of(type_name, ODD_SHAPE, precision), seed=11, guard="end")


@pytest.mark.parametrize("type_name", TYPES)
def test_straightforward_c_matches_oracle_even_shape(backend, type_name):
    # The source does not depend on the shape, so this reuses the compiled f32 kernels.
    check_straightforward(backend, case_of(type_name, EVEN_SHAPE, "f32"), seed=12, guard="start")


@pytest.mark.parametrize("steps", [1, 2, 3, 5])
def test_straightforward_c_ping_pong_for_every_parity_of_t(backend, steps):
    check_straightforward(backend, parse_case(f"diamond_ts{steps}/13x14x15/f64"), seed=14, guard="end")


def test_source_is_shape_independent_and_follows_the_abi():
    a, b = parse_case("box_2/19x21x23/f16"), parse_case("box_2/64x64x64/f16")
    assert codegen.straightforward_c(a) == codegen.straightforward_c(b)
    assert codegen.straightforward_cuda(a) == codegen.straightforward_cuda(b)
    c_source = codegen.straightforward_c(a)
    assert "void stencil(const elem_t* u, const elem_t* a, elem_t* y, const double* coef, int nz, int ny, int nx)" in c_source
    assert "typedef _Float16 elem_t;" in c_source and "typedef float acc_t;" in c_source
    assert "#pragma omp parallel for collapse(2) schedule(static)" in c_source
    assert "#pragma omp parallel for schedule(static)" in codegen.straightforward_c(parse_case("star2d_1/37x41/f64"))
    cuda_source = codegen.straightforward_cuda(a)
    assert 'extern "C" __global__ void stencil(const elem_t* __restrict__ u' in cuda_source
    assert "#include <cuda_fp16.h>" in cuda_source and "__half2float" in cuda_source
    assert [codegen.c_type(p) for p in PRECISIONS] == ["_Float16", "float", "double"]
    assert [codegen.cuda_type(p) for p in PRECISIONS] == ["__half", "float", "double"]


def test_cuda_launch_geometry():
    grid, block, shared = codegen.cuda_launch_geometry(parse_case("star_1/19x21x23/f32"))
    assert block == (32, 8, 1) and grid == (1, 3, 19) and shared == 0  # x 23 -> 1 block of 32
    grid, block, _ = codegen.cuda_launch_geometry(parse_case("star2d_1/37x41/f32"), {"block": [16, 16, 1], "tile": [32, 16, 1]})
    assert grid == (2, 3, 1) and block == (16, 16, 1)


@pytest.mark.parametrize("steps", [1, 2, 3, 4, 7, 16])
def test_composed_star1_weights_equal_t_applications(steps):
    """The CUDA temporal kernel's algebra: one radius-T stencil equals T star_1 steps."""
    case = parse_case(f"diamond_ts{steps}/{2 * steps + 3}x{2 * steps + 3}x{2 * steps + 3}/f64")
    inputs = make_inputs(case, 5)
    coef = case.coefficients()
    weights = codegen.composed_star1_weights(steps, coef)
    assert len(weights) == (2 * steps + 1) * (2 * steps * steps + 2 * steps + 3) // 3
    assert abs(sum(weights.values()) - 1.0) < 1e-12  # coefficients are normalised to sum 1
    points = np.array([[steps + 1, steps + 1, steps + 2], [steps, steps, steps]])
    u = inputs["u"].astype(np.float64)
    composed = [sum(w * u[tuple(p + np.array(o))] for o, w in weights.items()) for p in points]
    np.testing.assert_allclose(composed, reference_at(case, inputs, coef, points), rtol=1e-12)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_straightforward_cuda_compiles(tmp_path):
    for case_id in ["diamond_ts4/19x21x23/f16", "varcoef_star_1/19x21x23/f64"]:
        source = tmp_path / "kernel.cu"
        source.write_text(codegen.straightforward_cuda(parse_case(case_id)))
        done = subprocess.run(["nvcc", "-arch=sm_90", "-c", "-o", str(tmp_path / "k.o"), str(source)], capture_output=True, text=True)
        assert done.returncode == 0, f"{case_id}: {done.stderr}"


def _cupy_with_gpu():
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() > 0:
            return cupy
    except Exception:
        pass
    return None


@pytest.mark.gpu
@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("type_name", TYPES + ["diamond_ts16"])
def test_straightforward_cuda_matches_oracle(type_name, precision):
    cp = _cupy_with_gpu()
    if cp is None:
        pytest.skip("needs CuPy and a CUDA GPU")
    shapes = {3: "35x36x37", 2: "37x41"} if type_name == "diamond_ts16" else ODD_SHAPE
    case = case_of(type_name, shapes, precision)
    kernel = cp.RawModule(code=codegen.straightforward_cuda(case), options=("--std=c++17",)).get_function("stencil")
    inputs = make_inputs(case, 13)
    coef = case.coefficients()
    u = cp.asarray(inputs["u"])
    a = cp.asarray(inputs["a"]) if "a" in inputs else np.uintp(0)  # NULL unless varcoef
    y = cp.full(case.shape, np.nan, dtype=case.dtype)
    nz, ny, nx = codegen.grid_extents(case)
    grid, block, shared = codegen.cuda_launch_geometry(case, codegen.DEFAULT_CUDA_LAUNCH)
    kernel(grid, block, (u, a, y, cp.asarray(coef, dtype=cp.float64), np.int32(nz), np.int32(ny), np.int32(nx)), shared_mem=shared)
    out = cp.asnumpy(y)
    error = relative_error(out[case.region], reference(case, inputs, coef))
    assert error <= TOLERANCE[case.precision], f"{case.id}: error {error:.3g}"
    outside = np.ones(case.shape, dtype=bool)
    outside[case.region] = False
    assert np.isnan(out[outside].astype(np.float64)).all()
    assert np.array_equal(cp.asnumpy(u), inputs["u"])
