"""Issue 16's targets evaluated: given the facts of each case of a matrix (and the latest whole
re-run), the measured value of each target, the cases it counts and whether it is met.

Why one module: the generated operator tables (benchmarks/operator_table_render.py and
operator_table_history.py, from a ledger export) and the audit site (frontend/targets.py, from
this ledger's projections and events) must never disagree on what a target measures or when it is
met, so each rule is written once, here, as a plain function over plain facts. The thresholds are
measurement/roofline.py's. Free of Django: the tables run without a database.

What each caller gathers is its own business (the export's replayed results, or the operator
table's rows); what a fact means is stated on CaseFacts. A value that cannot be computed (no case
in the target's scope, no whole re-run recorded) is None, and so is `met` when there is nothing to
judge; `measured` then says why.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Iterable, Mapping

from .roofline import (F16_MEMORY_MEDIAN_TARGET, GEOMEAN_TARGET, MEMORY_FLOOR, MEMORY_MEDIAN_TARGET,
                       RERUN_SECONDS_TARGET, TEMPORAL_TARGET)

MEMORY_BOUND = "memory-bound"
TEMPORAL_MIN_STEPS = 4  # the temporal target covers diamond_tsT with T >= 4
F32_F64 = ("f32", "f64")


@dataclass(frozen=True)
class CaseFacts:
    """One case of a matrix on one backend, as the targets need it."""

    case: str
    precision: str  # f16 | f32 | f64
    bound_class: str  # memory-bound | compute-bound | unknown (against the machine balance)
    standing: bool  # an admitted result that still holds (admitted or downgraded)
    fraction_of_copy: float | None = None  # the kernel's, in its admitting measurement
    speedup: float | None = None  # the standing speedup over the bound (a downgrade's value)
    same_precision: bool | None = None  # the admitting verdict's bound computes in the case's precision
    composed_speedup: float | None = None  # a diamond_tsT's speedup over its hardest composed bound (composed_speedup)
    sealed: bool = False  # a map cell is sealed for the case on this backend
    sealed_for_standing_kernel: bool = False  # ... for the kernel that stands now (a later campaign may replace it)
    converged: bool = False  # the case converged (CaseConverged), with or without a kernel
    converged_with_kernel: bool = False  # the case converged with an admitted kernel, so its cell must be sealed


@dataclass(frozen=True)
class WholeRerun:
    """The latest MatrixRerunFinished of a backend that planned every standing result
    (measurement.reruns.record_matrix_rerun)."""

    wall_seconds: float
    rerun: int  # results it re-ran
    standing: int  # the standing results it was to re-run
    not_run: int  # left out by its deadline
    failed: int  # re-runs that failed

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> WholeRerun:
        return cls(payload["wall_seconds"], len(payload["cases"]), payload["standing"], len(payload["not_run"]),
                   payload["counts"].get("failed", 0))


@dataclass(frozen=True)
class TargetEvaluation:
    """One target over one matrix: what it asks, what was measured, over which cases, and met or not."""

    name: str  # a key of measurement.roofline.TARGETS, or admitted / sealed / rerun_seconds
    label: str  # a few words that name it
    target: str  # the target in words, with its threshold
    value: float | None  # the measured value; None: not recorded
    measured: str  # the value in words, with what it is over (or why there is none)
    met: bool | None  # the target over the whole matrix; None: nothing to judge
    value_met: bool | None = None  # the value alone meets the threshold over the cases counted
    threshold: float | None = None  # the target's number (a fraction of copy, a speedup, seconds); None: a count
    scope: tuple[str, ...] = ()  # the cases the target is over
    counted: tuple[str, ...] = ()  # the cases with a value that the measured value is over
    failing: tuple[str, ...] = ()  # cases that miss the target on their own (below a floor, under a ratio)

    @property
    def uncounted(self) -> tuple[str, ...]:
        """Cases of the scope without a value (no standing result, not measured)."""
        return tuple(case for case in self.scope if case not in self.counted)


def geomean(values: list[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def temporal_steps(case: str) -> int | None:
    """T of a diamond_tsT case id (diamond_ts4/256x256x256/f32 -> 4); None for any other case."""
    kind = case.split("/")[0]
    return int(kind[len("diamond_ts"):]) if kind.startswith("diamond_ts") else None


def timed_composed(verdict: Mapping[str, Any]) -> dict[str, float]:
    """{name: speedup} over the composed bounds a verdict payload timed itself: a re-run that left
    library baselines out (measurement/contenders.py) still timed its composed ones, and an entry it
    carried from the standing measurement was not timed by it."""
    left_out = set(verdict.get("left_out") or [])
    return {name: b["speedup"] for name, b in (verdict.get("baselines") or {}).items()
            if name.startswith("composed(") and name not in left_out and not b.get("carried") and b.get("speedup")}


def composed_speedup(verdicts: Iterable[Mapping[str, Any]]) -> float | None:
    """The speedup over the hardest composed bound (T launches of the best single step, T / S of an
    admitted diamond_tsS kernel) in the newest of `verdicts` (payloads of the standing result's
    admitting verdict and its re-runs, oldest first) that timed one: a later re-run against a
    newly admitted shorter diamond's kernel is the harder question."""
    timed = [composed for composed in map(timed_composed, verdicts) if composed]
    return min(timed[-1].values()) if timed else None


