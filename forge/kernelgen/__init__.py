"""Render a specialised kernel for a case from a *plan*: the forge's kernel generator.

`render(case, backend, plan)` turns a `Plan` (forge/kernelgen/plan.py, which documents every
parameter) into a `measurement.backends.base.Kernel` (source + launch JSON) that follows the kernel
ABI of measurement/backends/base.py and is correct on every shape for every stencil type and
precision. The C writer (c_source.py) and the CUDA writer (cuda_source.py, its vector loads in
cuda_vectors.py) share the offset text of terms.py; the levers of forge.levers change one parameter per round.

Deterministic and offline: the same (case type, precision, plan) always gives the same source
(shapes are run-time arguments; the source never depends on the case's shape).
"""
from __future__ import annotations

from measurement.backends.base import Kernel
from measurement.harness.cases import Case

from .c_source import c_source
from .cuda_source import cuda_source
from .plan import BACKENDS, CPU_DEFAULTS, CUDA_DEFAULTS, DEFAULTS, Plan, default_plan, effective, validate

__all__ = ["BACKENDS", "CPU_DEFAULTS", "CUDA_DEFAULTS", "DEFAULTS", "Plan", "default_plan", "effective", "render",
           "validate"]


def render(case: Case, backend: str | None = None, plan: Plan | None = None) -> Kernel:
    """The kernel of `plan` for `case` (source + launch JSON). `backend` defaults to the plan's;
    with no plan, the backend's default plan. ValueError on an invalid plan."""
    if plan is None:
        if backend is None:
            raise ValueError("render needs a backend or a plan")
        plan = Plan.default(backend)
    if backend is not None and backend != plan.backend:
        raise ValueError(f"plan is for {plan.backend!r}, not {backend!r}")
    p = effective(case, plan)
    if plan.backend == "cpu":
        launch = {} if p["threads"] is None else {"threads": int(p["threads"])}
        return Kernel(source=c_source(case, p), launch=launch)
    source, launch = cuda_source(case, p)
    return Kernel(source=source, launch=launch)
