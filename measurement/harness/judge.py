"""Parent-side judgement of what the child returned: correctness reasons and timing statistics.

Every rejection names one reason code; the reasons map onto the five execution states of a
forging round (generation failure, compilation failure, runtime error, mismatch, correct).
"""
from __future__ import annotations

import os
import statistics
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any

import numpy as np

from measurement.backends.base import unwritten

from .cases import Case
from .isolation import Isolated
from .oracle import FLOOR_FACTOR, TOLERANCE, make_inputs, reference, reference_at, relative_error, sample_points
from .protocol import CheckRun, CheckSpec, TimingRun, TimingSpec
from .rules import impossible_speed

# The smallest numerical floor used in the floor rule, per precision (a straightforward kernel
# can be exact on some inputs; a floor of 0 would reject any reordering).
MIN_FLOOR = {"f16": 1e-4, "f32": 1e-7, "f64": 1e-15}

# Threads that judge a measurement's variants side by side in the parent (judge_variants).
JUDGE_THREADS = min(8, os.cpu_count() or 1)

STATE_OF_REASON = {
    "compilation_failure": "compilation_failure",
    "runtime_error": "runtime_error",
    "timeout": "runtime_error",
    "out_of_bounds": "runtime_error",
}


@dataclass
class CheckResult:
    label: str
    shape: list[int]
    seed: int
    coefficient_set: str
    error: float | None = None
    floor: float | None = None
    problem: str | None = None


@dataclass
class Correctness:
    correct: bool
    reason: str | None = None
    detail: str = ""
    checks: list[CheckResult] = field(default_factory=list)

    @property
    def state(self) -> str:
        if self.correct:
            return "correct"
        return STATE_OF_REASON.get(self.reason or "", "mismatch")

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "state": self.state}


def check_reference(case: Case, spec: CheckSpec, memo: dict[CheckSpec, np.ndarray] | None = None) -> np.ndarray:
    """The float64 reference of one check; `memo` shares it between the variants of a measurement."""
    if memo is not None and spec in memo:
        return memo[spec]
    shaped = case.with_shape(spec.shape)
    ref = reference(shaped, make_inputs(shaped, spec.seed), np.asarray(spec.coefficients))
    if memo is not None:
        memo[spec] = ref
    return ref


def _check_one(case: Case, spec: CheckSpec, run: CheckRun, ref: np.ndarray, earlier: list[tuple[CheckSpec, CheckRun]], floor: float | None) -> CheckResult:
    shaped = case.with_shape(spec.shape)
    result = CheckResult(spec.label, list(spec.shape), spec.seed, spec.coefficient_set, floor=floor)
    region = run.output[shaped.region]
    tolerance = TOLERANCE[case.precision]
    if not run.inputs_unchanged:
        aliased = run.u_after is not None and relative_error(run.u_after[shaped.region], ref) <= tolerance
        result.problem = "output_aliases_input" if aliased else "input_modified"
        return result
    nan = np.isnan(region)
    if nan.any():
        never_written = unwritten(region)
        result.problem = "out_of_bounds" if (nan & ~never_written).any() else "unwritten_output"
        result.error = float("inf")
        return result
    outside = run.output.copy()
    outside[shaped.region] = np.nan
    if not np.all(np.isnan(outside)):
        result.problem = "wrote_outside_region"
        return result
    result.error = relative_error(region, ref)
    if _constant(region) and float(np.std(ref)) > 0.0:
        result.problem = "constant_output"
        return result
    for other_spec, other_run in earlier:
        if other_spec.shape == spec.shape and other_spec.seed != spec.seed and _same_output(other_run.output, run.output):
            result.problem = "stale_result"
            return result
    if result.error > tolerance:
        result.problem = "mismatch"
    elif floor is not None and result.error > FLOOR_FACTOR[case.precision] * max(floor, MIN_FLOOR[case.precision]):
        result.problem = "precision_below_floor"
    return result


