"""The composed bound of a temporal case (diamond_tsT = star_1 applied T times): which kernels it
is made of, what each variant is called, and what its identity names.

For every diamond case a measurement times, as baselines beside the library ones:

* `composed(star_1 admitted xT)`: the standing admitted star_1 kernel of the same shape and
  precision on the same backend (selectors.admitted_kernel of `operator/<backend>/star_1/...`),
  where the ledger has one: the fastest correct single step it knows;
* `composed(straightforward xT)`: the backend's straightforward star_1 kernel, always;
* `composed(diamond_tsS admitted xN)`: for each S < T that divides it (N = T / S launches), the
  standing admitted kernel of diamond_tsS of the same shape and precision, where the ledger has
  one: a composition of admitted kernels is a bound the field would run. By the H200 sweep of
  session 27 (docs/benchmarks/temporal_sweep_h200_s27.json), two launches of the 4-step pipeline
  admitted for diamond_ts4/512^3 (0.751 ms each) would run diamond_ts8/512^3 in about 1.50 ms,
  where the 8-step pipeline admitted for it took 2.03 ms.

Each is N launches of its part's kernel in one timed region (measurement.backends.composed
says how they write exactly y, with no copy pass), so the bound (MeasurementReport.bound, the
fastest correct baseline) is a composed one whenever such launches beat every library baseline,
and a diamond kernel is admitted only when it beats them too. Its identity names its parts: the
part's case, source hash and launch (under the `single_step_` keys), N, and the result key the
kernel was admitted under (None for the straightforward one). diamond_ts1 gets both too (T = 1: the star_1
kernels themselves, the same operator).

This module reads the ledger (the admitted kernel); the variants run in harness children like
every baseline (measurement.harness.session_info.baseline_session takes them as extra variants).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from measurement.backends.base import Kernel, Variant
from measurement.backends.composed import composed_identity, part_case, single_step_case
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
    """The composed bounds of `case` on `backend` (none unless it is a temporal case): T launches
    of the admitted and of the straightforward star_1 kernel, then T / T' launches of the admitted
    kernel of each shorter diamond_tsT' (1 < T' < T, T' dividing T) where the ledger has one."""
    from .services import result_key  # services imports this module to measure

    single = single_step_case(case)
    if single is None:
        return []
    steps = case.stencil.time_steps
    key = result_key(backend, single.id)
    parts = [(ADMITTED, selectors.admitted_kernel(key), key, steps),
             (STRAIGHTFORWARD, straightforward_step(single, backend), None, steps)]
    for launches in range(steps // 2, 1, -1):
        shorter = part_case(case, launches) if steps % launches == 0 else None
        if shorter is not None:
            key = result_key(backend, shorter.id)
            parts.append((f"{shorter.type} admitted", selectors.admitted_kernel(key), key, launches))
    bounds = []
    for part, kernel, admitted_under, launches in parts:
        if kernel is None:  # no admitted kernel of that part's case yet
            continue
        variant = Variant(composed_name(part, launches), kernel, "baseline", steps=launches)
        identity = {"composed_of": part, **composed_identity(case, variant), "admitted_under": admitted_under}
        bounds.append(ComposedBound(variant, identity))
    return bounds


def name_parts(description: dict[str, Any], bounds: list[ComposedBound]) -> None:
    """Complete the identities a baseline session recorded (what the child ran) with what only the
    ledger knows: the result each admitted part was admitted under."""
    identities = description.setdefault("identities", {})
    for bound in bounds:
        identities[bound.variant.name] = {**identities.get(bound.variant.name, {}), **bound.identity}
