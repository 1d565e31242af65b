"""The CUDA backend: CUDA C++ kernels compiled with NVRTC through CuPy, timed with CUDA events.

No module of this backend imports cupy at its top (`cuda_device.cupy` imports it on first
use), so they can be imported on a machine without a GPU; the backend itself only ever runs
inside a harness child process, through `get_backend("cuda")`. The parts:

* `cuda_compile`: NVRTC compilation, launch JSON validation, the compiled kernel. Kernels
  (straightforward, candidates, prior bests) follow the ABI of base.py:
  `extern "C" __global__ void stencil(...)`.
* `cuda_baselines`: the library baselines ("cupyx.ndimage", "pystencils", "torch.conv"), each
  where importable; `halide_cuda`: "halide", for the cases of the carried AOT folder;
  FORGESTENCIL_CUDA_BASELINES (comma-separated names, may be empty) restricts them, e.g. for
  quick tests. "straightforward" comes from measurement.harness.codegen.
* `cuda_device`: device properties and nvidia-smi state.
* `cuda_memory`: arrays in NaN-padded device buffers (CudaBuffers; a write into the padding
  raises OutOfBoundsWrite when the output is read back).
* here: allocation, timing and the Backend itself; CudaBuffers and OutOfBoundsWrite are
  re-exported, so callers keep importing them from here.

Timing: CUDA events around each launch on the current (legacy default) stream, which torch
and CuPy share; with `flush`, an untimed kernel first reads a buffer of twice the L2 size (a
read, not a write: a write-flush would leave dirty lines whose write-back lands in the timed
launch).

Nothing here imports Django.
"""
from __future__ import annotations

import os
import platform
import time
from functools import cached_property
from typing import Any

import numpy as np

from measurement.harness import codegen
from measurement.harness.cases import Case

from .base import Kernel, Variant, not_installed
from .cuda_baselines import CupyxBaseline, PystencilsBaseline, TorchConvBaseline, device_coefficients
from .cuda_bounds import composed_on_cuda, historical_baselines, historical_kernel
from .cuda_compile import NVRTC_OPTIONS, checked_launch, compile_module, compiled_kernel
from .cuda_device import DeviceFacts, compute_processes, cuda_version, cupy, device_facts, query_gpu, version_of
from .cuda_memory import PAD_ROWS, CudaBuffers, OutOfBoundsWrite, pad_elements, padded_nan
from .halide_cuda import HalideCudaBaseline, compiled_cases, schedule_family
from .halide_cuda import unavailable as halide_unavailable

__all__ = ["BASELINES_ENV", "CudaBackend", "CudaBuffers", "OutOfBoundsWrite", "create"]

LIBRARY_MODULES = {"pystencils": "pystencils", "torch.conv": "torch"}  # baseline: the module it needs
BASELINES_ENV = "FORGESTENCIL_CUDA_BASELINES"
COPY_LAUNCHES = 20
MEMORY_MARGIN = 0.9  # of the free device memory: the rest for CuPy's pool rounding, cuDNN workspaces

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


# ---------------------------------------------------------------- the backend