# ---- the targets -------------------------------------------------------------------------


def _target(name: str, label: str, statement: str, threshold: float | None = None) -> Callable[..., TargetEvaluation]:
    """A target's evaluation still to be given its value, words and verdict (positional, in that order)."""
    return partial(TargetEvaluation, name, label, statement, threshold=threshold)


def every_case_admitted(facts: list[CaseFacts]) -> TargetEvaluation:
    """Every case of the matrix has a standing admitted result (the campaign's first aim)."""
    judged = _target("admitted", "every case admitted", "every case of the matrix has a standing admitted result")
    scope = tuple(f.case for f in facts)
    standing = tuple(f.case for f in facts if f.standing)
    ok = len(standing) == len(scope) if scope else None
    return judged(float(len(standing)), f"{len(standing)} of {len(scope)} cases have a standing result", ok,
                  value_met=ok, scope=scope, counted=standing)


def sealing(facts: list[CaseFacts]) -> TargetEvaluation:
    """A case that converged with an admitted kernel gets its map cell sealed with that kernel in
    the same transaction (forge.services._converge): a converged case left unsealed means the map
    lost a diagnosis the loop paid for. Met when no such case is unsealed, also when none converged."""
    judged = _target("sealed", "converged cases sealed",
                     "every case that converged with an admitted kernel has its map cell sealed")
    scope = tuple(f.case for f in facts if f.converged_with_kernel)
    sealed = tuple(f.case for f in facts if f.converged_with_kernel and f.sealed)
    unsealed = tuple(sorted(set(scope) - set(sealed)))
    current = sum(f.sealed_for_standing_kernel for f in facts)
    return judged(float(len(sealed)), f"{len(sealed)} of {len(scope)} cases converged with an admitted kernel are "
                  f"sealed; {current} of {len(facts)} cases sealed for the kernel that stands now", not unsealed,
                  value_met=not unsealed, scope=scope, counted=sealed, failing=unsealed)


def memory_median(facts: list[CaseFacts], *, target: float = MEMORY_MEDIAN_TARGET) -> TargetEvaluation:
    """The median fraction of the copy bandwidth (measured in the same run as the kernel) over the
    memory-bound f32/f64 cases with a standing result: how close the kernels come to the hardware."""
    return _copy_median(facts, "memory_median", F32_F64, target)


def f16_memory_median(facts: list[CaseFacts], *, target: float = F16_MEMORY_MEDIAN_TARGET) -> TargetEvaluation:
    """The memory-bound f16 cases kept apart, at their own median target (half the bytes a point,
    so a launch's fixed costs weigh more)."""
    return _copy_median(facts, "f16_memory_median", ("f16",), target)


