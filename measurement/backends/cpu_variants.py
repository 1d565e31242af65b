"""The prepared variants of the CPU backend (measurement.backends.cpu): what `prepare` returns and
the timing loop runs on a problem's buffers.

* The compiled C kernel (straightforward, candidates, prior bests), with its launch
  configuration (`{"threads": n}` or nothing).
* Baselines: "scipy.ndimage" (correlate with a weight array; single-threaded; f16 computed in
  f32) and "pystencils" where it is importable (pystencils 2.0 JIT, OpenMP; f16 computed in
  f32), compiled through the build cache (cpu_compile.pystencils_jit). "straightforward" comes
  from measurement.harness.codegen.

Nothing here imports Django: this module runs inside harness child processes.
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from measurement.harness.cases import Case

from .base import CompileError, library_identity
from .cpu_compile import load_library, pystencils_jit, set_threads
from .cpu_memory import CpuBuffers


def launch_threads(launch: dict[str, Any]) -> int | None:
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

    @property
    def identity(self) -> dict[str, Any]:
        return library_identity("scipy.ndimage", "scipy", self.precision, threads=1)

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
        self.identity = library_identity("pystencils", "pystencils", self.precision, target="CPU, OpenMP", threads=threads)
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
        config.jit = pystencils_jit()
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
