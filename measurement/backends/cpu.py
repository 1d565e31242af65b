"""The CPU backend: C kernels compiled with the system compiler and run through ctypes.

* Kernels (straightforward, candidates, prior bests) are compiled with
  `cc -O3 -march=native -fopenmp -fPIC -shared -std=c11` into shared libraries of the
  content-addressed build cache (measurement.harness.buildcache), checked against their
  recorded digest on every load, and loaded with ctypes (calls release the GIL).
* Arrays live in anonymous mmap'd memory so that a PROT_NONE guard page can sit right after
  (`guard="end"`) or right before (`guard="start"`) each array.
* A small harness library (compiled the same way) sets the OpenMP thread count, flushes the
  last-level cache and measures the copy bandwidth. Every library in the process shares the
  one libgomp, so `omp_set_num_threads` there applies to kernels too.
* Baselines: "straightforward" (measurement.harness.codegen), "scipy.ndimage" (correlate with
  a weight array; single-threaded; f16 computed in f32) and "pystencils" where it is
  importable (pystencils 2.0 JIT, OpenMP; f16 computed in f32), its modules built through the
  same cache instead of pystencils' per-user object cache, which nothing verifies.

Nothing here imports Django: this module runs inside harness child processes.
"""
from __future__ import annotations

import ctypes
import importlib.machinery
import importlib.util
import mmap
import os
import platform
import resource
import shutil
import time
from dataclasses import dataclass, field
from functools import cache, cached_property
from pathlib import Path
from typing import Any

import numpy as np

from measurement.harness import buildcache, codegen
from measurement.harness.cases import Case

from .base import CompileError, Kernel, Variant, fill_output_poison

COMPILER = os.environ.get("FORGESTENCIL_CC", "cc")
CFLAGS = ("-O3", "-march=native", "-fopenmp", "-fPIC", "-shared", "-std=c11")
FALLBACK_LLC_BYTES = 64 * 1024 * 1024
MEMORY_MARGIN = 0.8  # of the memory free for a case: the rest is the interpreter, libraries, the flush buffer
PAGE = mmap.PAGESIZE
PROT_NONE = 0

HARNESS_SOURCE = r"""
/* Harness helpers of the CPU backend (not kernels under test). */
#include <stddef.h>
#include <omp.h>

void harness_set_threads(int n) { omp_set_num_threads(n); }
int harness_max_threads(void) { return omp_get_max_threads(); }

/* First touch in parallel (static schedule, like the kernels), so pages land near their users. */
void harness_touch(unsigned char* p, size_t n)
{
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i += 4096) p[i] = 0;
}

/* Write then read every byte of a buffer larger than the last-level cache. */
double harness_flush(double* p, size_t n)
{
    double sum = 0.0;
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; ++i) p[i] = (double)i;
    #pragma omp parallel for schedule(static) reduction(+:sum)
    for (size_t i = 0; i < n; ++i) sum += p[i];
    return sum;
}

void harness_copy(double* restrict dst, const double* restrict src, size_t n)
{
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; ++i) dst[i] = src[i];
}

void harness_fill(double* p, double v, size_t n)
{
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; ++i) p[i] = v;
}
"""


def create() -> "CpuBackend":
    return CpuBackend()


# ---------------------------------------------------------------- compiling


def compiler_version() -> str:
    """First line of `cc --version` (the string that goes into describe() and the cache key)."""
    return buildcache.compiler_version(COMPILER)


C_KERNEL = buildcache.Recipe("c", (COMPILER, *CFLAGS), ".c", after=("-lm",))
buildcache.register("c", lambda: C_KERNEL)


def compile_shared(source: str) -> Path:
    """Compile C source into a shared library of the build cache (measurement.harness.buildcache:
    keyed by source, flags, compiler, machine and harness version; inside the sandbox compiled
    by the broker in a confined child); CompileError with the compiler's output."""
    return buildcache.obtain(C_KERNEL, source)


