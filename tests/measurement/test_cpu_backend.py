"""The CPU backend: compilation errors, guard pages, timing, launch threads, baselines."""
from __future__ import annotations

import importlib.util
import math
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from measurement.backends import cpu, get_backend
from measurement.backends.base import CompileError, Kernel, Variant
from measurement.harness.cases import parse_case
from measurement.harness.oracle import TOLERANCE, make_inputs, reference, relative_error

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def backend():
    return cpu.create()


def run_variant(backend, case, variant, seed=3, guard=None, coef=None):
    prepared = backend.prepare(case, variant)
    inputs = make_inputs(case, seed)
    coef = case.coefficients() if coef is None else coef
    buffers = backend.allocate(case, inputs, guard)
    buffers.poison_output()
    prepared.run(buffers, backend.coefficients(coef))
    return prepared, buffers, inputs, coef


def assert_matches_oracle(case, buffers, inputs, coef):
    out = buffers.output()
    error = relative_error(out[case.region], reference(case, inputs, coef))
    assert error <= TOLERANCE[case.precision], f"{case.id}: error {error:.3g}"
    outside = np.ones(case.shape, dtype=bool)
    outside[case.region] = False
    assert np.isnan(out[outside].astype(np.float64)).all()
    assert buffers.inputs_unchanged()


def test_get_backend_and_baseline_names(backend):
    assert get_backend("cpu").name == "cpu"
    names = backend.baseline_names(parse_case("star_1/16x16x16/f32"))
    assert names[:2] == ["straightforward", "scipy.ndimage"]
    assert ("pystencils" in names) == (importlib.util.find_spec("pystencils") is not None)
    kernel = backend.straightforward(parse_case("star_1/16x16x16/f32"))
    assert "void stencil(" in kernel.source and kernel.launch == {}


def test_compile_error_carries_the_compiler_message(backend):
    source = "void stencil(const float* u, const float* a, float* y, const double* coef, int nz, int ny, int nx)\n{ y[0] = undeclared_name_xyz; }\n"
    with pytest.raises(CompileError) as raised:
        backend.prepare(parse_case("star_1/16x16x16/f32"), Variant("candidate", Kernel(source), "candidate"))
    assert "undeclared_name_xyz" in str(raised.value)
    assert "error" in str(raised.value)


def test_missing_symbol_and_bad_launch_are_compile_errors(backend):
    case = parse_case("star_1/16x16x16/f32")
    with pytest.raises(CompileError, match="stencil"):
        backend.prepare(case, Variant("candidate", Kernel("void not_the_kernel(void) {}\n"), "candidate"))
    good = backend.straightforward(case).source
    with pytest.raises(CompileError, match="threads"):
        backend.prepare(case, Variant("candidate", Kernel(good, {"threads": 0}), "candidate"))
    with pytest.raises(CompileError, match="only 'threads'"):
        backend.prepare(case, Variant("candidate", Kernel(good, {"block": [32, 8, 1]}), "candidate"))


GUARD_SCRIPT = textwrap.dedent(
    """
    import ctypes, sys
    import numpy as np
    from measurement.backends import cpu
    from measurement.harness.cases import parse_case
    from measurement.harness.oracle import make_inputs

    guard, where = sys.argv[1], sys.argv[2]
    case = parse_case("star_1/9x10x11/f32")
    buffers = cpu.create().allocate(case, make_inputs(case, 1), guard)
    u = buffers.arrays["u"]
    last = u.address + u.nbytes - 4
    assert ctypes.c_float.from_address(last).value == float(buffers.array("u").reshape(-1)[-1])
    assert ctypes.c_float.from_address(u.address).value == float(buffers.array("u").reshape(-1)[0])
    print("in bounds ok", flush=True)
    if where == "past_end":
        ctypes.c_float.from_address(last + 4).value
    elif where == "before_start":
        ctypes.c_float.from_address(u.address - 4).value
    sys.exit(0)
    """
)


