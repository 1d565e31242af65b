"""Compiling CUDA kernels for the CUDA backend (measurement.backends.cuda): NVRTC through
`cupy.RawModule`, launch JSON validation, and the compiled kernel that runs on a problem's buffers.

Options `--std=c++17`; CuPy adds `-arch=sm_XX` of the device itself, and `-ftz=true`; no
`--use_fast_math`, so division and square root stay IEEE-rounded. An NVRTC log becomes a
CompileError. Launch JSON: `{"block": [bx, by, bz], "tile": [tx, ty, tz], "shared_bytes": S}`,
the grid from `codegen.cuda_launch_geometry` for the shape of each run (checks use other
shapes than the case's); more than 48 KiB of dynamic shared memory is opted into.

Nothing here imports Django.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from measurement.harness import codegen
from measurement.harness.cases import Case

from .base import CompileError
from .cuda_device import DEFAULT_SHARED_LIMIT, DeviceFacts, cupy

if TYPE_CHECKING:
    from .cuda_memory import CudaBuffers

NVRTC_OPTIONS = ("--std=c++17",)
LAUNCH_KEYS = {"block", "tile", "shared_bytes"}


def toolkit_include() -> str | None:
    """The CUDA toolkit's include folder, if there is one (a fallback for cuda_fp16.h)."""
    for root in (os.environ.get("CUDA_PATH"), os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if root and os.path.isfile(os.path.join(root, "include", "cuda_fp16.h")):
            return os.path.join(root, "include")
    return None


def _clean_log(message: str) -> str:
    """NVRTC's log with CuPy's temporary file names replaced by `kernel.cu`."""
    return re.sub(r"\S*?[0-9a-f]{40}\.cubin\.cu", "kernel.cu", message).strip()


_modules: dict[tuple[str, tuple[str, ...]], Any] = {}


def compile_module(source: str, function: str = "stencil") -> tuple[Any, Any, tuple[str, ...]]:
    """(module, function, options): NVRTC through cupy.RawModule; CompileError with the log."""
    from cupy.cuda.compiler import CompileException

    options = NVRTC_OPTIONS
    for attempt in range(2):
        key = (source, options)
        try:
            module = _modules.get(key) or cupy.RawModule(code=source, options=options, backend="nvrtc")
            kernel = module.get_function(function)
            _modules[key] = module
            return module, kernel, options
        except CompileException as error:
            message = str(error)
            include = toolkit_include()
            if attempt == 0 and include and "cuda_fp16" in message:
                options = options + (f"-I{include}",)  # a CuPy without bundled fp16 headers
                continue
            raise CompileError(_clean_log(message) or "NVRTC failed without a log") from None
        except cupy.cuda.driver.CUDADriverError as error:
            if "NOT_FOUND" in str(error):
                raise CompileError(f'the kernel source defines no extern "C" __global__ function named `{function}`') from None
            raise
    raise AssertionError("unreachable")


def checked_launch(case: Case, launch: dict[str, Any] | None, device: DeviceFacts) -> dict[str, Any]:
    """Validate a launch JSON (CompileError on nonsense) and return it with defaults filled in."""
    launch = dict(launch or {})
    unknown = set(launch) - LAUNCH_KEYS
    if unknown:
        raise CompileError(f"CUDA launch configuration takes only {sorted(LAUNCH_KEYS)}; got {sorted(unknown)}")
    if "block" not in launch:
        launch["block"] = list(codegen.DEFAULT_CUDA_LAUNCH["block"])
    for key in ("block", "tile"):
        value = launch.get(key)
        if value is not None and (
            not isinstance(value, (list, tuple)) or len(value) != 3
            or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in value)
        ):
            raise CompileError(f"launch {key!r} must be three positive integers, got {value!r}")
    shared = launch.get("shared_bytes", 0)
    if isinstance(shared, bool) or not isinstance(shared, int) or shared < 0:
        raise CompileError(f"launch 'shared_bytes' must be a non-negative integer, got {shared!r}")
    bx, by, bz = launch["block"]
    if bx * by * bz > 1024 or bx > 1024 or by > 1024 or bz > 64:
        raise CompileError(f"block {launch['block']} exceeds the CUDA limits (1024 threads; 1024 x 1024 x 64)")
    if shared > device.shared_optin:
        raise CompileError(f"shared_bytes {shared} exceeds the device's opt-in limit of {device.shared_optin} bytes per block")
    try:
        codegen.cuda_launch_geometry(case, launch)
    except ValueError as error:
        raise CompileError(str(error)) from None
    return launch


_NULL = np.uintp(0)


@dataclass
class CudaKernel:
    """A compiled kernel (straightforward, candidate or prior best)."""

    case: Case
    precision: str
    module: Any
    function: Any
    launch: dict[str, Any]
    options: tuple[str, ...] = ()
    _geometry: dict[tuple[int, ...], tuple] = field(default_factory=dict, repr=False)

    def geometry(self, case: Case) -> tuple[tuple[int, int, int], tuple[int, int, int], int]:
        if case.shape not in self._geometry:
            self._geometry[case.shape] = codegen.cuda_launch_geometry(case, self.launch)
        return self._geometry[case.shape]

    def run(self, buffers: "CudaBuffers", coef) -> None:
        grid, block, shared = self.geometry(buffers.case)
        nz, ny, nx = buffers.extents
        a = buffers.array("a") if buffers.has("a") else _NULL
        self.function(
            grid, block, (buffers.array("u"), a, buffers.array("y"), coef, np.int32(nz), np.int32(ny), np.int32(nx)),
            shared_mem=shared,
        )


def compiled_kernel(case: Case, source: str, launch: dict[str, Any]) -> CudaKernel:
    """Compile `source` (cached per process by source and options) for a validated `launch`."""
    module, function, options = compile_module(source)
    shared = int(launch.get("shared_bytes", 0))
    if shared > DEFAULT_SHARED_LIMIT:
        function.max_dynamic_shared_size_bytes = shared  # CuPy's RawKernel has no .ptr to pass to funcSetAttribute
    return CudaKernel(case, case.precision, module, function, launch, options)
