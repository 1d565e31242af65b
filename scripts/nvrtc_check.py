#!/usr/bin/env python
"""Compile hand-written kernels with NVRTC here, without a GPU: the compiler the harness uses on the device
(measurement/backends/cuda_compile.py), so a kernel that nvcc takes and NVRTC does not (a builtin NVRTC does not
declare, as `memcpy` in session 37's first `tcq`, or a header it cannot find) fails before device time is spent.

NVRTC is a library, not part of requirements.txt: `pip download --no-deps nvidia-cuda-nvrtc -d /tmp/nvrtc` and unzip
the wheel, then

    .venv/bin/python scripts/nvrtc_check.py --nvrtc /tmp/nvrtc/x/nvidia/cu13/lib/libnvrtc.so.13 \\
        --include /usr/local/cuda/include --cases box_1/512x512x512/f16,diamond_ts8/512x512x512/f32

Every campaign candidate of each case (forge/candidates.py) and the variants of the sweeps that apply (`burst`,
`sweep_variants.burst_variants`, session 45's `bounds`, `sweep_variants.bounds_variants`, session 46's `ahead`, `sweep_variants.ahead_variants`, and session 47's `pipelined`, `sweep_variants.pipelined_variants`; `tcq`, `tensor_sweep.variants`; `pipe` with `pair` and cpipe's `signal`,
`temporal_sweep`) is compiled for
compute_90 with the harness's options; the exit status is 1 if any fails, its log printed.
"""
from __future__ import annotations

import argparse
import ctypes
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for _path in (str(ROOT), str(ROOT / "benchmarks")):
    sys.path.insert(0, _path)

from forge.candidates import matrix_candidates  # noqa: E402
from forge.handwritten import render as render_rows  # noqa: E402
from measurement.backends.cuda_compile import NVRTC_OPTIONS  # noqa: E402
from measurement.harness.cases import parse_case  # noqa: E402


def compile_source(nvrtc: ctypes.CDLL, source: str, options: list[str]) -> tuple[bool, str]:
    """(compiled, log) of one source."""
    program = ctypes.c_void_p()
    if nvrtc.nvrtcCreateProgram(ctypes.byref(program), source.encode(), b"kernel.cu", 0, None, None) != 0:
        return False, "nvrtcCreateProgram failed"
    encoded = (ctypes.c_char_p * len(options))(*[option.encode() for option in options])
    status = nvrtc.nvrtcCompileProgram(program, len(options), encoded)
    size = ctypes.c_size_t()
    nvrtc.nvrtcGetProgramLogSize(program, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    nvrtc.nvrtcGetProgramLog(program, log)
    nvrtc.nvrtcDestroyProgram(ctypes.byref(program))
    return status == 0, log.value.decode(errors="replace").strip()


def sources(case_id: str) -> list[tuple[str, str]]:
    """(label, source) of every kernel the check compiles for a case."""
    import sweep_variants
    import temporal_sweep
    import tensor_sweep

    case = parse_case(case_id)
    made = [(subject.split(":")[0], source) for subject, _, _, source in matrix_candidates(case)]
    if case.stencil.time_steps == 1:  # `--family burst`'s 24 shapes, the capped, prefetching and pipelined lean kernels
        swept = (sweep_variants.burst_variants(case) + sweep_variants.bounds_variants(case) + sweep_variants.ahead_variants(case)
                 + sweep_variants.pipelined_variants(case))
        made += [(label, render_rows(case, **params)[0]) for label, params in swept
                 if label.startswith("burst") or "+min_blocks" in label or "+ahead" in label or "+pipelined" in label]
    try:
        made += [(label, tensor_sweep.render(case, **params)[0]) for label, params in tensor_sweep.variants(case)]
    except ValueError:  # not a tcq case
        pass
    if case.stencil.time_steps > 1 and case.precision == "f32":
        made += [(label, render(case, **params)[0]) for label, params, render in temporal_sweep.pair_variants(case)]
        made += [(label, render(case, **params)[0])
                 for label, params, render in temporal_sweep.cluster_variants(case, "signal", (False, True), (128, 256))]
    return made


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nvrtc", required=True, help="path to libnvrtc.so")
    parser.add_argument("--include", required=True, help="a folder with cuda_fp16.h (CuPy passes its own on the device)")
    parser.add_argument("--cases", required=True, help="comma-separated case ids")
    options = parser.parse_args()
    nvrtc = ctypes.CDLL(options.nvrtc)
    flags = [*NVRTC_OPTIONS, "-arch=compute_90", f"-I{options.include}"]
    failed = 0
    for case_id in options.cases.split(","):
        made = sources(case_id)
        for label, source in made:
            compiled, log = compile_source(nvrtc, source, flags)
            if not compiled:
                failed += 1
                print(f"{case_id} {label}: FAILED\n{log}", file=sys.stderr)
        print(f"{case_id}: {len(made)} kernels compiled", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