@cache
def _pystencils_recipe() -> buildcache.Recipe:
    from pystencils.jit import CpuJit

    jit = CpuJit(objcache=None)
    return buildcache.Recipe("pystencils", (jit._cxx, *jit._cxx_fixed_flags), ".cpp")


buildcache.register("pystencils", _pystencils_recipe)


def _pystencils_jit():
    """pystencils' CPU JIT with the build cache in place of its object cache (~/.cache/pystencils,
    writable by anything running as the service user, and trusted there by file name)."""
    from pystencils.jit import CpuJit

    class CachedCpuJit(CpuJit):
        def compile(self, kernel):
            name = f"{kernel.name}_jit"
            code = self._ext_module_builder.render_module(kernel, name)
            path = buildcache.obtain(_pystencils_recipe(), code)
            location = buildcache.loadable(path)
            loader = importlib.machinery.ExtensionFileLoader(name, location)
            spec = importlib.util.spec_from_file_location(name, location, loader=loader)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return self._ext_module_builder.get_wrapper(kernel, module)

    return CachedCpuJit(objcache=None)


_loaded: dict[Path, ctypes.CDLL] = {}


def load_library(path: Path) -> ctypes.CDLL:
    """Load a cached library through the very descriptor whose content was checked against the
    cache's record (compile_shared rebuilds a swapped file it finds; one swapped between that
    and this load is refused with CompileError)."""
    if path not in _loaded:
        _loaded[path] = ctypes.CDLL(buildcache.loadable(path))
    return _loaded[path]


class _Harness:
    """The harness helper library, compiled on first use."""

    _lib: ctypes.CDLL | None = None

    @classmethod
    def lib(cls) -> ctypes.CDLL:
        if cls._lib is None:
            lib = load_library(compile_shared(HARNESS_SOURCE))
            lib.harness_set_threads.argtypes = [ctypes.c_int]
            lib.harness_set_threads.restype = None
            lib.harness_max_threads.restype = ctypes.c_int
            lib.harness_touch.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
            lib.harness_touch.restype = None
            lib.harness_flush.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
            lib.harness_flush.restype = ctypes.c_double
            lib.harness_copy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
            lib.harness_copy.restype = None
            lib.harness_fill.argtypes = [ctypes.c_void_p, ctypes.c_double, ctypes.c_size_t]
            lib.harness_fill.restype = None
            cls._lib = lib
        return cls._lib


def all_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def set_threads(threads: int | None) -> None:
    _Harness.lib().harness_set_threads(int(threads) if threads else all_cores())


# ---------------------------------------------------------------- memory


_libc = ctypes.CDLL(None, use_errno=True)
_libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_libc.mprotect.restype = ctypes.c_int


def _round_up(n: int, to: int) -> int:
    return -(-n // to) * to


class GuardedArray:
    """A C-contiguous array in its own anonymous mapping, optionally next to a PROT_NONE page."""

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype, guard: str | None):
        if guard not in (None, "end", "start"):
            raise ValueError(f"guard must be None, 'end' or 'start', not {guard!r}")
        dtype = np.dtype(dtype)
        self.nbytes = int(np.prod(shape)) * dtype.itemsize
        body = _round_up(max(self.nbytes, 1), PAGE)
        # Unguarded arrays get an accessible page of slack on both sides, so a small
        # out-of-bounds access survives there and only the guarded runs fault: that
        # difference is how the judge tells out_of_bounds from any other crash.
        size = body + (PAGE if guard else 2 * PAGE)
        self._map = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        raw = np.frombuffer(self._map, dtype=np.uint8)
        base = raw.ctypes.data
        if guard == "end":  # the array's last byte is the last byte before the guard page
            body_at, offset, guard_at = 0, body - self.nbytes, base + body
        elif guard == "start":  # the array's first byte is the first byte after the guard page
            body_at, offset, guard_at = PAGE, PAGE, base
        else:
            body_at, offset, guard_at = PAGE, PAGE, None
        _Harness.lib().harness_touch(base + body_at, body)
        if guard_at is not None and _libc.mprotect(guard_at, PAGE, PROT_NONE) != 0:
            raise OSError(ctypes.get_errno(), f"mprotect of the guard page failed: {os.strerror(ctypes.get_errno())}")
        self.array = raw[offset : offset + self.nbytes].view(dtype).reshape(shape)
        self.address = base + offset
        self.guard = guard


