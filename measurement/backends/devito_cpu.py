"""The "devito" CPU baseline: each case written as a Devito Operator (issue 15), OpenMP on.

Devito (devitoproject.org) is a stencil DSL for finite-difference codes: it lowers symbolic
equations on grids to C with OpenMP and SIMD pragmas, blocking and flop-reducing rewrites.
Here it is a public bound for the CPU matrix, next to scipy.ndimage and pystencils.

How a case maps onto Devito (docs/measurement.md, "Baselines"):

* One `Eq(out, a? * sum_k c_k * sum_{o in class k} u[p + o])`, the coefficients as Constants
  (runtime arguments: the checks draw fresh ones), on a Grid whose domain is the case's
  written region and Functions whose halo is the case's halo. The harness's own arrays, of the
  grid's full shape, are then exactly Devito's allocated arrays: they are passed to the
  compiled function as they are (Devito takes a numpy array in place of a Function's data) and
  Devito writes the domain only. No copy, except for f16 (below).
* diamond_tsT: T-1 runs of one compiled star_1 Operator ping-ponging between two scratch grids
  (u is read in place by the first), then one star_1 Operator into y over the region: no copy.
  A TimeFunction (Devito's own time loop) would need u copied into its buffer (the input must
  stay untouched) and the result copied out of it, two extra whole-grid passes, and Devito's CPU
  code does not block in time by default; its optional wavefront skewing is not used.
* f16: Devito 4.8's C code has no half type (it fails on `float16` scalars), so f16 cases are
  computed in f32: inputs converted and the region copied into y on every launch (the
  `precision` and identity say so), as the other CPU baselines do.
* Compilation: the generated C goes through the content-addressed build cache (recipe "devito":
  Devito's own compiler command for language='openmp'), never Devito's JIT cache in a temporary
  folder, and is loaded from the verified descriptor. Operators are built and compiled in
  `prepare`, once per process and shape of stencil.
* Each launch calls the compiled function with arguments that `Operator.arguments` derived once
  per problem (arrays and coefficients); that derivation (about a millisecond of Python) is
  what `Operator.apply` repeats on every call. Threads: all usable cores, like candidates
  without a launch configuration.

Nothing here imports Django; devito itself is imported only when a baseline or the recipe is used.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from measurement.harness import buildcache
from measurement.harness.cases import Case, Stencil, stencil_of

from .cpu_compile import all_cores, load_library
from .cpu_memory import CpuBuffers

WORK_DTYPES = {"f16": np.float32, "f32": np.float32, "f64": np.float64}


def _compiler():
    """Devito's compiler as an OpenMP Operator gets it (Operator's own kwarg normalisation)."""
    from devito import configuration

    return configuration["compiler"].__new_with__(platform=configuration["platform"], language="openmp", mpi=False)


def _command(compiler) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(compiler and flags before the source, link flags after it): codepy's command line."""
    before = (compiler.cc, *compiler.cflags, *compiler.ldflags, *(f"-D{d}" for d in compiler.defines),
              *(f"-U{u}" for u in compiler.undefines), *(f"-I{i}" for i in compiler.include_dirs))
    after = (*(f"-L{d}" for d in compiler.library_dirs), *(f"-l{lib}" for lib in compiler.libraries))
    return before, after


@cache
def _recipe() -> buildcache.Recipe:
    before, after = _command(_compiler())
    return buildcache.Recipe("devito", before, ".c", after=after)


buildcache.register("devito", _recipe)


class _Compiled:
    """One Devito Operator and its compiled function, loaded from the build cache."""

    def __init__(self, stencil: Stencil, halo: int, dtype: type, name: str):
        from devito import Constant, Eq, Function, Grid, Operator

        grid = Grid(shape=(2 * halo + 1,) * stencil.dims, dtype=dtype)
        fields = {n: Function(name=n, grid=grid, space_order=halo, dtype=dtype) for n in ("u", "a", "out")}
        for function in fields.values():
            if function.halo != ((halo, halo),) * stencil.dims or any(p != (0, 0) for p in function.padding):
                raise RuntimeError(f"Devito gave {function.name} halo {function.halo} and padding {function.padding}, "
                                   f"not the case's halo {halo} without padding: the harness's arrays would not fit")
        coefficients = [Constant(name=f"c{k}", dtype=dtype) for k in range(len(stencil.classes))]
        u, dims = fields["u"], grid.dimensions
        terms: dict[int, Any] = {}
        for offset, k in zip(stencil.offsets, stencil.class_index):
            terms[k] = terms.get(k, 0) + u[tuple(d + o for d, o in zip(dims, offset))]
        expression = sum(coefficients[k] * term for k, term in terms.items())
        if stencil.variable_coefficient:
            expression = fields["a"] * expression
        self.operator = Operator([Eq(fields["out"], expression)], language="openmp", name=name)
        if _command(self.operator._compiler) != (_recipe().command, _recipe().after):
            raise RuntimeError("this Operator's compiler command differs from the build cache's 'devito' recipe: "
                               f"{_command(self.operator._compiler)}")
        library = load_library(buildcache.obtain(_recipe(), str(self.operator.ccode)))
        self.function = getattr(library, name)
        self.function.argtypes = [p._C_ctype for p in self.operator.parameters]
        self.variable_coefficient = stencil.variable_coefficient

    def arguments(self, u: np.ndarray, out: np.ndarray, *, a: np.ndarray | None, coef: tuple[float, ...],
                  threads: int) -> list:
        """The compiled function's arguments for these arrays (Operator.arguments, as apply derives them)."""
        given = {"u": u, "out": out, "nthreads": threads, **{f"c{k}": c for k, c in enumerate(coef)}}
        if self.variable_coefficient:
            given["a"] = a
        derived = self.operator.arguments(**given)
        return [derived[p.name] for p in self.operator.parameters]


