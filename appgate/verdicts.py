"""What a gate run concludes from its measured datasets, and what that means for the application:
the verdict (admitted / self-checked / rejected / inconclusive), its detail line, the Amdahl
ceiling, the state the application moves to and what a re-run revises. Free of Django:
appgate.services records it; tests/appgate/test_decisions.py pins each rule at its edge.

- inconclusive: a dataset whose spread still exceeds the regression band after the allowed
  attempts makes the whole run inconclusive, first runs included (issue 17: results with one
  dataset at 0.862x inside a 2.45-21.5 CI were admitted as REAL); only a quiet run admits,
  rejects on the floor, or revises a standing result.
- self-checked: the manifest compares no output (correctness.no_comparison); the candidate
  passed the program's own check only, so it is shown with its headline and never REAL.
- parity: an admitted headline whose 95% CI reaches 1.0 is not shown to be faster; the detail
  and the tables say "parity" (the 0.98 floor stays on the headline).
- the Amdahl ceiling 1/(1-f+f/S) bounds what speeding up the hotspot alone can give; a headline
  above it means the hotspot clocks do not time the same work in both variants or the candidate
  changed more than the hotspot: flagged as a measurement problem, never silently shown.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from measurement.harness.rules import REGRESSION_BAND

from .manifest import LoadedManifest

FLOOR = 0.98  # below this all-dataset geometric mean the change is rejected
# The coarsest printed clock a variant's timing may have, as a fraction of its median: rounding
# hides up to half a step in each reading (the CI is widened by that: `step_widened_ci`), and
# passes one step apart count as quiet (`spread`); a coarser clock cannot resolve the 2% band.
STEP_LIMIT = 0.05


@dataclass
class Conclusion:
    reasons: list[str]
    detail: str
    headline: float
    ci: list[float]
    datasets: dict[str, float]
    amdahl: dict = field(default_factory=dict)
    noisy: list[str] = field(default_factory=list)
    inconclusive: str = ""  # why, when noisy


def checks_of(loaded: LoadedManifest) -> list[str]:
    """The correctness checks the verdict rests on: "own_check" and/or "compare"."""
    c = loaded.manifest.correctness
    return [name for name, present in (("own_check", c.own_check is not None), ("compare", bool(c.compare))) if present]


def verdict_name(reasons: list[str], inconclusive: str, self_checked: bool) -> str:
    if inconclusive:
        return "inconclusive"
    if reasons:
        return "rejected"
    return "self-checked" if self_checked else "admitted"


def conclude(measured: list[dict]) -> Conclusion:
    """The verdict of correct, timed datasets: the headline is the geometric mean over all of them."""
    speedups = {p["dataset"]: p["speedup"] for p in measured}
    headline = geomean(list(speedups.values()))
    ci = [geomean([p["speedup_ci"][k] for p in measured]) for k in (0, 1)]
    amdahl = amdahl_bounds(measured)
    detail = (f"{headline:.3f}x all-dataset geometric mean over {len(measured)} dataset(s) "
              f"(95% CI {ci[0]:.3f}-{ci[1]:.3f})")
    reasons = [] if headline >= FLOOR else ["below_floor"]
    if reasons:
        detail += f"; below the {FLOOR}x floor"
    elif ci[0] <= 1.0:
        detail += "; parity: the 95% CI reaches 1.0, so it is not shown to be faster"
    problem = ceiling_problem(headline, amdahl.get("amdahl_ceiling"))
    if problem:
        detail += f"; {problem}"
    noisy = [p for p in measured if p["noisy"]]
    inconclusive = ""
    if noisy:
        spreads = [(v, p["dataset"]) for p in noisy for v in p["spread"].values() if v is not None]
        widest = "spread {:.1%} on {}".format(*max(spreads)) if spreads else f"one pass only on {noisy[0]['dataset']}"
        inconclusive = f"noisy: {widest}, CI {ci[0]:.3f}–{ci[1]:.3f}"
        cut = [f"{p['dataset']}: {p['attempt_not_started']}" for p in noisy if p.get("attempt_not_started")]
        if cut:
            inconclusive += f" ({'; '.join(cut)})"
    return Conclusion(reasons, detail, headline, ci, speedups, amdahl, [p["dataset"] for p in noisy], inconclusive)


def ceiling_problem(headline: float | None, ceiling: float | None) -> str:
    """The flag of a headline above its Amdahl ceiling (beyond the regression band), or ""."""
    if headline is None or not ceiling or headline <= ceiling * (1 + REGRESSION_BAND):
        return ""
    return (f"measurement problem: the headline {headline:.2f}x is above the Amdahl ceiling {ceiling:.2f}x that "
            "speeding up the hotspot alone can give (the hotspot clocks do not time the same work in both variants, "
            "or the candidate changed more than the hotspot)")


def parity(status: str, ci: list[float] | None) -> bool:
    """An admitted (or self-checked, downgraded) result whose 95% CI reaches 1.0."""
    return status in ("admitted", "downgraded", "self-checked") and bool(ci) and ci[0] is not None and ci[0] <= 1.0


def state_after(verdict: str, reasons: list[str], headline: float | None, detail: str) -> tuple[str, str]:
    """The application's state after a gate verdict, for `appgate run` as for the App Agent's M4:
    INTEGRATED (admitted), RESEARCH (the candidate failed, or passed its own check only),
    DROPPED (correct, below the floor), IN_PROGRESS (inconclusive: run it again when quiet)."""
    if verdict == "admitted":
        return "INTEGRATED", detail
    if verdict == "self-checked":
        return "RESEARCH", f"self-checked only (no output compared): {detail}; declare a comparison to integrate it"
    if verdict == "inconclusive":
        return "IN_PROGRESS", f"inconclusive ({detail}); run the gate again on a quieter machine"
    if headline is None:
        return "RESEARCH", f"the candidate did not pass: {', '.join(reasons)}: {detail}"
    return "DROPPED", f"correct but {detail}"


def rerun_revision(verdict: str, headline: float | None, ci: list[float] | None, standing: float | None,
                   inconclusive: str) -> str | None:
    """The event a re-run of a standing result calls for, as the operator gate's re-run: none when
    inconclusive (noisy); a candidate that failed (no headline) is retracted; a measured headline
    whose whole CI lies below the standing headline less the regression band is downgraded (a
    headline now below the floor included: the re-run measured it, so it stands at that)."""
    if inconclusive:
        return None
    if verdict == "rejected" and headline is None:
        return "ResultRetracted"
    if headline is not None and standing and ci[1] < standing * (1 - REGRESSION_BAND):
        return "ResultDowngraded"
    return None


def spread(samples: list[float], clock_step: float | None = None, baseline_step: float | None = None) -> float | None:
    """(max - min) / median of a variant's pass times: the noise measure of the regression band.

    A clock printed in steps (`clock_step`, this variant's: checks.clock_step) shows a steady time
    near a rounding edge as readings one step apart: on the H200 haccmk's candidate read 0.000034
    and 0.000035 s (a 2.9% "spread") and minisweep's 0.027 and 0.028 s, inconclusive for the print
    format, not for noise. So passes at most the finer of this variant's step and the baseline's
    apart count as no spread (a candidate printing coarser than upstream gains nothing; with
    either step unknown, as for wall time, nothing is excused); a wider range counts whole; and a
    step over STEP_LIMIT of the median is itself the spread at least, whatever the readings
    (constant readings of a coarse clock say nothing)."""
    if len(samples) < 2:
        return None
    median = statistics.median(samples)
    if median <= 0:
        return None
    width = max(samples) - min(samples)
    if clock_step and clock_step > STEP_LIMIT * median:
        return max(width, clock_step) / median
    # the slack: readings' floats differ by a hair more than the step (0.0041 - 0.004 = 1.0000000000000026e-4)
    if clock_step and baseline_step and width <= min(clock_step, baseline_step) * (1 + 1e-6):
        return 0.0
    return width / median


def step_widened_ci(ci: tuple[float, float], medians: dict[str, float], steps: dict[str, float]) -> list[float]:
    """The ratio's CI widened by half a printed step on each variant's median: every pass may read
    the same digits (haccmk's candidate: 34 us in six passes of seven), so the bootstrap cannot
    see the rounding. At most half a median (a clock that coarse is noisy anyway)."""
    b, c = (min(steps.get(v, 0.0) / 2 / medians[v], 0.5) for v in ("baseline", "candidate"))
    return [ci[0] * (1 - b) / (1 + c), ci[1] * (1 + b) / (1 - c)]


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def amdahl_bounds(measured: list[dict]) -> dict:
    """f = the baseline's hotspot share of its time (median over datasets; both clocks in
    seconds, whatever units the program printed); S = the hotspot's own measured speedup
    (geometric mean); ceiling = 1/(1-f+f/S), limit = 1/(1-f)."""
    fractions = [p["hotspot_fraction"] for p in measured if p.get("hotspot_fraction") is not None]
    if not fractions:
        return {}
    f = statistics.median(fractions)
    ratios = [statistics.median(p["hotspot_samples"]["baseline"]) / statistics.median(p["hotspot_samples"]["candidate"])
              for p in measured if p["hotspot_samples"].get("baseline") and p["hotspot_samples"].get("candidate")
              and statistics.median(p["hotspot_samples"]["candidate"]) > 0]
    s = geomean(ratios) if ratios else None
    return {
        "hotspot_fraction": f, "hotspot_speedup": s,
        "amdahl_ceiling": 1.0 / (1.0 - f + f / s) if s else None,
        "amdahl_limit": 1.0 / (1.0 - f) if f < 1.0 else None,
    }
