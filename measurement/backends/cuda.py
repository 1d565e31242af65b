"""The CUDA backend: CUDA C++ kernels compiled with NVRTC through CuPy, timed with CUDA events.

This module imports cupy at its top: it is only ever imported inside a harness child process,
through `get_backend("cuda")`. torch, pystencils and cupyx.scipy are imported only by the
baselines that use them, on first use.

* Kernels (straightforward, candidates, prior bests) follow the ABI of base.py:
  `extern "C" __global__ void stencil(...)`, compiled by `cupy.RawModule` (NVRTC, options
  `--std=c++17`; CuPy adds `-arch=sm_XX` of the device itself, and `-ftz=true`; no
  `--use_fast_math`, so division and square root stay IEEE-rounded). An NVRTC log becomes a
  CompileError. Launch JSON: `{"block": [bx, by, bz], "tile": [tx, ty, tz], "shared_bytes": S}`,
  the grid from `codegen.cuda_launch_geometry` for the shape of each run (checks use other
  shapes than the case's); more than 48 KiB of dynamic shared memory is opted into.
* Arrays: each input and the output sits inside a larger device buffer whose padding (one
  plane plus eight rows on each side in 3D, eight rows in 2D) is NaN. A read past an array's
  ends yields a computed NaN in the output, which the judge tells from the output's own poison
  (a NaN of another bit pattern) and rejects as out_of_bounds; a write past the
  output's ends is found when the output is read back (`output()` raises OutOfBoundsWrite, a
  runtime error); a write past an input's ends counts as modifying the input (the comparison
  covers the padding too).
* Timing: CUDA events around each launch on the current (legacy default) stream, which torch
  and CuPy share; with `flush`, an untimed kernel first reads a buffer of twice the L2 size
  (a read, not a write: a write-flush would leave dirty lines whose write-back lands in the
  timed launch).
* Baselines: "straightforward" (measurement.harness.codegen), "cupyx.ndimage" (correlate
  with the stencil's weight array; T applications for diamond; f16 read and stored as f16,
  computed in f32 as cupyx does), "pystencils" (pystencils 2.0 with Target.CUDA, compiled by
  CuPy; f16 computed in f32) and "torch.conv" (cuDNN conv2d/conv3d, TF32 off; f16 stays f16),
  each where importable. FORGESTENCIL_CUDA_BASELINES (comma-separated names, may be empty)
  restricts the library baselines, e.g. for quick tests.

Nothing here imports Django.
"""
from __future__ import annotations

import importlib.util
import os
import platform
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from measurement.harness import codegen
from measurement.harness.cases import Case

from .base import CompileError, Kernel, Variant, fill_output_poison

NVRTC_OPTIONS = ("--std=c++17",)
LAUNCH_KEYS = {"block", "tile", "shared_bytes"}
DEFAULT_SHARED_LIMIT = 48 * 1024
BASELINES_ENV = "FORGESTENCIL_CUDA_BASELINES"
class _LazyCupy:
    """CuPy, imported on first use: no module imports cupy at its top level, so importing this
    one (e.g. to read its docstring or constants) works on a machine without a GPU."""

    def __getattr__(self, name: str) -> Any:
        import cupy as module

        return getattr(module, name)


cupy = _LazyCupy()

LIBRARY_BASELINES = ("cupyx.ndimage", "pystencils", "torch.conv")
COPY_LAUNCHES = 20
PAD_ROWS = 8
SMI_TIMEOUT_S = 10
CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8

HARNESS_SOURCE = r"""
/* Harness helpers of the CUDA backend (not kernels under test). */
extern "C" __global__ void harness_read(const int4* __restrict__ p, unsigned long long n, int* sink)
{
    int acc = 0;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        const int4 v = __ldcg(p + i);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x5eed1e55) sink[0] = acc;  /* never true for the buffer's contents; keeps the loads */
}

extern "C" __global__ void harness_copy(const int4* __restrict__ src, int4* __restrict__ dst, unsigned long long n)
{
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x)
        dst[i] = src[i];
}
"""


def create() -> "CudaBackend":
    return CudaBackend()


class OutOfBoundsWrite(RuntimeError):
    """The kernel wrote into the NaN padding around its output array."""


# ---------------------------------------------------------------- compiling


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


