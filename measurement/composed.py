"""The composed bound of a temporal case (diamond_tsT = star_1 applied T times): which single-step
kernels it is made of, what each variant is called, and what its identity names.

For every diamond case a measurement times, as baselines beside the library ones:

* `composed(star_1 admitted xT)`: the standing admitted star_1 kernel of the same shape and
  precision on the same backend (selectors.admitted_kernel of `operator/<backend>/star_1/...`),
  where the ledger has one: the fastest correct single step it knows;
* `composed(straightforward xT)`: the backend's straightforward star_1 kernel, always.

Each is T launches of its single-step kernel in one timed region (measurement.backends.composed
says how they write exactly y, with no copy pass), so the bound (MeasurementReport.bound, the
fastest correct baseline) is a composed one whenever T launches of a star_1 kernel beat every
library baseline, and a diamond kernel is admitted only when it beats them too. Its identity names
its parts: the single-step case, source hash and launch, T, and the result key the kernel was
admitted under (None for the straightforward one). diamond_ts1 gets both too (T = 1: the star_1
kernels themselves, the same operator).

This module reads the ledger (the admitted kernel); the variants run in harness children like
every baseline (measurement.harness.session_info.baseline_session takes them as extra variants).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from measurement.backends.base import Kernel, Variant
from measurement.backends.composed import composed_identity, single_step_case
from measurement.harness import codegen
from measurement.harness.cases import Case

from . import selectors

ADMITTED, STRAIGHTFORWARD = "star_1 admitted", "straightforward"


@dataclass(frozen=True)
class ComposedBound:
    variant: Variant
    identity: dict[str, Any]  # the parts, as recorded with the measurement (module docstring)


def composed_name(part: str, steps: int) -> str:
    return f"composed({part} x{steps})"


def straightforward_step(single: Case, backend: str) -> Kernel:
    """The straightforward kernel of `single` as Backend.straightforward gives it, made from codegen
    here: the parent process imports no backend module."""
    if backend == "cpu":
        return Kernel(codegen.straightforward_c(single), {})
    return Kernel(codegen.straightforward_cuda(single), codegen.straightforward_cuda_launch(single))


def composed_bounds(case: Case, backend: str) -> list[ComposedBound]:
    """The composed bounds of `case` on `backend` (none unless it is a temporal case)."""
    from .services import result_key  # services imports this module to measure

    single = single_step_case(case)
    if single is None:
        return []
    key = result_key(backend, single.id)
    parts = [(ADMITTED, selectors.admitted_kernel(key), key), (STRAIGHTFORWARD, straightforward_step(single, backend), None)]
    bounds = []
    for part, kernel, admitted_under in parts:
        if kernel is None:  # no admitted star_1 kernel of this shape and precision yet
            continue
        variant = Variant(composed_name(part, case.stencil.time_steps), kernel, "baseline", steps=case.stencil.time_steps)
        identity = {"composed_of": part, **composed_identity(case, variant), "admitted_under": admitted_under}
        bounds.append(ComposedBound(variant, identity))
    return bounds


def name_parts(description: dict[str, Any], bounds: list[ComposedBound]) -> None:
    """Complete the identities a baseline session recorded (what the child ran) with what only the
    ledger knows: the result each admitted part was admitted under."""
    identities = description.setdefault("identities", {})
    for bound in bounds:
        identities[bound.variant.name] = {**identities.get(bound.variant.name, {}), **bound.identity}