def _copy_median(facts: list[CaseFacts], name: str, precisions: tuple[str, ...], target: float) -> TargetEvaluation:
    """Over the matrix a median target needs every memory-bound case of `precisions` to have a
    standing result: a case the forge could not admit is not at the median."""
    names = " / ".join(precisions)
    judged = _target(name, f"memory-bound {'/'.join(precisions)} median",
                     f"median ≥ {target:.0%} of the copy bandwidth over the memory-bound {names} cases", target)
    scope, fractions = _memory_fractions(facts, precisions)
    if not fractions:
        return _without_fractions(judged, facts, precisions, scope)
    median = statistics.median(fractions.values())
    missing = len(scope) - len(fractions)
    return judged(median, f"median {median:.0%} over {len(fractions)} of {len(scope)} memory-bound {names} cases"
                  + (f"; {missing} without a standing result" if missing else ""), median >= target and not missing,
                  value_met=median >= target, scope=scope, counted=tuple(fractions))


def memory_floor(facts: list[CaseFacts], *, floor: float = MEMORY_FLOOR) -> TargetEvaluation:
    """No memory-bound f32/f64 case below `floor` of the copy bandwidth: a median can hide a kernel
    far from the bandwidth. Over the matrix every memory-bound case needs a standing result too."""
    judged = _target("memory_floor", "memory-bound f32/f64 floor",
                     f"no memory-bound f32 / f64 case below {floor:.0%} of the copy bandwidth", floor)
    scope, fractions = _memory_fractions(facts, F32_F64)
    if not fractions:
        return _without_fractions(judged, facts, F32_F64, scope)
    lowest = min(fractions, key=fractions.get)
    below = tuple(sorted(c for c, f in fractions.items() if f < floor))
    missing = len(scope) - len(fractions)
    return judged(fractions[lowest], f"minimum {fractions[lowest]:.0%} ({lowest}); {len(below)} of {len(fractions)} "
                  f"below {floor:.0%}" + (f"; {missing} without a standing result" if missing else ""),
                  not below and not missing, value_met=not below, scope=scope, counted=tuple(fractions), failing=below)


def _without_fractions(judged: Callable[..., TargetEvaluation], facts: list[CaseFacts], precisions: tuple[str, ...],
                       scope: tuple[str, ...]) -> TargetEvaluation:
    """A bandwidth target with no fraction to judge: not recorded where no case is memory-bound
    (saying so where none could be classed: no FP32 peak is computed for the device, so it has no
    machine balance), not met where memory-bound cases have no standing result."""
    names = " / ".join(precisions)
    if scope:
        return judged(None, f"none of the {len(scope)} memory-bound {names} cases has a standing result", False,
                      scope=scope)
    unknown = sum(f.bound_class == "unknown" for f in facts if f.precision in precisions)
    return judged(None, f"not recorded: no {names} case is classified memory-bound"
                  + (f" ({unknown} classified unknown: no machine balance)" if unknown else ""), None)


def _memory_fractions(facts: list[CaseFacts], precisions: tuple[str, ...]) -> tuple[tuple[str, ...], dict[str, float]]:
    """The memory-bound cases of `precisions`, and the fraction of copy of those with a standing result."""
    scope = tuple(f.case for f in facts if f.bound_class == MEMORY_BOUND and f.precision in precisions)
    fractions = {f.case: f.fraction_of_copy for f in facts
                 if f.case in scope and f.standing and f.fraction_of_copy is not None}
    return scope, fractions


def same_precision_speedups(facts: list[CaseFacts], precision: str) -> tuple[tuple[str, ...], dict[str, float]]:
    """The cases of `precision`, and the standing speedups over a bound of that same precision (a
    mixed-precision speedup is never a headline: the bound did other arithmetic)."""
    scope = tuple(f.case for f in facts if f.precision == precision)
    return scope, {f.case: f.speedup for f in facts
                   if f.precision == precision and f.standing and f.same_precision and f.speedup}


