"""The build cache (measurement/harness/buildcache.py): what a loaded library runs, and what its key covers."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from measurement.harness import buildcache
from measurement.harness.oracle import TOLERANCE

ROOT = Path(__file__).resolve().parents[2]


REWRITE_SCRIPT = textwrap.dedent(
    """
    import sys
    from measurement.backends import cpu
    from measurement.backends.base import Kernel, Variant
    from measurement.harness import codegen
    from measurement.harness.cases import parse_case
    from measurement.harness.oracle import make_inputs, reference, relative_error

    case = parse_case("star_1/10x11x12/f32")
    backend = cpu.create()
    prepared = backend.prepare(case, Variant("straightforward", Kernel(codegen.straightforward_c(case), {}), "baseline"))
    inputs, coef = make_inputs(case, 4), case.coefficients()
    buffers = backend.allocate(case, inputs, None)
    prepared.run(buffers, backend.coefficients(coef))
    library = cpu.compile_shared(codegen.straightforward_c(case))
    if sys.argv[1] == "rewrite":
        library.write_bytes(cpu.compile_shared(codegen.empty_c(case)).read_bytes())
    buffers.poison_output()
    prepared.run(buffers, backend.coefficients(coef))
    error = relative_error(buffers.output()[case.region], reference(case, inputs, coef))
    print("relative error", error, flush=True)
    """
)


@pytest.mark.parametrize("action", ["keep", "rewrite"])
def test_a_loaded_kernel_survives_a_write_into_its_cache_file(action, tmp_path):
    """A library loaded from the build cache is a sealed copy in memory: tests/measurement/test_sandbox.py
    swaps a cached artefact in place, and a process that had mapped that file ran the swapped
    bytes at its next call or died at exit (the suite's SIGSEGVs, docs/testing.md)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               FORGESTENCIL_BUILD_CACHE=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", REWRITE_SCRIPT, action], capture_output=True, text=True, env=env,
                          timeout=300, cwd=ROOT)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    error = float(done.stdout.split("relative error")[1])
    assert error <= TOLERANCE["f32"], done.stdout


def test_the_harness_version_keys_every_recipe_but_those_whose_text_holds_all_their_code(monkeypatch):
    """A kernel is rebuilt when the harness changes; the tests' CUDA emulation, whose prelude and
    driver are in the text it compiles, is not (tests/forge/cuda_emulation.py)."""
    kernel = buildcache.Recipe("c", ("cc", "-O3"), ".c")
    emulation = buildcache.Recipe("cuda_emulation", ("g++", "-O1"), ".cpp", harness_keyed=False)
    before = kernel.key("int x;"), emulation.key("int x;")
    monkeypatch.setattr(buildcache, "harness_version", lambda: "another harness")
    assert kernel.key("int x;") != before[0]
    assert emulation.key("int x;") == before[1]
    assert emulation.key("int y;") != before[1]