@dataclass
class CpuBuffers:
    """Inputs and output of one problem in guarded host memory (see base.Buffers)."""

    case: Case
    guard: str | None
    arrays: dict[str, GuardedArray]
    pristine: dict[str, np.ndarray]

    @property
    def extents(self) -> tuple[int, int, int]:
        return codegen.grid_extents(self.case)

    def array(self, name: str) -> np.ndarray:
        """The live array (no copy): for backends and baselines, not for callers that keep it."""
        return self.arrays[name].array

    def pointer(self, name: str) -> int | None:
        return self.arrays[name].address if name in self.arrays else None

    def poison_output(self) -> None:
        fill_output_poison(self.arrays["y"].array)

    def fill_output(self, value: float) -> None:
        self.arrays["y"].array.fill(value)

    def sampler(self, points: np.ndarray):
        index, y = tuple(points.T), self.arrays["y"].array
        return lambda: y[index]

    def output(self) -> np.ndarray:
        return self.arrays["y"].array.copy()

    def inputs_unchanged(self) -> bool:
        return all(
            np.array_equal(self.arrays[name].array.view(np.uint8), original.view(np.uint8))
            for name, original in self.pristine.items()
        )

    def input_array(self, name: str) -> np.ndarray:
        """A copy of the input's current contents."""
        return self.arrays[name].array.copy()


# ---------------------------------------------------------------- prepared variants


def _launch_threads(launch: dict[str, Any]) -> int | None:
    unknown = set(launch) - {"threads"}
    if unknown:
        raise CompileError(f"CPU launch configuration takes only 'threads'; got {sorted(unknown)}")
    threads = launch.get("threads")
    if threads is None:
        return None
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise CompileError(f"launch 'threads' must be a positive integer, got {threads!r}")
    return threads


@dataclass
class CompiledKernel:
    """A compiled C kernel (straightforward, candidate or prior best)."""

    case: Case
    precision: str
    library: Path
    threads: int | None = None
    _function: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        lib = load_library(self.library)
        try:
            function = lib.stencil
        except AttributeError:
            raise CompileError("the kernel source defines no function named `stencil`") from None
        function.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int] * 3
        function.restype = None
        self._function = function

    def run(self, buffers: CpuBuffers, coef: np.ndarray) -> None:
        set_threads(self.threads)
        nz, ny, nx = buffers.extents
        self._function(buffers.pointer("u"), buffers.pointer("a"), buffers.pointer("y"), coef.ctypes.data, nz, ny, nx)


def _weights(case: Case, coef: np.ndarray) -> np.ndarray:
    s = case.stencil
    weights = np.zeros((2 * s.radius + 1,) * s.dims, dtype=np.float64)
    for offset, k in zip(s.offsets, s.class_index):
        weights[tuple(o + s.radius for o in offset)] = coef[k]
    return weights


@dataclass
class ScipyBaseline:
    """scipy.ndimage.correlate with the stencil's weight array (single-threaded)."""

    case: Case

    @property
    def precision(self) -> str:
        return "f32" if self.case.precision == "f16" else self.case.precision

    def run(self, buffers: CpuBuffers, coef: np.ndarray) -> None:
        from scipy import ndimage

        case = buffers.case
        work = np.dtype(codegen_dtype(self.precision))
        weights = _weights(case, coef)
        values = buffers.array("u")
        values = values if values.dtype == work else values.astype(work)
        for _ in range(case.stencil.time_steps):
            values = ndimage.correlate(values, weights, output=work, mode="constant", cval=0.0)
        region = case.region
        result = values[region]
        if case.stencil.variable_coefficient:
            a = buffers.array("a")[region]
            result = result * (a if a.dtype == work else a.astype(work))
        buffers.array("y")[region] = result