# The judge runs on the parent's CPU for every variant of every case, and a GPU check is 4M
# points (0.4 s a variant): a row from the middle of an output answers most questions first.
def _middle_row(a: np.ndarray) -> np.ndarray:
    return a[tuple(n // 2 for n in a.shape[:-1])]


def _constant(region: np.ndarray) -> bool:
    """Whether the output's standard deviation is exactly 0; two different points in its middle
    row settle it without converting the whole region to float64."""
    row = _middle_row(region)
    if row.size and np.any(row != row[0]):
        return False
    return float(np.std(region.astype(np.float64))) == 0.0


def _same_output(a: np.ndarray, b: np.ndarray) -> bool:
    """np.array_equal with NaN equal to NaN; outputs of different inputs almost always differ in
    their middle row already, which decides without reading the rest."""
    if a.shape != b.shape:
        return False
    if not np.array_equal(_middle_row(a), _middle_row(b), equal_nan=True):
        return False
    return bool(np.array_equal(a, b, equal_nan=True))


def judge_checks(
    case: Case,
    specs: list[CheckSpec],
    runs: list[CheckRun],
    floors: dict[str, float] | None = None,
    references: dict[CheckSpec, np.ndarray] | None = None,
) -> Correctness:
    results: list[CheckResult] = []
    earlier: list[tuple[CheckSpec, CheckRun]] = []
    for spec, run in zip(specs, runs):
        ref = check_reference(case, spec, references)
        results.append(_check_one(case, spec, run, ref, earlier, (floors or {}).get(spec.label)))
        earlier.append((spec, run))
    failed = [r for r in results if r.problem]
    if not failed:
        return Correctness(True, checks=results)
    main_shape = list(case_check_shape(specs))
    if all(r.shape != main_shape for r in failed) and any(r.shape == main_shape for r in results):
        return Correctness(False, "shape_specific", f"correct on {main_shape}, wrong on {failed[0].shape}: {failed[0].problem}", results)
    first = failed[0]
    detail = f"{first.label}: {first.problem}"
    if first.error is not None and np.isfinite(first.error):
        detail += f" (error {first.error:.3g}, tolerance {TOLERANCE[case.precision]:g}"
        detail += f", floor {first.floor:.3g})" if first.floor is not None else ")"
    return Correctness(False, first.problem, detail, results)


def check_references(case: Case, specs: list[CheckSpec]) -> dict[CheckSpec, np.ndarray]:
    """Each check's float64 reference, computed once for all the variants of a measurement."""
    with ThreadPoolExecutor(max_workers=JUDGE_THREADS) as pool:
        return dict(zip(specs, pool.map(partial(check_reference, case), specs)))


def judge_variants(case: Case, specs: list[CheckSpec], runs: dict[str, list[CheckRun]],
                   references: dict[CheckSpec, np.ndarray], floors: dict[str, float] | None = None) -> dict[str, Correctness]:
    """judge_checks of every variant, side by side: the parent judges 4M points a check on a GPU,
    one variant after another 0.4 s each on the H200, and numpy releases the GIL."""
    with ThreadPoolExecutor(max_workers=JUDGE_THREADS) as pool:
        judged = {name: pool.submit(judge_checks, case, specs, checks, floors, references) for name, checks in runs.items()}
    return {name: future.result() for name, future in judged.items()}


def case_check_shape(specs: list[CheckSpec]) -> tuple[int, ...]:
    return specs[0].shape


def correctness_from_failure(failure: Isolated, survived_without_guards: bool | None = None) -> Correctness:
    """A child that did not return: compile error, exception, crash or timeout."""
    if failure.kind == "exception" and failure.value and failure.value[0] == "CompileError":
        return Correctness(False, "compilation_failure", failure.value[1])
    if failure.kind == "exception" and failure.value and failure.value[0] == "OutOfBoundsWrite":
        return Correctness(False, "out_of_bounds", failure.value[1])
    if failure.kind == "timeout":
        return Correctness(False, "timeout", failure.error)
    if failure.kind == "crashed" and survived_without_guards:
        return Correctness(False, "out_of_bounds", f"{failure.error} when guard pages surround the arrays; survives without them")
    return Correctness(False, "runtime_error", failure.error)


@dataclass
class VariantTiming:
    name: str
    pass_medians: list[float]
    median: float
    spread: float  # (max - min) / median over pass medians
    achieved_bandwidth: float  # compulsory bytes / median, bytes/s
    fraction_of_copy: float
    gflops: float
    impossible: bool
    timed_output_error: float  # the worst relative error over every timed launch's sampled output
    timed_output_ok: bool
    launches_checked: int = 0  # timed launches whose output was read back
    launches_wrong: int = 0  # of those, the launches whose output was above the tolerance
    timed_output_detail: str = ""  # the first wrong launch, and how much of its sample still held the fill

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def judge_launches(case: Case, outputs: list[np.ndarray], fills: list[list[float]], expected: np.ndarray) -> tuple[float, int, int, str]:
    """(worst error, launches checked, launches wrong, what the first wrong launch did) of one
    variant's per-launch read-backs (protocol.time_variants: every launch starts from a decoy fill)."""
    worst, checked, wrong, detail = 0.0, 0, 0, ""
    tolerance = TOLERANCE[case.precision]
    for pass_index, (rows, pass_fills) in enumerate(zip(outputs, fills)):
        for launch, (row, fill) in enumerate(zip(rows, pass_fills)):
            error = relative_error(row, expected[: len(row)])
            checked += 1
            worst = max(worst, error)
            if error <= tolerance:
                continue
            wrong += 1
            if not detail:
                held = int(np.count_nonzero(row == np.asarray(fill, dtype=row.dtype)))
                detail = (f"pass {pass_index + 1}, launch {launch + 1}: error {error:.3g} at {len(row)} sampled points, "
                          f"{held} of them still the value the harness filled the output with before the launch")
    return worst, checked, wrong, detail


def summarise_timing(case: Case, run: TimingRun, coefficients: tuple[float, ...], spec: TimingSpec) -> dict[str, VariantTiming]:
    inputs = make_inputs(case, spec.seed)
    points = sample_points(case, spec.sample_count, spec.sample_seed)
    expected = reference_at(case, inputs, np.asarray(coefficients), points)
    floor_time = case.compulsory_bytes / run.copy_bandwidth
    tolerance = TOLERANCE[case.precision]
    summary = {}
    for name, passes in run.samples.items():
        medians = [statistics.median(launches) for launches in passes]
        median = statistics.median(medians)
        final = relative_error(np.asarray(run.output_samples[name]), expected)
        worst, checked, wrong, detail = judge_launches(case, run.launch_outputs[name], run.launch_fills[name], expected)
        if final > tolerance and not detail:
            detail = f"the last launch's output has error {final:.3g} at {len(expected)} sampled points"
        error = max(final, worst)
        summary[name] = VariantTiming(
            name=name,
            pass_medians=medians,
            median=median,
            spread=(max(medians) - min(medians)) / median,
            achieved_bandwidth=case.compulsory_bytes / median,
            fraction_of_copy=(case.compulsory_bytes / median) / run.copy_bandwidth,
            gflops=case.flops / median / 1e9,
            impossible=impossible_speed(median, run.launch_overhead, floor_time),
            timed_output_error=error,
            timed_output_ok=error <= tolerance,
            launches_checked=checked,
            launches_wrong=wrong,
            timed_output_detail=detail,
        )
    return summary


def bootstrap_ratio_ci(baseline: list[float], candidate: list[float], seed: int = 0, resamples: int = 4000) -> tuple[float, float]:
    """95% CI of median(baseline)/median(candidate), resampling passes in pairs (same pass = same conditions)."""
    b, c = np.asarray(baseline), np.asarray(candidate)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(b), size=(resamples, len(b)))
    ratios = np.median(b[picks], axis=1) / np.median(c[picks], axis=1)
    low, high = np.percentile(ratios, [2.5, 97.5])
    return float(low), float(high)
