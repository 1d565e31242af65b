"""The CPU backend: C kernels compiled with the system compiler and run through ctypes.

The parts:

* `cpu_compile`: kernels (straightforward, candidates, prior bests) are compiled with
  `cc -O3 -march=native -fopenmp -fPIC -shared -std=c11` into shared libraries of the
  content-addressed build cache (measurement.harness.buildcache), checked against their
  recorded digest on every load, and loaded with ctypes (calls release the GIL). A small
  harness library (compiled the same way) sets the OpenMP thread count, flushes the
  last-level cache and measures the copy bandwidth. Every library in the process shares the
  one libgomp, so `omp_set_num_threads` there applies to kernels too.
* `cpu_memory`: arrays live in anonymous mmap'd memory so that a PROT_NONE guard page can sit
  right after (`guard="end"`) or right before (`guard="start"`) each array.
* `cpu_variants`: the compiled kernel and the baselines: "straightforward"
  (measurement.harness.codegen; for single-step f16 cases the F16C kernel of codegen_c, whose
  scalar predecessor stays the historical baseline "straightforward_f16_scalar", prepared
  here), "scipy.ndimage" (correlate with a weight array; single-threaded; f16 computed in f32)
  and "pystencils" where it is importable (pystencils 2.0 JIT, OpenMP; f16 computed in f32),
  its modules built through the same cache instead of pystencils' per-user object cache, which
  nothing verifies; "halide" where it is importable
  (measurement.backends.halide_cpu: Halide 21 JIT with a schedule of its family).
  "devito" where it is importable (measurement.backends.devito_cpu: Devito Operators, OpenMP;
  f16 computed in f32), compiled through the same cache instead of Devito's JIT folder.
* here: machine facts, timing and the Backend itself; the public names of the parts are
  re-exported, so callers keep importing them from here.

Nothing here imports Django: this module runs inside harness child processes.
"""
from __future__ import annotations

import os
import platform
import resource
import shutil
import time
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from measurement.harness import codegen
from measurement.harness.cases import Case

from .base import Kernel, Variant, not_installed
from .composed import compose
from .cpu_compile import CFLAGS, COMPILER, Harness, all_cores, compile_shared, compiler_version, load_library, set_threads
from .cpu_memory import PAGE, CpuBuffers, GuardedArray, nan_pair, step_buffers
from .cpu_variants import CompiledKernel, PystencilsBaseline, ScipyBaseline, codegen_dtype, launch_threads
from .devito_cpu import DevitoBaseline

__all__ = [
    "CFLAGS", "COMPILER", "FALLBACK_LLC_BYTES", "MEMORY_MARGIN", "PAGE", "CompiledKernel", "CpuBackend", "CpuBuffers",
    "GuardedArray", "PystencilsBaseline", "ScipyBaseline", "all_cores", "codegen_dtype", "compile_shared",
    "compiler_version", "create", "load_library", "set_threads",
]

LIBRARY_MODULES = {"pystencils": "pystencils", "halide": "halide", "devito": "devito"}  # baseline: the module it needs
BASELINES_ENV = "FORGESTENCIL_CPU_BASELINES"  # comma-separated library baselines to keep (may be empty), e.g. for tests
FALLBACK_LLC_BYTES = 64 * 1024 * 1024
F16_SCALAR = "straightforward_f16_scalar"  # historical: the scalar f16 kernel the F16C one replaced
MEMORY_MARGIN = 0.8  # of the memory free for a case: the rest is the interpreter, libraries, the flush buffer


def create() -> "CpuBackend":
    return CpuBackend()


def historical_baselines(case: Case) -> list[str]:
    """The scalar f16 kernel where `straightforward` is now the F16C one: still timed, so every
    measurement shows what the old bound was and how far the new one moved it."""
    return [F16_SCALAR] if codegen.vectorised_c(case) else []


# ---------------------------------------------------------------- the backend


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def _size_bytes(text: str) -> int:
    text = text.strip().upper()
    for suffix, factor in (("K", 1024), ("M", 1024**2), ("G", 1024**3)):
        if text.endswith(suffix):
            return int(text[:-1]) * factor
    return int(text)