def codegen_dtype(precision: str) -> type:
    return {"f16": np.float16, "f32": np.float32, "f64": np.float64}[precision]


class PystencilsBaseline:
    """pystencils 2.0 CPU JIT kernels (OpenMP). One kernel writes the region directly into y;
    diamond types ping-pong T-1 whole-grid steps through two scratch grids, then write y."""

    def __init__(self, case: Case, threads: int | None = None):
        self.case = case
        self.threads = threads
        self.precision = "f32" if case.precision == "f16" else case.precision
        s = case.stencil
        self._final = self._build(ghost_layers=s.halo)
        self._step = self._build(ghost_layers=s.radius) if s.time_steps > 1 else None

    def _build(self, ghost_layers: int):
        import pystencils as ps
        import sympy as sp

        s = self.case.stencil
        dtype = {"f32": "float32", "f64": "float64"}[self.precision]
        fields = ps.fields(f"src, dst, a: {dtype}[{s.dims}D]")
        src, dst, a = fields
        coefficients = sp.symbols(f"c0:{len(s.classes)}")
        expression = sum(coefficients[k] * src[offset] for offset, k in zip(s.offsets, s.class_index))
        if s.variable_coefficient and ghost_layers == s.halo:
            expression = a.center * expression
        config = ps.CreateKernelConfig(target=ps.Target.CPU, default_dtype=dtype, ghost_layers=ghost_layers)
        config.cpu.openmp.enable = True
        config.jit = _pystencils_jit()
        return ps.create_kernel(ps.Assignment(dst.center, expression), config).compile()

    def run(self, buffers: CpuBuffers, coef: np.ndarray) -> None:
        case = buffers.case
        set_threads(self.threads)
        work = np.dtype(codegen_dtype(self.precision))
        named = {f"c{k}": float(c) for k, c in enumerate(coef)}
        u = buffers.array("u")
        u = u if u.dtype == work else u.astype(work)
        y = buffers.array("y")
        target = y if y.dtype == work else np.full(y.shape, np.nan, dtype=work)
        extra = {}
        if case.stencil.variable_coefficient:
            a = buffers.array("a")
            extra["a"] = a if a.dtype == work else a.astype(work)
        source = u
        if self._step is not None:
            scratch = [np.zeros(u.shape, dtype=work), np.zeros(u.shape, dtype=work)]
            for step in range(case.stencil.time_steps - 1):
                self._step(src=source, dst=scratch[step % 2], **named)
                source = scratch[step % 2]
        self._final(src=source, dst=target, **named, **extra)
        if target is not y:
            y[case.region] = target[case.region]


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
        return np.empty(self.flush_bytes() // 8, dtype=np.float64)

    def flush_cache(self) -> float:
        set_threads(None)
        buffer = self._flush_buffer
        return _Harness.lib().harness_flush(buffer.ctypes.data, buffer.size)

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
            "os": platform.platform(),
            "python": platform.python_version(),
            "numpy": np.__version__,
            "scipy": _version_of("scipy"),
            "pystencils": _version_of("pystencils"),
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
        lib = _Harness.lib()
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
        names = ["straightforward", "scipy.ndimage"]
        if importlib.util.find_spec("pystencils") is not None:
            names.append("pystencils")
        return names

    def prepare(self, case: Case, variant: Variant):
        if variant.kernel is not None:
            threads = _launch_threads(dict(variant.kernel.launch or {}))
            return CompiledKernel(case, case.precision, compile_shared(variant.kernel.source), threads)
        if variant.name == "straightforward":
            return CompiledKernel(case, case.precision, compile_shared(codegen.straightforward_c(case)))
        if variant.name == "scipy.ndimage":
            return ScipyBaseline(case)
        if variant.name == "pystencils":
            if importlib.util.find_spec("pystencils") is None:
                raise ValueError("pystencils is not installed")
            return PystencilsBaseline(case)
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
