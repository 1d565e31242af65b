"""The vectorised f16 straightforward CUDA kernel, its scalar predecessor kept as a historical
baseline, and the composed bound on the device.

The GPU tests (marker `gpu`) run on the device machine with `scripts/gpu_tests.sh`; the compile
test runs wherever nvcc is installed. The host-side check behind the module docstring of
measurement.harness.codegen_f16 (bit-identical to the scalar kernel) is repeated here on the GPU,
where it counts: same inputs, both kernels, every bit of the output.
"""
from __future__ import annotations

import hashlib
import shutil
import subprocess

import numpy as np
import pytest

from forge.candidates import matrix_candidates
from measurement.backends.base import Kernel, Variant
from measurement.harness import codegen
from measurement.harness.cases import parse_case
from measurement.harness.oracle import TOLERANCE, make_inputs, reference, relative_error

TYPES = ["star_1", "star_2", "star_4", "box_1", "box_2", "star2d_1", "box2d_1", "varcoef_star_1"]
# nx a multiple of 4 but not of the tile's 128 (the vector path and a partial last tile), nx odd
# (the scalar fallback), and a row of exactly one tile.
SHAPES = {3: ["13x14x36", "11x12x37", "9x10x128"], 2: ["21x68", "19x37", "9x128"]}


def f16_cases() -> list[str]:
    return [f"{t}/{shape}/f16" for t in TYPES for shape in SHAPES[2 if "2d" in t else 3]]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
