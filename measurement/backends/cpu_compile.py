"""Compiling for the CPU backend (measurement.backends.cpu): C kernels and the harness library
with the system compiler, and pystencils' JIT modules, all through the content-addressed build
cache (measurement.harness.buildcache), plus the harness library's helpers (OpenMP threads).

* Kernels (straightforward, candidates, prior bests) are compiled with
  `cc -O3 -march=native -fopenmp -fPIC -shared -std=c11` into shared libraries of the build
  cache, checked against their recorded digest on every load, and loaded with ctypes (calls
  release the GIL).
* A small harness library (compiled the same way) sets the OpenMP thread count, flushes the
  last-level cache and measures the copy bandwidth. Every library in the process shares the
  one libgomp, so `omp_set_num_threads` there applies to kernels too.
* pystencils' modules are built through the same cache instead of pystencils' per-user object
  cache, which nothing verifies.

Importing this module registers the recipes "c" and "pystencils" with the build cache: the
sandbox's server preloads measurement.backends.cpu (which imports this) so that its broker can
build what a child names.

Nothing here imports Django: this module runs inside harness child processes.
"""
from __future__ import annotations

import ctypes
import importlib.machinery
import importlib.util
import os
from functools import cache
from pathlib import Path

from measurement.harness import buildcache

COMPILER = os.environ.get("FORGESTENCIL_CC", "cc")
CFLAGS = ("-O3", "-march=native", "-fopenmp", "-fPIC", "-shared", "-std=c11")

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

/* Read one double of every 64-byte line of a buffer larger than the last-level caches (filled once,
   so that its pages are its own: an untouched page reads the shared zero page, which evicts nothing).
   A read, not a write: no dirty line is left whose write-back would land in the timed launch, as
   the CUDA backend's L2 flush does it. */
double harness_flush(const double* p, size_t n)
{
    double sum = 0.0;
    #pragma omp parallel for schedule(static) reduction(+:sum)
    for (size_t i = 0; i < n; i += 8) sum += p[i];
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


def pystencils_jit():
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


class Harness:
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
    Harness.lib().harness_set_threads(int(threads) if threads else all_cores())