class CpuBackend:
    name = "cpu"

    # -- machine facts

    @cached_property
    def llc(self) -> dict[str, Any]:
        """Last-level cache of cpu0: size (bytes), level, and how many such caches the machine has."""
        best = None
        for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
            kind = _read(str(index / "type"))
            level, size = _read(str(index / "level")), _read(str(index / "size"))
            if kind == "Instruction" or not level or not size:
                continue
            if best is None or int(level) > best[0]:
                best = (int(level), _size_bytes(size), index.name)
        if best is None:
            return {"bytes": FALLBACK_LLC_BYTES, "level": None, "instances": 1, "source": "fallback"}
        shared = set()
        for cpu in Path("/sys/devices/system/cpu").glob("cpu[0-9]*"):
            text = _read(str(cpu / "cache" / best[2] / "shared_cpu_list"))
            if text:
                shared.add(text)
        return {"bytes": best[1], "level": best[0], "instances": max(1, len(shared)), "source": "sysfs"}

    def flush_bytes(self) -> int:
        """Size of the flush buffer: twice all last-level caches together."""
        return 2 * self.llc["bytes"] * self.llc["instances"]

    @cached_property
    def _flush_buffer(self) -> np.ndarray:
        buffer = np.empty(self.flush_bytes() // 8, dtype=np.float64)
        Harness.lib().harness_fill(buffer.ctypes.data, 1.0, buffer.size)  # pages of its own, for the reads to evict with
        return buffer

    def flush_cache(self) -> float:
        set_threads(None)
        buffer = self._flush_buffer
        return Harness.lib().harness_flush(buffer.ctypes.data, buffer.size)

    def describe(self) -> dict[str, Any]:
        cpuinfo = _read("/proc/cpuinfo") or ""
        model = next((line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith("model name")), platform.processor())
        physical = {
            (block.get("physical id"), block.get("core id"))
            for block in (
                {key.strip(): value.strip() for key, value in (line.split(":", 1) for line in chunk.splitlines() if ":" in line)}
                for chunk in cpuinfo.split("\n\n")
            )
            if block
        }
        flags = next((line.split(":", 1)[1].split() for line in cpuinfo.splitlines() if line.startswith("flags")), [])
        simd = [f for f in flags if f in ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512_fp16", "avx512bw", "f16c")]
        return {
            "backend": self.name,
            "device": model,
            "cpu_model": model,
            "logical_cpus": os.cpu_count(),
            "usable_cpus": all_cores(),
            "physical_cores": len({p for p in physical if p != (None, None)}) or None,
            "simd": simd,
            "compiler": COMPILER,
            "compiler_version": compiler_version(),
            "compiler_path": shutil.which(COMPILER),
            "flags": " ".join(CFLAGS),
            "llc_bytes": self.llc["bytes"],
            "llc_level": self.llc["level"],
            "llc_instances": self.llc["instances"],
            "cache_flush": "before each flushed launch, a read of one double a 64-byte line over twice the last-level caches",
            "os": platform.platform(),
            "python": platform.python_version(),
            "numpy": np.__version__,
            "scipy": _version_of("scipy"),
            "pystencils": _version_of("pystencils"),
            "halide": _version_of("halide"),
            "omp_env": {k: v for k, v in os.environ.items() if k.startswith(("OMP_", "GOMP_"))},
        }

    def environment(self) -> dict[str, Any]:
        """Cheap state read before and after timing (load, clock): helps explain noisy runs."""
        loadavg = _read("/proc/loadavg")
        mhz = [float(line.split(":", 1)[1]) for line in (_read("/proc/cpuinfo") or "").splitlines() if line.startswith("cpu MHz")]
        return {
            "loadavg": loadavg.split()[:3] if loadavg else None,
            "cpu_mhz_mean": round(sum(mhz) / len(mhz), 1) if mhz else None,
            "time": time.time(),
        }

    def copy_bandwidth(self, nbytes: int) -> float:
        """The copy ceiling for `nbytes` arrays: (read + write) bytes per second of the fastest
        of 7 cache-flushed launches, single-threaded and on all cores, whichever is faster.

        The fastest launch, not the median, because this is a ceiling: on a loaded machine
        OpenMP barriers can make a median copy slower than a single-threaded stencil."""
        count = max(1, int(nbytes) // 8)
        lib = Harness.lib()
        src, dst = GuardedArray((count,), np.float64, None), GuardedArray((count,), np.float64, None)
        lib.harness_fill(src.address, 1.0, count)
        lib.harness_fill(dst.address, 0.0, count)
        best = None
        for threads in (1, None):
            set_threads(threads)
            lib.harness_copy(dst.address, src.address, count)  # warm-up (page tables, threads)
            for _ in range(7):
                self.flush_cache()
                set_threads(threads)
                start = time.perf_counter_ns()
                lib.harness_copy(dst.address, src.address, count)
                elapsed = time.perf_counter_ns() - start
                best = elapsed if best is None else min(best, elapsed)
        set_threads(None)
        return 2.0 * count * 8 / (max(best, 1) * 1e-9)

    # -- variants

    def straightforward(self, case: Case) -> Kernel:
        return Kernel(source=codegen.straightforward_c(case), launch={})

    def empty(self, case: Case) -> Kernel:
        return Kernel(source=codegen.empty_c(case), launch={"threads": 1})

    def baseline_names(self, case: Case) -> list[str]:
        names = ["straightforward", "scipy.ndimage", *historical_baselines(case)]
        names += [library for library in LIBRARY_MODULES if self.library_unavailable(case, library) is None]
        chosen = os.environ.get(BASELINES_ENV)
        if chosen is not None:
            names = names[:1] + [name for name in names[1:] if name in {n.strip() for n in chosen.split(",")}]
        return names

    def library_unavailable(self, case: Case, library: str) -> str | None:
        return not_installed(LIBRARY_MODULES.get(library))

    def baseline_schedules(self, case: Case, library: str) -> tuple[str, dict[str, str]]:
        """(version, {name: text}) of the library's schedule family for the case, default first:
        the candidates of a tuning run (measurement.tuning). Only Halide has schedules."""
        if library != "halide":
            raise ValueError(f"the CPU backend has no schedule family for {library!r}; only for 'halide'")
        from . import halide_algorithm

        return halide_algorithm.VERSION, halide_algorithm.schedules(case, "cpu")

    def prepare(self, case: Case, variant: Variant):
        if variant.kernel is not None:
            threads = launch_threads(dict(variant.kernel.launch or {}))
            return compose(case, variant, CompiledKernel(case, case.precision, compile_shared(variant.kernel.source), threads),
                           nan_pair, step_buffers)
        if variant.name == "straightforward":
            return CompiledKernel(case, case.precision, compile_shared(codegen.straightforward_c(case)))
        if variant.name in historical_baselines(case):
            return CompiledKernel(case, case.precision, compile_shared(codegen.straightforward_c_scalar(case)))
        if variant.name == "scipy.ndimage":
            return ScipyBaseline(case)
        if variant.name == "pystencils":
            if reason := not_installed("pystencils"):
                raise ValueError(reason)
            return PystencilsBaseline(case)
        if variant.library == "halide":  # "halide" or one schedule of a tuning run, "halide[name]"
            from .halide_cpu import HalideBaseline  # libHalide (~150 MB) loads only where the baseline runs

            return HalideBaseline(case, variant.schedule)
        if variant.name == "devito":
            return DevitoBaseline(case)
        raise ValueError(f"unknown CPU baseline {variant.name!r}; available: {self.baseline_names(case)}")

    # -- problems

    def allocate(self, case: Case, inputs: dict[str, np.ndarray], guard: str | None = None) -> CpuBuffers:
        arrays: dict[str, GuardedArray] = {}
        pristine: dict[str, np.ndarray] = {}
        for name in case.input_names:
            values = np.asarray(inputs[name])
            if values.shape != tuple(case.shape) or values.dtype != case.dtype:
                raise ValueError(f"input {name!r} must be {case.dtype} of shape {case.shape}, got {values.dtype} {values.shape}")
            arrays[name] = GuardedArray(case.shape, case.dtype, guard)
            arrays[name].array[...] = values
            pristine[name] = values.copy()
        arrays["y"] = GuardedArray(case.shape, case.dtype, guard)
        return CpuBuffers(case, guard, arrays, pristine)

    def coefficients(self, coef: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(np.array(coef, dtype=np.float64, copy=True))

    def memory_limit(self) -> tuple[int, str]:
        """MEMORY_MARGIN of the least of: the RAM available now (MemAvailable), what the cgroup
        still allows (memory.max less memory.current), this process's address-space and data
        limits (the sandbox sets one of them on every harness child)."""
        bounds = []
        available = next((line.split()[1] for line in (_read("/proc/meminfo") or "").splitlines()
                          if line.startswith("MemAvailable:")), None)
        if available:
            bounds.append((int(available) * 1024, "the available RAM"))
        cgroup_max, cgroup_used = _read("/sys/fs/cgroup/memory.max"), _read("/sys/fs/cgroup/memory.current")
        if cgroup_max and cgroup_max.isdigit() and cgroup_used and cgroup_used.isdigit():
            bounds.append((int(cgroup_max) - int(cgroup_used), "the cgroup's memory limit"))
        for which, what in ((resource.RLIMIT_AS, "the address-space limit"), (resource.RLIMIT_DATA, "the data-size limit")):
            soft = resource.getrlimit(which)[0]
            if soft != resource.RLIM_INFINITY:
                bounds.append((soft, what))
        if not bounds:
            raise RuntimeError("cannot tell how much memory this machine has (no /proc/meminfo)")
        most, what = min(bounds)
        return int(MEMORY_MARGIN * most), f"{MEMORY_MARGIN:.0%} of {what} ({most / 2**30:.1f} GiB)"

    def time_launches(self, prepared, buffers: CpuBuffers, coef: np.ndarray, launches: int, flush: bool, *,
                      before=None, after=None) -> list[float]:
        seconds = []
        for launch in range(launches):
            if before is not None:
                before(launch)
            if flush:
                self.flush_cache()
            start = time.perf_counter_ns()
            prepared.run(buffers, coef)
            seconds.append((time.perf_counter_ns() - start) * 1e-9)
            if after is not None:
                after(launch)
        return seconds

    def synchronize(self) -> None:
        return None


def _version_of(package: str) -> str | None:
    try:
        from importlib.metadata import version

        return version(package)
    except Exception:
        return None
