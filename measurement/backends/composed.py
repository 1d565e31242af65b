"""The composed bound of a temporal case, run: one kernel launched Variant.steps times.

diamond_tsT is star_1 applied T times, so T launches of a correct star_1 kernel of the same shape
and precision compute it, as do T / T' launches of a diamond_tsT' kernel where T' divides T (two
of a 4-step kernel for T = 8; `part_case`). A forged diamond kernel slower than that has beaten
nothing a careful person would run instead: issue 15 found diamond_ts8/512^3 admitted at 1.85x
over pystencils while it ran at 0.77x of eight launches of the admitted star_1 kernel, and in
session 27 the admitted diamond_ts8 kernels ran slower than two launches of the admitted
diamond_ts4 one. measurement.composed picks the kernels (the admitted ones, the straightforward
star_1 one) and names them; the backends run them through `compose`, timed like every other
variant (one timed region around all launches, one L2 flush before it).

How N launches of a kernel of S steps (N S = T) write exactly the case's output, with nothing else
in the timed region:

* two scratch grids of the case's shape and element type, allocated and filled with NaN when the
  variant is prepared (for the case's shape; a check's other shape gets its pair before its one
  untimed run): never inside a timed region;
* launch 1 reads u into scratch 0, launches 2 .. N-1 ping-pong between the scratch grids, and
  launch N reads the last of them and writes y directly: no copy pass (one would slow the bound
  by a whole extra read and write and inflate every speedup over it);
* every launch is the unchanged kernel over the whole grid: it writes the grid minus S cells and
  reads S cells around what it writes. No launch writes the scratch grids' outer S cells, which
  stay NaN, so after launch k the grid minus kS holds the kS-step result and the cells between
  hold NaN computed from NaN. y ends with the T-step result on the case's written region (the
  grid minus T), NaN in the T - S cells around it, and its outer S cells untouched.

The judge (measurement.harness.judge) wants the written region right and nothing but NaN outside
it: a NaN there is not a result, a number is (`wrote_outside_region`). The NaN ring is the honest
way through it. The others cost the bound time or honesty: a last launch on the sub-grid cannot be
expressed in the kernel ABI (nx is both the extent and the row stride), a copy of the region into y
is the extra pass above, and a judge exception for composed variants would let them write numbers
where no other variant may. The ring is a thin shell (at most 6(T-1)/n of a grid of side n) and
what it computes is discarded, as the border work of any whole-grid launch is.

`ComposedKernel.launches` counts the kernel's launches: a run is exactly N of them (the tests
check the count, not a timing ratio). Nothing here imports Django.
"""
from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from measurement.harness.cases import Case

from .base import Prepared, Variant


def single_step_case(case: Case) -> Case | None:
    """The star_1 case of the same shape and precision whose kernel, launched T times, computes a
    diamond_tsT case; None for any other type."""
    return part_case(case, case.stencil.time_steps) if case.type.startswith("diamond_ts") else None


def part_case(case: Case, launches: int) -> Case | None:
    """The case whose kernel, launched `launches` times, computes the diamond_tsT case `case`:
    star_1 for T launches, diamond_ts(T / launches) for fewer (two launches of a 4-step kernel
    compute 8 steps); None where `launches` does not divide T or `case` is not a diamond."""
    steps = case.stencil.time_steps
    if not case.type.startswith("diamond_ts") or launches < 1 or steps % launches:
        return None
    each = steps // launches
    return Case("star_1" if each == 1 else f"diamond_ts{each}", case.shape, case.precision)


def composed_identity(case: Case, variant: Variant) -> dict[str, Any]:
    """What a composed variant runs: the kernel each launch runs (its case, source hash, launch;
    recorded under the `single_step_` names the first composed bounds, all of star_1, were given)
    and the number of launches."""
    single = part_case(case, variant.steps)
    kernel = variant.kernel
    if single is None or kernel is None:
        raise ValueError(f"a composed bound needs a temporal case and a kernel of a part of it, not {case.id} and {variant.name!r}")
    return {
        "steps": variant.steps,
        "single_step_case": single.id,
        "single_step_source_hash": hashlib.sha256(kernel.source.encode()).hexdigest(),
        "single_step_launch": kernel.launch,
    }


class ComposedKernel:
    """`steps` launches of `single` per run, through two NaN-filled scratch grids (module docstring).

    `scratch(case)` returns the backend's pair of NaN-filled grids of case.shape; `step(buffers,
    src, dst)` returns buffers whose input u is `src` and output y is `dst` (None: the problem's
    own u or y), which the part's kernel's `run` takes as it takes any problem's buffers."""

    def __init__(self, case: Case, variant: Variant, single: Prepared, scratch: Callable[[Case], tuple[Any, Any]],
                 step: Callable[[Any, Any, Any], Any]):
        self.precision = single.precision
        self.identity = composed_identity(case, variant)
        self.steps = variant.steps
        self.single = single
        self.launches = 0
        self._scratch_for = scratch
        self._step = step
        self._scratch = {case.shape: scratch(case)}  # the case's own pair, before any timed launch
        self._views: tuple[Any, list[Any]] | None = None  # (buffers, the buffers of each launch)

    def _launch_buffers(self, buffers) -> list[Any]:
        """The buffers of each of the T launches for this problem, built once per problem."""
        if self._views is not None and self._views[0] is buffers:
            return self._views[1]
        case = buffers.case
        if case.shape not in self._scratch:  # a check's shape: its one run is not timed
            self._scratch[case.shape] = self._scratch_for(case)
        pair = self._scratch[case.shape]
        sources = [None, *(pair[k % 2] for k in range(self.steps - 1))]
        targets = [*(pair[k % 2] for k in range(self.steps - 1)), None]
        views = [self._step(buffers, src, dst) for src, dst in zip(sources, targets)]
        self._views = (buffers, views)
        return views

    def run(self, buffers, coef) -> None:
        for view in self._launch_buffers(buffers):
            self.single.run(view, coef)
            self.launches += 1


def compose(case: Case, variant: Variant, single: Prepared, scratch: Callable[[Case], tuple[Any, Any]],
            step: Callable[[Any, Any, Any], Any]) -> Prepared:
    """The prepared variant: `single` itself for one step (a candidate, a prior best, a T = 1
    bound), else a ComposedKernel launching it variant.steps times."""
    if variant.steps == 1:
        return single
    if variant.steps < 1:
        raise ValueError(f"a variant launches its kernel at least once, not {variant.steps} times")
    return ComposedKernel(case, variant, single, scratch, step)