def run_guard_script(guard: str, where: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("PYTHONFAULTHANDLER", None)
    return subprocess.run([sys.executable, "-c", GUARD_SCRIPT, guard, where], capture_output=True, text=True, env=env, timeout=120, cwd=ROOT)


@pytest.mark.parametrize(
    "guard, where, dies",
    [("end", "past_end", True), ("end", "nowhere", False), ("start", "before_start", True), ("start", "nowhere", False)],
)
def test_guard_pages_trap_out_of_bounds_reads(guard, where, dies):
    done = run_guard_script(guard, where)
    assert "in bounds ok" in done.stdout, done.stderr
    if dies:
        assert done.returncode == -signal.SIGSEGV, (done.returncode, done.stderr)
    else:
        assert done.returncode == 0, done.stderr


def test_guard_end_places_the_last_byte_against_the_page(backend):
    case = parse_case("star2d_1/37x41/f64")
    buffers = backend.allocate(case, make_inputs(case, 2), "end")
    for name in ("u", "y"):
        array = buffers.arrays[name]
        assert (array.address + array.nbytes) % cpu.PAGE == 0
    buffers = backend.allocate(case, make_inputs(case, 2), "start")
    assert all(buffers.arrays[name].address % cpu.PAGE == 0 for name in ("u", "y"))


def test_buffers_detect_a_kernel_that_writes_its_input(backend):
    case = parse_case("star_1/9x9x9/f64")
    source = backend.straightforward(case).source.replace("(void)sz; (void)a;", "(void)sz; (void)a; ((elem_t*)u)[0] += 1.0;")
    _, buffers, inputs, _ = run_variant(backend, case, Variant("candidate", Kernel(source), "candidate"))
    assert not buffers.inputs_unchanged()
    assert buffers.input_array("u").reshape(-1)[0] == inputs["u"].reshape(-1)[0] + 1.0


THREADS_KERNEL = """
#include <omp.h>
void stencil(const double* u, const double* a, double* y, const double* coef, int nz, int ny, int nx)
{
    int used = 0;
    #pragma omp parallel
    {
        #pragma omp single
        used = omp_get_num_threads();
    }
    y[((1 * ny) + 1) * nx + 1] = used;
}
"""


def test_launch_threads_are_honoured(backend):
    case = parse_case("star_1/9x9x9/f64")
    one, buffers, _, _ = run_variant(backend, case, Variant("candidate", Kernel(THREADS_KERNEL, {"threads": 1}), "candidate"))
    assert buffers.output()[1, 1, 1] == 1
    default = backend.prepare(case, Variant("candidate", Kernel(THREADS_KERNEL), "candidate"))
    default.run(buffers, backend.coefficients(case.coefficients()))
    assert buffers.output()[1, 1, 1] == cpu.all_cores()
    one.run(buffers, backend.coefficients(case.coefficients()))
    assert buffers.output()[1, 1, 1] == 1


def test_time_launches_and_coefficients(backend):
    case = parse_case("box_1/20x20x20/f32")
    prepared, buffers, _, coef = run_variant(backend, case, Variant("straightforward"))
    coef_arg = backend.coefficients(coef)
    assert coef_arg.dtype == np.float64 and coef_arg.flags.c_contiguous
    for flush in (False, True):
        seconds = backend.time_launches(prepared, buffers, coef_arg, 3, flush)
        assert len(seconds) == 3 and all(0 < s < 10 for s in seconds)
    backend.synchronize()


def test_the_flush_reads_one_double_a_line_of_a_filled_buffer_twice_the_caches(backend):
    """Session 42's flush (measurement/backends/cpu_compile.py `harness_flush`): a read of every 64-byte line, so
    nothing it leaves is dirty, over a buffer of twice the last-level caches whose pages were written once (an
    untouched page would read the shared zero page and evict nothing). The sum it returns counts the lines read."""
    buffer = backend._flush_buffer
    assert buffer.nbytes == backend.flush_bytes() == 2 * backend.llc["bytes"] * backend.llc["instances"]
    assert buffer[0] == buffer[-1] == 1.0
    assert backend.flush_cache() == buffer.size // 8
    assert "a read of one double a 64-byte line" in backend.describe()["cache_flush"]


def test_copy_bandwidth_is_positive_and_finite(backend):
    rate = backend.copy_bandwidth(8 * 1024 * 1024)
    assert math.isfinite(rate) and rate > 1e8  # bytes/s; any real machine copies > 100 MB/s


def test_describe_names_the_machine(backend):
    facts = backend.describe()
    for key in ("cpu_model", "logical_cpus", "compiler_version", "flags", "llc_bytes", "os"):
        assert facts[key], key
    assert facts["flags"] == "-O3 -march=native -fopenmp -fPIC -shared -std=c11"
    assert facts["llc_bytes"] >= 1024 * 1024
    assert set(backend.environment()) >= {"loadavg", "time"}


@pytest.mark.parametrize(
    "case_id, computed_in",
    [
        ("varcoef_star_1/19x21x23/f16", "f32"),
        ("diamond_ts4/19x21x23/f64", "f64"),
        ("box2d_2/37x41/f32", "f32"),
        ("box_1/16x17x18/f16", "f32"),
    ],
)
def test_scipy_baseline_matches_oracle(backend, case_id, computed_in):
    case = parse_case(case_id)
    prepared, buffers, inputs, coef = run_variant(backend, case, Variant("scipy.ndimage"), guard="end")
    assert prepared.precision == computed_in
    assert_matches_oracle(case, buffers, inputs, coef)


@pytest.mark.skipif(importlib.util.find_spec("pystencils") is None, reason="pystencils not installed")
@pytest.mark.parametrize(
    "case_id, computed_in",
    [("varcoef_star_1/19x21x23/f16", "f32"), ("diamond_ts3/19x21x23/f64", "f64"), ("box2d_1/37x41/f32", "f32")],
)
def test_pystencils_baseline_matches_oracle(backend, case_id, computed_in):
    case = parse_case(case_id)
    prepared, buffers, inputs, coef = run_variant(backend, case, Variant("pystencils"), guard="end")
    assert prepared.precision == computed_in
    assert_matches_oracle(case, buffers, inputs, coef)
