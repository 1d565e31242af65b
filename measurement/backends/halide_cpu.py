"""The "halide" baseline of the CPU backend: the case's Halide pipeline
(measurement.backends.halide_algorithm) with one schedule of the CPU family, JIT-compiled in the
harness child by `compile_to_callable` and run on the harness's own arrays.

Halide's buffers wrap the numpy arrays (no copy); the output buffer is y cropped to the
written region with its mins at the halo, so nothing else of y is written. The JIT compiles in
memory (LLVM's MCJIT), so nothing is written to disk and nothing outside the child's scratch is
needed inside the sandbox. Halide runs on its own thread pool (one worker per core unless
HL_NUM_THREADS says otherwise), not OpenMP's.

The schedule is the variant's (a tuning run's choice, measurement.tuning) or, with none, the
family's default; the identity says which, with the exact schedule text, because the bound of
a verdict is that schedule, not "Halide" in general.

Nothing here imports Django: this module runs inside harness child processes.
"""
from __future__ import annotations

from typing import Any

import halide as hl
import numpy as np

from measurement.harness.cases import Case

from . import halide_algorithm
from .cpu_memory import CpuBuffers


class HalideBaseline:
    """A JIT-compiled Halide pipeline for one case; runs on any shape of the case's type."""

    def __init__(self, case: Case, schedule: str | None = None):
        built = halide_algorithm.build(case, "cpu", schedule)
        target = halide_algorithm.halide_target("cpu")
        self._names = list(built.params)
        self._call = built.pipeline.compile_to_callable(list(built.params.values()), target)
        # Halide's f16 is storage: the pipeline accumulates in f32 and rounds once on the store,
        # the straightforward kernels' model, so the precision is the case's.
        self.precision = case.precision
        self.identity: dict[str, Any] = {
            "library": "halide",
            "version": halide_algorithm.VERSION,
            "schedule": built.schedule,
            "schedule_text": built.schedule_text,
            "tuned": schedule is not None,  # False: the family's default, before any tuning run
            "target": str(target),
            "computes_in": case.precision,
            "accumulation": "f64" if case.precision == "f64" else "f32",
        }

    def run(self, buffers: CpuBuffers, coef: np.ndarray) -> None:
        case = buffers.case
        arguments = {"coef": hl.Buffer(coef)}
        for name in self._names:
            if name != "coef":
                arguments[name] = hl.Buffer(buffers.array(name))
        output = hl.Buffer(buffers.array("y")[case.region])
        output.set_min([case.stencil.halo] * case.stencil.dims)
        self._call(*(arguments[name] for name in self._names), output)