def geomean_speedup(facts: list[CaseFacts], *, target: float = GEOMEAN_TARGET) -> TargetEvaluation:
    """The geometric mean of the same-precision f32 speedups over the bound (the seed's A100
    headline). Judged on the mean itself; the cases without a result are stated beside it."""
    judged = _target("geomean", "f32 geometric mean", f"geometric mean ≥ {target}x over the bound, same-precision "
                     "f32 cases", target)
    scope, speedups = same_precision_speedups(facts, "f32")
    if not scope:
        return judged(None, "not recorded: no f32 case", None)
    mean = geomean(list(speedups.values()))
    if mean is None:
        return judged(None, f"none of the {len(scope)} f32 cases has a same-precision standing result", False,
                      value_met=False, scope=scope)
    missing = len(scope) - len(speedups)
    return judged(mean, f"{mean:.2f}x over {len(speedups)} of {len(scope)} f32 cases"
                  + (f"; {missing} without a same-precision standing result" if missing else ""), mean >= target,
                  value_met=mean >= target, scope=scope, counted=tuple(speedups))


def temporal(facts: list[CaseFacts], *, target: float = TEMPORAL_TARGET) -> TargetEvaluation:
    """Every diamond_tsT with T >= 4 at `target` over its composed bound (CaseFacts.composed_speedup);
    a case that no longer stands does not meet it whatever its ratio."""
    judged = _target("temporal", "temporal", f"every diamond_tsT with T ≥ {TEMPORAL_MIN_STEPS} at ≥ {target}x over its "
                     "composed bound, T launches of the best single step, or fewer of an admitted shorter diamond's "
                     "kernel where that is faster", target)
    cases = sorted((f for f in facts if (temporal_steps(f.case) or 0) >= TEMPORAL_MIN_STEPS), key=lambda f: f.case)
    if not cases:
        return judged(None, f"not recorded: no diamond_tsT case with T ≥ {TEMPORAL_MIN_STEPS}", None)
    parts = [f"{f.case} not measured against a composed bound" if f.composed_speedup is None else
             f"{f.case} {f.composed_speedup:.3f}x" + ("" if f.standing else " (no standing result)") for f in cases]
    counted = tuple(f.case for f in cases if f.composed_speedup and f.standing)
    failing = tuple(f.case for f in cases if f.composed_speedup and f.composed_speedup < target)
    lowest = min((f.composed_speedup for f in cases if f.case in counted), default=None)
    every = all(f.composed_speedup and f.standing and f.composed_speedup >= target for f in cases)
    return judged(lowest, ", ".join(parts), every, value_met=lowest is not None and lowest >= target,
                  scope=tuple(f.case for f in cases), counted=counted, failing=failing)


def rerun_time(run: WholeRerun | None, *, target: float = RERUN_SECONDS_TARGET) -> TargetEvaluation:
    """One whole-matrix re-run of the standing results, in one process, within `target` seconds:
    every planned result re-run (none left by the deadline, none failed) in that wall time."""
    judged = _target("rerun_seconds", "whole-matrix re-run time",
                     f"every standing result re-run in ≤ {target:.0f} s, in one process", target)
    if run is None:
        return judged(None, "not recorded: no MatrixRerunFinished of a whole re-run", None)
    every = not run.not_run and not run.failed
    left = f"; {run.not_run} left by its deadline" if run.not_run else ""
    failed = f"; {run.failed} failed" if run.failed else ""
    return judged(run.wall_seconds, f"{run.wall_seconds:.1f} s for {run.rerun} of {run.standing} standing results"
                  f"{left}{failed}", every and run.wall_seconds <= target, value_met=run.wall_seconds <= target)


def evaluate(facts: list[CaseFacts], run: WholeRerun | None) -> list[TargetEvaluation]:
    """Every target of issue 16 over one matrix, in the order the tables state them."""
    return [every_case_admitted(facts), sealing(facts), memory_median(facts), memory_floor(facts),
            f16_memory_median(facts), geomean_speedup(facts), temporal(facts), rerun_time(run)]