class CudaBackend:
    name = "cuda"

    def __init__(self):
        self._events = None

    @cached_property
    def device(self) -> DeviceFacts:
        return device_facts()

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
            "driver_version": cuda_version(runtime.driverGetVersion()),
            "runtime_version": cuda_version(runtime.runtimeGetVersion()),
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
            "torch": version_of("torch"),
            "pystencils": version_of("pystencils"),
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
        return Kernel(source=codegen.straightforward_cuda(case), launch=codegen.straightforward_cuda_launch(case))

    def empty(self, case: Case) -> Kernel:
        """The ABI with an empty body, launched as one block of one warp: its time is the fixed
        cost of a timed launch (launch latency, the two events), not the cost of scheduling a
        grid's worth of empty blocks, which a real kernel's time already contains."""
        return Kernel(source=codegen.empty_cuda(case), launch={"block": [32, 1, 1], "tile": [1 << 30, 1 << 30, 1 << 30]})

    def baseline_names(self, case: Case) -> list[str]:
        names = ["straightforward", "cupyx.ndimage", *historical_baselines(case)]
        names += [library for library in LIBRARY_MODULES if self.library_unavailable(case, library) is None]
        if case.id in compiled_cases():  # offered even where not unpacked: the gate then refuses, saying why
            names.append("halide")
        chosen = os.environ.get(BASELINES_ENV)
        if chosen is not None:
            wanted = {name.strip() for name in chosen.split(",") if name.strip()}
            names = ["straightforward"] + [name for name in names[1:] if name in wanted]
        return names

    def library_unavailable(self, case: Case, library: str) -> str | None:
        if library == "halide":
            return halide_unavailable(case.id)
        return not_installed(LIBRARY_MODULES.get(library))

    def baseline_schedules(self, case: Case, library: str) -> tuple[str, dict[str, str]]:
        """(version, {name: text}) of the library's schedules for the case, default first: the
        candidates of a tuning run (measurement.tuning). Only Halide has schedules: those of the
        carried AOT folder (halide_cuda.schedule_family)."""
        if library != "halide":
            raise ValueError(f"the CUDA backend has no schedule family for {library!r}; only for 'halide'")
        return schedule_family(case)

    def prepare(self, case: Case, variant: Variant):
        if variant.kernel is not None:
            launch = checked_launch(case, variant.kernel.launch, self.device)
            return composed_on_cuda(case, variant, compiled_kernel(case, variant.kernel.source, launch))
        if variant.name == "straightforward" or variant.name in historical_baselines(case):
            kernel = self.straightforward(case) if variant.name == "straightforward" else historical_kernel(case, variant.name)
            return compiled_kernel(case, kernel.source, kernel.launch)
        if variant.name == "cupyx.ndimage":
            return CupyxBaseline(case)
        if variant.name == "pystencils":
            if reason := not_installed("pystencils"):
                raise ValueError(reason)
            return PystencilsBaseline(case)
        if variant.name == "torch.conv":
            if reason := not_installed("torch"):
                raise ValueError(reason)
            return TorchConvBaseline(case)
        if variant.library == "halide":  # "halide" or one schedule of a tuning run, "halide[name]"
            return HalideCudaBaseline(case, variant.schedule)
        raise ValueError(f"unknown CUDA baseline {variant.name!r}; available: {self.baseline_names(case)}")

    # -- problems

    def allocate(self, case: Case, inputs: dict[str, np.ndarray], guard: str | None = None) -> CudaBuffers:
        """`guard` is accepted and ignored: the NaN padding plays its part on every run."""
        padded, views, pristine = {}, {}, {}
        for name in (*case.input_names, "y"):
            full, view = padded_nan(case)
            if name != "y":
                values = np.asarray(inputs[name])
                if values.shape != tuple(case.shape) or values.dtype != case.dtype:
                    raise ValueError(f"input {name!r} must be {case.dtype} of shape {case.shape}, got {values.dtype} {values.shape}")
                view.set(np.ascontiguousarray(values))
                pristine[name] = full.copy()
            padded[name], views[name] = full, view
        return CudaBuffers(case, pad_elements(case), padded, views, pristine)

    def coefficients(self, coef: np.ndarray):
        return device_coefficients(coef)

    def memory_limit(self) -> tuple[int, str]:
        """MEMORY_MARGIN of the device memory free now (this context and other processes hold the rest)."""
        free, _ = cupy.cuda.runtime.memGetInfo()
        return int(MEMORY_MARGIN * free), f"{MEMORY_MARGIN:.0%} of the free memory of the {self.device.name} ({free / 2**30:.1f} GiB)"

    def time_launches(self, prepared, buffers: CudaBuffers, coef, launches: int, flush: bool, *,
                      before=None, after=None) -> list[float]:
        """`before` is called, and its device work queued, ahead of the flush and the start event,
        `after` once the end event has completed: neither is inside the timed region."""
        seconds = []
        for launch in range(launches):
            if before is not None:
                before(launch)
            if flush:
                self.flush_l2()
            seconds.append(self._time_one(lambda: prepared.run(buffers, coef)))
            if after is not None:
                after(launch)
        return seconds

    def synchronize(self) -> None:
        cupy.cuda.runtime.deviceSynchronize()