@cache
def _compiled(type_name: str, halo: int, precision: str) -> _Compiled:
    """Shared by every prepare of the process: the baseline session and the checks prepare twice."""
    stencil = stencil_of(type_name)
    return _Compiled(stencil, halo, WORK_DTYPES[precision], f"devito_{type_name}_h{halo}_{precision}")


@dataclass
class _Launch:
    """What every launch of one problem runs, derived at its first launch."""

    calls: list[tuple[Any, list]]  # (compiled function, its arguments), in order
    conversions: list[tuple[np.ndarray, np.ndarray]]  # f16: (f32 work array, harness input) converted first
    back: tuple[np.ndarray, np.ndarray] | None  # f16: (y, f32 output) whose region is copied last
    keep: tuple  # the arguments hold bare pointers: every array they point into stays alive with them


class DevitoBaseline:
    """Devito Operators for one case (see the module docstring for the mapping)."""

    def __init__(self, case: Case):
        import devito

        self.case = case
        self.precision = "f32" if case.precision == "f16" else case.precision
        self.threads = all_cores()
        s = case.stencil
        single = "star_1" if s.time_steps > 1 else case.type
        self._final = _compiled(single, s.halo, self.precision)
        self._step = _compiled("star_1", 1, self.precision) if s.time_steps > 1 else None
        self._problem: tuple[tuple, _Launch] | None = None  # (arrays and coefficients, their launch)
        self.identity = {
            "library": "devito", "version": devito.__version__, "language": "openmp", "threads": self.threads,
            "opt": "advanced (Devito's default)", "compiler": " ".join(_recipe().command + _recipe().after),
            "computes_in": self.precision,
            "copies": ("f16 inputs converted to f32 and the region copied into y on every launch (Devito's C code "
                       "has no half type)") if case.precision == "f16" else "none: Devito runs on the harness's arrays",
        }
        if s.time_steps > 1:
            self.identity["time_steps"] = (f"{s.time_steps - 1} star_1 Operator runs ping-ponging two scratch grids, "
                                           "then one star_1 Operator into y")

    def _launch(self, buffers: CpuBuffers, coef: np.ndarray) -> _Launch:
        """This problem's launch: derived on its first launch, kept while the arrays and coefficients stay."""
        case, work = buffers.case, WORK_DTYPES[self.precision]
        names = ("u", "a", "y") if case.stencil.variable_coefficient else ("u", "y")
        arrays = {name: buffers.array(name) for name in names}
        key = (tuple((x.ctypes.data, x.shape, x.dtype.str) for x in arrays.values()), tuple(float(c) for c in coef))
        if self._problem is not None and self._problem[0] == key:
            return self._problem[1]
        self._problem = None  # let the previous problem's scratch go before this one's is allocated
        convert = case.precision == "f16"
        used = {name: np.empty(a.shape, dtype=work) if convert else a for name, a in arrays.items()}
        u, out, a = used["u"], used["y"], used.get("a")
        calls, scratch = [], []
        if self._step is not None:
            scratch = [np.empty(u.shape, dtype=work) for _ in range(min(2, case.stencil.time_steps - 1))]
            source = u
            for step in range(case.stencil.time_steps - 1):
                target = scratch[step % 2]
                arguments = self._step.arguments(source, target, a=None, coef=key[1], threads=self.threads)
                calls.append((self._step.function, arguments))
                source = target
            u = source
        calls.append((self._final.function, self._final.arguments(u, out, a=a, coef=key[1], threads=self.threads)))
        conversions = [(used[name], arrays[name]) for name in names if name != "y"] if convert else []
        launch = _Launch(calls, conversions, (arrays["y"], out) if convert else None, (arrays, used, scratch))
        self._problem = (key, launch)
        return launch

    def run(self, buffers: CpuBuffers, coef: np.ndarray) -> None:
        launch = self._launch(buffers, coef)
        for work, given in launch.conversions:
            np.copyto(work, given)
        for function, arguments in launch.calls:
            if function(*arguments) != 0:
                raise RuntimeError(f"the Devito operator {function.__name__} returned an error")
        if launch.back is not None:
            y, out = launch.back
            region = buffers.case.region
            y[region] = out[region]