@pytest.mark.parametrize("case_id", ["box_2/13x14x36/f16", "varcoef_star_1/13x14x36/f16", "star2d_1/21x68/f16"])
def test_the_vectorised_f16_kernel_compiles_with_8_byte_loads_and_stores(tmp_path, case_id):
    source = tmp_path / "kernel.cu"
    source.write_text(codegen.straightforward_cuda(parse_case(case_id)))
    done = subprocess.run(["nvcc", "-arch=sm_90", "-ptx", "-o", str(tmp_path / "k.ptx"), str(source)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    ptx = (tmp_path / "k.ptx").read_text()
    assert "ld.global.nc.v2.u32" in ptx and "st.global.v2.u32" in ptx


def test_single_step_f16_cases_get_the_vectorised_kernel_and_its_launch():
    f16, f32, diamond = (parse_case(c) for c in ("box_1/64x64x64/f16", "box_1/64x64x64/f32", "diamond_ts4/64x64x64/f16"))
    assert "vector loads" in codegen.straightforward_cuda(f16)
    assert codegen.straightforward_cuda_launch(f16) == {"block": [32, 8, 1], "tile": [128, 8, 1]}
    for other in (f32, diamond):
        assert codegen.straightforward_cuda(other) == codegen.straightforward_cuda_scalar(other)
        assert codegen.straightforward_cuda_launch(other) == {"block": [32, 8, 1]}


def _cupy():
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() > 0:
            return cupy
    except Exception:
        pass
    pytest.skip("needs CuPy and a CUDA GPU")


def _launch(cp, case, source, launch, inputs, coef, offset=0):
    """Run `source` on `case`; `offset` elements shift every array off its 256-byte alignment."""
    kernel = cp.RawModule(code=source, options=("--std=c++17",)).get_function("stencil")
    n = case.points

    def place(values):
        buffer = cp.full(n + offset, np.nan, dtype=case.dtype)
        view = buffer[offset:].reshape(case.shape)
        view.set(values)
        return view

    u = place(inputs["u"])
    a = place(inputs["a"]) if "a" in inputs else np.uintp(0)
    y = place(np.full(case.shape, np.nan, dtype=case.dtype))
    grid, block, shared = codegen.cuda_launch_geometry(case, launch)
    nz, ny, nx = codegen.grid_extents(case)
    kernel(grid, block, (u, a, y, cp.asarray(coef, dtype=cp.float64), np.int32(nz), np.int32(ny), np.int32(nx)), shared_mem=shared)
    cp.cuda.runtime.deviceSynchronize()
    return cp.asnumpy(y)


@pytest.mark.gpu
@pytest.mark.parametrize("case_id", f16_cases())
def test_the_vectorised_f16_kernel_is_bit_identical_to_the_scalar_one(case_id):
    cp = _cupy()
    case = parse_case(case_id)
    inputs, coef = make_inputs(case, 17), case.coefficients()
    scalar = _launch(cp, case, codegen.straightforward_cuda_scalar(case), codegen.DEFAULT_CUDA_LAUNCH, inputs, coef)
    bits = lambda out: out.view(np.uint16)  # noqa: E731
    for launch in (codegen.straightforward_cuda_launch(case), codegen.DEFAULT_CUDA_LAUNCH):
        for offset in (0, 1):  # aligned (vector path) and 2 bytes off (the scalar fallback)
            out = _launch(cp, case, codegen.straightforward_cuda(case), launch, inputs, coef, offset)
            assert np.array_equal(bits(out), bits(scalar)), f"{case_id} launch {launch} offset {offset}"
    assert relative_error(scalar[case.region], reference(case, inputs, coef)) <= TOLERANCE["f16"]
    outside = np.ones(case.shape, dtype=bool)
    outside[case.region] = False
    assert np.isnan(scalar[outside].astype(np.float64)).all()


@pytest.fixture(scope="module")
def backend():
    from measurement.backends import cuda

    return cuda.create()


@pytest.mark.gpu
def test_the_scalar_f16_kernel_is_a_historical_baseline_of_single_step_f16_cases_only(backend):
    f16 = parse_case("star_1/16x16x24/f16")
    assert "straightforward_f16_scalar" in backend.baseline_names(f16)
    assert "straightforward_f16_scalar" not in backend.baseline_names(parse_case("star_1/16x16x24/f32"))
    assert "straightforward_f16_scalar" not in backend.baseline_names(parse_case("diamond_ts4/16x16x24/f16"))
    prepared = backend.prepare(f16, Variant("straightforward_f16_scalar"))
    inputs = make_inputs(f16, 5)
    buffers = backend.allocate(f16, inputs)
    buffers.poison_output()
    prepared.run(buffers, backend.coefficients(f16.coefficients()))
    error = relative_error(buffers.output()[f16.region], reference(f16, inputs, f16.coefficients()))
    assert error <= TOLERANCE["f16"]


@pytest.mark.gpu
def test_a_composed_bound_on_the_device_launches_its_kernel_t_times_into_y_and_nan_around_the_region(backend):
    case, single = parse_case("diamond_ts4/19x21x24/f32"), parse_case("star_1/19x21x24/f32")
    variant = Variant("composed(straightforward x4)", Kernel(codegen.straightforward_cuda(single), {"block": [32, 8, 1]}), steps=4)
    prepared = backend.prepare(case, variant)
    inputs = make_inputs(case, 9)
    buffers = backend.allocate(case, inputs)
    buffers.poison_output()
    prepared.run(buffers, backend.coefficients(case.coefficients()))
    backend.synchronize()
    assert prepared.launches == 4 and prepared.identity["steps"] == 4
    out = buffers.output()  # raises if anything was written into the padding
    assert relative_error(out[case.region], reference(case, inputs, case.coefficients())) < 1e-5
    outside = out.copy()
    outside[case.region] = np.nan
    assert np.isnan(outside).all() and buffers.inputs_unchanged()


@pytest.mark.gpu
def test_the_composed_bounds_scratch_grids_sit_in_nan_padding_like_the_harness_arrays(backend):
    """What the fault of session 40 needed (the test below cannot show it: whether a read past an
    unpadded grid faults depends on where the allocation lands): each scratch grid inside NaN padding
    of pad_elements on both sides, as every array the harness gives a kernel."""
    from measurement.backends.cuda_bounds import nan_pair
    from measurement.backends.cuda_device import cupy
    from measurement.backends.cuda_memory import pad_elements

    case = parse_case("diamond_ts4/19x21x24/f32")
    pad, size = pad_elements(case), case.dtype.itemsize
    for grid in nan_pair(case):
        memory = grid.data.mem  # the allocation the grid lies in
        assert grid.data.ptr - memory.ptr == pad * size and grid.data.ptr % 256 == 0
        assert memory.size >= (case.points + 2 * pad) * size
        whole = cupy.ndarray((case.points + 2 * pad,), case.dtype, memptr=cupy.cuda.MemoryPointer(memory, 0))
        assert bool(cupy.isnan(whole).all())


@pytest.mark.gpu
def test_the_admitted_star_1_kernel_composed_at_512_cubed_reads_its_padding_without_a_fault(backend):
    """Session 40's gate of diamond_ts4/512^3 lost this composition to an illegal address: the kernel
    admitted for star_1/512^3 (session 33) loads 16 bytes past each end of its input, inside the
    harness's NaN padding, and the composed bound's scratch grids had none. Four launches of it must
    run at full size and agree with four of the straightforward kernel."""
    case, single = parse_case("diamond_ts4/512x512x512/f32"), parse_case("star_1/512x512x512/f32")
    _, launch, _, source = next(c for c in matrix_candidates(single) if c[0].split(":")[0] == "short4+alternate+lean+ry2")
    assert hashlib.sha256(source.encode()).hexdigest().startswith("fd49c09a0caa")  # fixtures/ledgers/h200_campaign.jsonl's
    inputs = make_inputs(case, 5)
    coefficients = backend.coefficients(case.coefficients())
    outputs = []
    for variant in (Variant("composed(star_1 admitted x4)", Kernel(source, launch), steps=4),
                    Variant("composed(straightforward x4)", Kernel(codegen.straightforward_cuda(single), {"block": [32, 8, 1]}), steps=4)):
        prepared = backend.prepare(case, variant)
        buffers = backend.allocate(case, inputs)
        buffers.poison_output()
        prepared.run(buffers, coefficients)
        backend.synchronize()
        outputs.append(buffers.output()[case.region])  # raises if anything was written into the padding
        del buffers
    assert relative_error(outputs[0], outputs[1]) < 1e-5


@pytest.mark.gpu
def test_the_f16_rate_benchmark_checks_then_times_all_three_kernels_on_one_grid(backend, monkeypatch):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "f16_naive_rate.py"
    spec = importlib.util.spec_from_file_location("f16_naive_rate", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    monkeypatch.setattr(bench, "PASSES", 2)
    monkeypatch.setattr(bench, "LAUNCHES", 2)
    result = bench.measure_grid(backend, "box_1/64x64x128", 3)
    assert all(check["correct"] for check in result["checks"].values())
    assert set(result["kernels"]) == {"f32", "f16", "f16_scalar"}
    assert all(len(k["samples_s"]) == 2 and k["bytes_per_s"] > 0 for k in result["kernels"].values())
    assert result["ratio"] == result["kernels"]["f16"]["bytes_per_s"] / result["kernels"]["f32"]["bytes_per_s"]