def _launch_of(case: Case, launch: dict[str, Any] | None, device: "DeviceFacts") -> dict[str, Any]:
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


# ---------------------------------------------------------------- memory


def _pad_elements(case: Case) -> int:
    """NaN padding on each side of an array: one plane + PAD_ROWS rows (3D) or PAD_ROWS rows
    (2D), rounded up to 256 bytes so every array starts 256-byte aligned."""
    nz, ny, nx = codegen.grid_extents(case)
    pad = (ny * nx if case.stencil.dims == 3 else 0) + PAD_ROWS * nx
    align = 256 // case.dtype.itemsize
    return max(align, -(-pad // align) * align)


_BITS = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def _same_bits(a, b) -> bool:
    bits = _BITS[a.dtype.itemsize]
    return bool(cupy.array_equal(a.view(bits), b.view(bits)))


@dataclass
class CudaBuffers:
    """Inputs and output of one problem in NaN-padded device buffers (see base.Buffers)."""

    case: Case
    pad: int
    padded: dict[str, Any]  # name -> 1D device buffer: pad | array | pad
    views: dict[str, Any]  # name -> the array inside (C-contiguous, case.shape)
    pristine: dict[str, Any]  # input name -> device copy of its padded buffer
    cache: dict[str, Any] = field(default_factory=dict)  # per-problem scratch of the baselines

    @property
    def extents(self) -> tuple[int, int, int]:
        return codegen.grid_extents(self.case)

    def array(self, name: str):
        """The live device array (no copy)."""
        return self.views[name]

    def has(self, name: str) -> bool:
        return name in self.views

    def poison_output(self) -> None:
        fill_output_poison(self.padded["y"])

    def output(self) -> np.ndarray:
        full = self.padded["y"]
        spilled = int(cupy.count_nonzero(~cupy.isnan(full[: self.pad]))) + int(cupy.count_nonzero(~cupy.isnan(full[-self.pad :])))
        if spilled:
            raise OutOfBoundsWrite(f"the kernel wrote {spilled} elements outside the output array (into its NaN padding)")
        return cupy.asnumpy(self.views["y"])

    def inputs_unchanged(self) -> bool:
        return all(_same_bits(self.padded[name], original) for name, original in self.pristine.items())

    def input_array(self, name: str) -> np.ndarray:
        """A host copy of the input's current contents."""
        return cupy.asnumpy(self.views[name])


# ---------------------------------------------------------------- prepared kernels


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

    def run(self, buffers: CudaBuffers, coef) -> None:
        grid, block, shared = self.geometry(buffers.case)
        nz, ny, nx = buffers.extents
        a = buffers.array("a") if buffers.has("a") else _NULL
        self.function(
            grid, block, (buffers.array("u"), a, buffers.array("y"), coef, np.int32(nz), np.int32(ny), np.int32(nx)),
            shared_mem=shared,
        )


# ---------------------------------------------------------------- library baselines


_host_coefficients: dict[int, tuple[Any, np.ndarray]] = {}


def host_coefficients(coef) -> np.ndarray:
    """The host values of a coefficient array made by CudaBackend.coefficients (no device sync)."""
    entry = _host_coefficients.get(id(coef))
    if entry is not None and entry[0] is coef:
        return entry[1]
    return cupy.asnumpy(coef) if isinstance(coef, cupy.ndarray) else np.asarray(coef, dtype=np.float64)


def weight_array(case: Case, coef: np.ndarray, dtype) -> np.ndarray:
    """The (2r+1)^d correlation weights of one stencil application (as the CPU scipy baseline)."""
    s = case.stencil
    weights = np.zeros((2 * s.radius + 1,) * s.dims, dtype=np.float64)
    for offset, k in zip(s.offsets, s.class_index):
        weights[tuple(o + s.radius for o in offset)] = coef[k]
    return weights.astype(dtype)


class _PerCoefficients:
    """A small cache keyed by the coefficient object (kept alive, so ids are never reused)."""

    def __init__(self):
        self._items: list[tuple[Any, Any]] = []

    def get(self, coef, make):
        for key, value in self._items:
            if key is coef:
                return value
        value = make(host_coefficients(coef))
        self._items = self._items[-7:] + [(coef, value)]
        return value


class CupyxBaseline:
    """cupyx.scipy.ndimage.correlate with the stencil's weight array into a scratch grid, then
    the written region copied (times `a` for varcoef) into y. T applications for diamond.
    f16 input is read as f16 and accumulated in f32 (cupyx promotes the weights to f32)."""

    def __init__(self, case: Case):
        self.case = case
        self.precision = case.precision
        self._weights = _PerCoefficients()
        self._upcast = False  # set if this cupyx cannot read f16 directly

    def _work(self, case: Case):
        if case.precision == "f16" and (self._upcast or case.stencil.time_steps > 1 or case.stencil.variable_coefficient):
            return np.dtype(np.float32)  # one rounding to f16, at the final store
        return case.dtype

    def run(self, buffers: CudaBuffers, coef) -> None:
        try:
            self._run(buffers, coef)
        except Exception:
            if buffers.case.precision != "f16" or self._upcast:
                raise
            self._upcast = True
            self._run(buffers, coef)

    def _run(self, buffers: CudaBuffers, coef) -> None:
        from cupyx.scipy import ndimage

        case = buffers.case
        s = case.stencil
        weight_dtype = np.float32 if case.precision == "f16" else case.dtype
        weights = self._weights.get(coef, lambda host: cupy.asarray(weight_array(case, host, weight_dtype)))
        work = self._work(case)
        values = buffers.array("u")
        if self._upcast and values.dtype != np.float32:
            values = values.astype(np.float32)
        for step in range(s.time_steps):
            key = ("cupyx", work.str, step % 2)
            if key not in buffers.cache:
                buffers.cache[key] = cupy.empty(case.shape, dtype=work)
            out = buffers.cache[key]
            ndimage.correlate(values, weights, output=out, mode="constant", cval=0.0)
            values = out
        region = case.region
        y = buffers.array("y")
        if s.variable_coefficient:
            cupy.multiply(values[region], buffers.array("a")[region], out=y[region])
        else:
            y[region] = values[region]


class PystencilsBaseline:
    """pystencils 2.0 kernels for Target.CUDA, compiled by CuPy. One kernel writes the region
    straight into y; diamond types ping-pong T-1 whole-grid steps through two scratch grids.
    f16 is computed in f32 (converted in, region converted out). Kernels are generated on the
    first run, so prepare() stays cheap and a failure is this baseline's runtime error."""

    def __init__(self, case: Case):
        self.case = case
        self.precision = "f32" if case.precision == "f16" else case.precision
        self._kernels: dict[int, Any] = {}
        self._named = _PerCoefficients()

    def _kernel(self, ghost_layers: int, final: bool):
        key = (ghost_layers, final)
        if key not in self._kernels:
            import pystencils as ps
            import sympy as sp

            s = self.case.stencil
            dtype = {"f32": "float32", "f64": "float64"}[self.precision]
            src, dst, a = ps.fields(f"src, dst, a: {dtype}[{s.dims}D]")
            coefficients = sp.symbols(f"c0:{len(s.classes)}")
            expression = sum(coefficients[k] * src[offset] for offset, k in zip(s.offsets, s.class_index))
            if s.variable_coefficient and final:
                expression = a.center * expression
            config = ps.CreateKernelConfig(target=ps.Target.CUDA, default_dtype=dtype, ghost_layers=ghost_layers)
            self._kernels[key] = ps.create_kernel(ps.Assignment(dst.center, expression), config).compile()
        return self._kernels[key]

    def run(self, buffers: CudaBuffers, coef) -> None:
        case = buffers.case
        s = case.stencil
        work = np.dtype(self.precision.replace("f", "float"))
        named = self._named.get(coef, lambda host: {f"c{k}": float(c) for k, c in enumerate(host)})
        cache = buffers.cache

        def converted(name: str):
            array = buffers.array(name)
            if array.dtype == work:
                return array
            key = ("pystencils", name)
            if key not in cache:
                cache[key] = cupy.empty(case.shape, dtype=work)
            cache[key][...] = array
            return cache[key]

        def scratch(slot: int):
            key = ("pystencils", "scratch", slot)
            if key not in cache:
                cache[key] = cupy.zeros(case.shape, dtype=work)
            return cache[key]

        source = converted("u")
        for step in range(s.time_steps - 1):
            target = scratch(step % 2)
            self._kernel(s.radius, final=False)(src=source, dst=target, **named)
            source = target
        y = buffers.array("y")
        extra = {"a": converted("a")} if s.variable_coefficient else {}
        final = self._kernel(s.halo, final=True)  # writes exactly the case's region
        if y.dtype == work:
            final(src=source, dst=y, **named, **extra)
            return
        target = scratch(2)
        final(src=source, dst=target, **named, **extra)
        region = case.region
        y[region] = target[region]


class TorchConvBaseline:
    """torch.nn.functional.conv3d / conv2d (cuDNN, TF32 off, benchmark mode) without padding:
    each application shrinks the grid by the radius, so T applications leave exactly the
    written region, copied (times `a` for varcoef) into y. Arrays pass through DLPack (no copy)."""

    def __init__(self, case: Case):
        self.case = case
        self.precision = case.precision
        self._torch = None
        self._weights = _PerCoefficients()

    def _setup(self):
        import torch

        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.benchmark = True
        self._torch = torch
        return torch

    def run(self, buffers: CudaBuffers, coef) -> None:
        torch = self._torch or self._setup()
        case = buffers.case
        s = case.stencil
        if "torch" not in buffers.cache:
            buffers.cache["torch"] = {name: torch.from_dlpack(view) for name, view in buffers.views.items()}
        views = buffers.cache["torch"]
        weight = self._weights.get(
            coef, lambda host: torch.from_dlpack(cupy.asarray(weight_array(case, host, case.dtype)))[None, None].contiguous()
        )
        conv = torch.nn.functional.conv3d if s.dims == 3 else torch.nn.functional.conv2d
        x = views["u"][None, None]
        for _ in range(s.time_steps):
            x = conv(x, weight)
        out = x[0, 0]
        region = case.region
        y = views["y"][region]
        if s.variable_coefficient:
            torch.mul(out, views["a"][region], out=y)
        else:
            y.copy_(out)


# ---------------------------------------------------------------- device facts


def _nvidia_smi(args: list[str]) -> str | None:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        done = subprocess.run([exe, *args], capture_output=True, text=True, timeout=SMI_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def _value(text: str):
    text = text.strip()
    if not text or text.startswith("[") or text in ("N/A", "Not Supported"):
        return None
    try:
        return float(text) if "." in text or text.isdigit() else text
    except ValueError:
        return text


def _bus_suffix(bus_id: str | None) -> str:
    """'00000000:17:00.0' and '0000:17:00.0' name the same GPU: compare bus:device.function."""
    return (bus_id or "").strip().lower().split(":", 1)[-1]


def _query_once(fields: list[str], bus_id: str | None) -> dict[str, Any] | None:
    wanted = ["pci.bus_id", *fields]
    text = _nvidia_smi([f"--query-gpu={','.join(wanted)}", "--format=csv,noheader,nounits"])
    if text is None:
        return None
    rows = [[cell.strip() for cell in line.split(",")] for line in text.strip().splitlines() if line.strip()]
    row = next((r for r in rows if _bus_suffix(r[0]) == _bus_suffix(bus_id)), rows[0] if len(rows) == 1 else None)
    if row is None or len(row) != len(wanted):
        return {}
    return {name: _value(value) for name, value in zip(wanted[1:], row[1:])}


def query_gpu(fields: list[str], bus_id: str | None) -> dict[str, Any]:
    """nvidia-smi --query-gpu for our GPU (matched by PCI bus id); {} without nvidia-smi. When
    the driver refuses the query (a field name it does not know), each field is asked alone and
    the unknown ones are left out."""
    if shutil.which("nvidia-smi") is None:
        return {}
    result = _query_once(fields, bus_id)
    if result is not None:
        return result
    if len(fields) == 1 or _query_once([], bus_id) is None:
        return {}
    merged: dict[str, Any] = {}
    for name in fields:
        merged.update(_query_once([name], bus_id) or {})
    return merged


def compute_processes(bus_id: str | None) -> list[dict[str, Any]] | None:
    text = _nvidia_smi(["--query-compute-apps=pid,process_name,used_memory,gpu_bus_id", "--format=csv,noheader,nounits"])
    if text is None:
        return None
    processes = []
    for line in text.strip().splitlines():
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) < 4 or (bus_id and _bus_suffix(cells[3]) != _bus_suffix(bus_id)):
            continue
        pid = int(cells[0]) if cells[0].isdigit() else None
        processes.append({"pid": pid, "name": cells[1], "used_memory_mib": _value(cells[2])})
    return processes


@dataclass(frozen=True)
class DeviceFacts:
    index: int
    name: str
    compute_capability: str
    sm_count: int
    l2_bytes: int
    memory_bytes: int
    shared_optin: int
    bus_id: str | None
    properties: dict[str, Any]


def _text(value) -> str:
    return value.decode(errors="replace").rstrip("\x00") if isinstance(value, bytes) else str(value)


def _cuda_version(number: int) -> str:
    return f"{number // 1000}.{(number % 1000) // 10}"


def _version_of(package: str) -> str | None:
    try:
        from importlib.metadata import version

        return version(package)
    except Exception:
        return None


# ---------------------------------------------------------------- the backend


class CudaBackend:
    name = "cuda"

    def __init__(self):
        self._events = None

    @cached_property
    def device(self) -> DeviceFacts:
        index = cupy.cuda.runtime.getDevice()
        props = cupy.cuda.runtime.getDeviceProperties(index)
        try:
            bus_id = cupy.cuda.Device(index).pci_bus_id
        except Exception:
            bus_id = None
        keep = {
            key: (_text(value) if isinstance(value, bytes) else value)
            for key, value in props.items()
            if isinstance(value, (int, float, bytes, str, tuple)) and key not in ("uuid", "luid")
        }
        return DeviceFacts(
            index=index,
            name=_text(props.get("name", "?")),
            compute_capability=f"{props.get('major')}.{props.get('minor')}",
            sm_count=int(props.get("multiProcessorCount", 0)),
            l2_bytes=int(props.get("l2CacheSize", 0)) or 64 * 1024 * 1024,
            memory_bytes=int(props.get("totalGlobalMem", 0)),
            shared_optin=int(props.get("sharedMemPerBlockOptin", 0)) or DEFAULT_SHARED_LIMIT,
            bus_id=bus_id,
            properties=keep,
        )

    # -- harness helpers

    @cached_property
    def _harness(self):
        module, _, _ = compile_module(HARNESS_SOURCE, "harness_read")
        return {"read": module.get_function("harness_read"), "copy": module.get_function("harness_copy")}

    @cached_property
    def _flush_buffer(self):
        """Twice the L2 size of int4, written once (ones) and then only read."""
        count = -(-2 * self.device.l2_bytes // 16)
        buffer = cupy.ones(count * 4, dtype=np.int32)
        return buffer, count, cupy.zeros(1, dtype=np.int32)

    def _blocks(self) -> int:
        return max(1, self.device.sm_count) * 8

    def flush_l2(self) -> None:
        """Read 2 x L2 bytes (untimed): evicts whatever the last launch left in L2, and writes
        its dirty lines back now rather than during the next timed launch."""
        buffer, count, sink = self._flush_buffer
        self._harness["read"]((self._blocks(),), (256,), (buffer, np.uint64(count), sink))

    def _timer(self):
        if self._events is None:
            self._events = (cupy.cuda.Event(), cupy.cuda.Event())
        return self._events

    def _time_one(self, launch) -> float:
        start, end = self._timer()
        start.record()
        launch()
        end.record()
        end.synchronize()
        return cupy.cuda.get_elapsed_time(start, end) * 1e-3

    # -- machine facts

    def describe(self) -> dict[str, Any]:
        d = self.device
        runtime = cupy.cuda.runtime
        try:
            nvrtc = ".".join(str(v) for v in cupy.cuda.nvrtc.getVersion())
        except Exception:
            nvrtc = None
        try:
            from cupy.cuda import compiler

            arch = f"sm_{compiler._get_arch()}"
        except Exception:
            arch = None
        smi = query_gpu(
            ["name", "driver_version", "clocks.max.sm", "clocks.max.memory", "power.limit", "memory.total",
             "persistence_mode", "compute_mode", "mig.mode.current", "ecc.mode.current"],
            d.bus_id,
        )
        return {
            "backend": self.name,
            "device": d.name,
            "compute_capability": d.compute_capability,
            "sm_count": d.sm_count,
            "l2_bytes": d.l2_bytes,
            "memory_bytes": d.memory_bytes,
            "shared_per_block_optin": d.shared_optin,
            "pci_bus_id": d.bus_id,
            "driver_version": _cuda_version(runtime.driverGetVersion()),
            "runtime_version": _cuda_version(runtime.runtimeGetVersion()),
            "nvrtc_version": nvrtc,
            "nvidia_driver": smi.get("driver_version"),
            "clocks_max_mhz": {"sm": smi.get("clocks.max.sm"), "memory": smi.get("clocks.max.memory")},
            "power_limit_w": smi.get("power.limit"),
            "modes": {k: smi.get(k) for k in ("persistence_mode", "compute_mode", "mig.mode.current", "ecc.mode.current")},
            "compiler": "nvrtc",
            "compiler_version": nvrtc,
            "arch": arch,
            "options": " ".join(NVRTC_OPTIONS) + " (CuPy adds -arch=sm_XX and -ftz=true; no --use_fast_math)",
            "flags": " ".join(NVRTC_OPTIONS),
            "cupy": cupy.__version__,
            "torch": _version_of("torch"),
            "pystencils": _version_of("pystencils"),
            "numpy": np.__version__,
            "python": platform.python_version(),
            "os": platform.platform(),
            "timing": "CUDA events around each launch; L2 flushed by an untimed read of 2 x L2 bytes",
            "array_padding": f"NaN padding of one plane + {PAD_ROWS} rows (3D) / {PAD_ROWS} rows (2D) on each side",
        }

    def environment(self) -> dict[str, Any]:
        """What can spoil a measurement, read before and after timing: other processes on the GPU
        (the idle check), utilisation, clocks, throttle reasons, temperature, power, load."""
        d = self.device
        gpu = query_gpu(
            ["utilization.gpu", "utilization.memory", "clocks.sm", "clocks.mem", "temperature.gpu", "power.draw",
             "pstate", "clocks_event_reasons.active"],
            d.bus_id,
        )
        if gpu and gpu.get("clocks_event_reasons.active") is None:
            gpu.update(query_gpu(["clocks_throttle_reasons.active"], d.bus_id))
        processes = compute_processes(d.bus_id)
        others = None if processes is None else [p for p in processes if p["pid"] not in (os.getpid(), os.getppid())]
        try:
            free, total = cupy.cuda.runtime.memGetInfo()
        except Exception:
            free, total = None, None
        try:
            with open("/proc/loadavg") as handle:
                loadavg = handle.read().split()[:3]
        except OSError:
            loadavg = None
        return {
            "gpu": gpu or None,
            "compute_processes": processes,
            "other_compute_processes": others,
            "idle": None if others is None else not others,
            "memory_free_bytes": free,
            "memory_total_bytes": total,
            "loadavg": loadavg,
            "time": time.time(),
        }

    def copy_bandwidth(self, nbytes: int) -> float:
        """The copy ceiling for `nbytes` arrays: (read + write) bytes per second of the fastest of
        COPY_LAUNCHES L2-flushed launches of each of two copies, cudaMemcpyAsync device to device
        and a 16-byte-vector grid-stride copy kernel, whichever is faster.

        The fastest launch, not the median, because this is a ceiling: noise (clock ramps, the
        other process that the idle check reports) only ever slows a copy down, and a
        ceiling that is too low would call honest kernels impossibly fast. With 20 flushed
        launches the fastest is within a few per cent of the median on an idle H200."""
        count = max(1, -(-int(nbytes) // 16))
        src = cupy.ones(count * 4, dtype=np.int32)
        dst = cupy.zeros(count * 4, dtype=np.int32)
        copy_kernel = self._harness["copy"]
        blocks = min(self._blocks() * 4, max(1, -(-count // 256)))
        methods = {
            "memcpy": lambda: dst.data.copy_from_device_async(src.data, count * 16),
            "kernel": lambda: copy_kernel((blocks,), (256,), (src, dst, np.uint64(count))),
        }
        best = None
        for launch in methods.values():
            launch()  # warm-up
            cupy.cuda.runtime.deviceSynchronize()
            for _ in range(COPY_LAUNCHES):
                self.flush_l2()
                seconds = self._time_one(launch)
                best = seconds if best is None else min(best, seconds)
        return 2.0 * count * 16 / max(best, 1e-9)

    # -- variants

    def straightforward(self, case: Case) -> Kernel:
        return Kernel(source=codegen.straightforward_cuda(case), launch={k: list(v) for k, v in codegen.DEFAULT_CUDA_LAUNCH.items()})

    def empty(self, case: Case) -> Kernel:
        """The ABI with an empty body, launched as one block of one warp: its time is the fixed
        cost of a timed launch (launch latency, the two events), not the cost of scheduling a
        grid's worth of empty blocks, which a real kernel's time already contains."""
        return Kernel(source=codegen.empty_cuda(case), launch={"block": [32, 1, 1], "tile": [1 << 30, 1 << 30, 1 << 30]})

    def baseline_names(self, case: Case) -> list[str]:
        names = ["straightforward", "cupyx.ndimage"]
        if importlib.util.find_spec("pystencils") is not None:
            names.append("pystencils")
        if importlib.util.find_spec("torch") is not None:
            names.append("torch.conv")
        chosen = os.environ.get(BASELINES_ENV)
        if chosen is not None:
            wanted = {name.strip() for name in chosen.split(",") if name.strip()}
            names = ["straightforward"] + [name for name in names[1:] if name in wanted]
        return names

    def prepare(self, case: Case, variant: Variant):
        if variant.kernel is not None:
            launch = _launch_of(case, variant.kernel.launch, self.device)
            return self._compiled(case, variant.kernel.source, launch)
        if variant.name == "straightforward":
            return self._compiled(case, codegen.straightforward_cuda(case), dict(codegen.DEFAULT_CUDA_LAUNCH))
        if variant.name == "cupyx.ndimage":
            return CupyxBaseline(case)
        if variant.name == "pystencils":
            if importlib.util.find_spec("pystencils") is None:
                raise ValueError("pystencils is not installed")
            return PystencilsBaseline(case)
        if variant.name == "torch.conv":
            if importlib.util.find_spec("torch") is None:
                raise ValueError("torch is not installed")
            return TorchConvBaseline(case)
        raise ValueError(f"unknown CUDA baseline {variant.name!r}; available: {self.baseline_names(case)}")

    def _compiled(self, case: Case, source: str, launch: dict[str, Any]) -> CudaKernel:
        module, function, options = compile_module(source)
        shared = int(launch.get("shared_bytes", 0))
        if shared > DEFAULT_SHARED_LIMIT:
            cupy.cuda.driver.funcSetAttribute(function.ptr, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, shared)
        return CudaKernel(case, case.precision, module, function, launch, options)

    # -- problems

    def allocate(self, case: Case, inputs: dict[str, np.ndarray], guard: str | None = None) -> CudaBuffers:
        """`guard` is accepted and ignored: the NaN padding plays its part on every run."""
        pad = _pad_elements(case)
        n = case.points
        padded, views, pristine = {}, {}, {}
        for name in (*case.input_names, "y"):
            full = cupy.full(n + 2 * pad, np.nan, dtype=case.dtype)
            view = full[pad : pad + n].reshape(case.shape)
            if name != "y":
                values = np.asarray(inputs[name])
                if values.shape != tuple(case.shape) or values.dtype != case.dtype:
                    raise ValueError(f"input {name!r} must be {case.dtype} of shape {case.shape}, got {values.dtype} {values.shape}")
                view.set(np.ascontiguousarray(values))
                pristine[name] = full.copy()
            padded[name], views[name] = full, view
        return CudaBuffers(case, pad, padded, views, pristine)

    def coefficients(self, coef: np.ndarray):
        host = np.ascontiguousarray(np.array(coef, dtype=np.float64, copy=True))
        device = cupy.asarray(host)
        _host_coefficients[id(device)] = (device, host)
        return device

    def time_launches(self, prepared, buffers: CudaBuffers, coef, launches: int, flush: bool) -> list[float]:
        seconds = []
        for _ in range(launches):
            if flush:
                self.flush_l2()
            seconds.append(self._time_one(lambda: prepared.run(buffers, coef)))
        return seconds

    def synchronize(self) -> None:
        cupy.cuda.runtime.deviceSynchronize()
