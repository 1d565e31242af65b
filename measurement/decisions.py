"""Every rule the operator gate decides by, as pure functions of values already measured.

The services measure (harness children, timing attempts) and record (the ledger); what they
conclude from the numbers is decided here, from plain values, so that each threshold is tested
at its edge on synthetic samples (tests/measurement/test_decisions.py) and mutation-tested
(benchmarks/mutation_score.py, docs/testing.md):

- the timing-attempt rule: time again while the spread exceeds the regression band, up to the
  allowed attempts, and keep the quietest attempt (`Attempts`, also the application gate's);
- which timings a verdict compares, and so which spread decides a repeat (`verdict_spread`);
- (the physics floor, which the harness's judge applies to every timing, and the two thresholds
  are in measurement/harness/rules.py);
- the gate itself (`judge_candidate`): correct, timed outputs right, a 95% CI above the public
  bound, not slower than the prior best beyond the noise of the two timings nor beyond the band;
- a re-run's verdict and the revision it calls for (`rerun_verdict`, `revision`).

Nothing here imports Django, the ledger or a device library.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

from measurement.harness.judge import Correctness, VariantTiming, bootstrap_ratio_ci
from measurement.harness.rules import REGRESSION_BAND

T = TypeVar("T")

# What noise can cause (a slow or impossibly fast median); everything else is a wrong output or
# a kernel that does not run, which no amount of noise explains.
TIMING_REASONS = frozenset({"not_faster_than_public_bound", "impossible_speed"})


class Attempts(Generic[T]):
    """The timing-attempt rule of both gates: iterate to get the next attempt's number while the
    last recorded spread exceeds the regression band and attempts remain; `record` each timed
    attempt. The quietest attempt is kept (the first of equal ones), and the measurement is noisy
    when even that one's spread is above the band.

    An attempt that is not recorded (its timing run failed) still uses up its number."""

    def __init__(self, allowed: int) -> None:
        self.allowed = allowed
        self.spread = float("inf")  # the kept attempt's
        self.kept: T | None = None
        self.quiet = False  # the last recorded attempt was within the band: no more attempts

    def __iter__(self) -> Iterator[int]:
        number = 0
        while number < self.allowed and not self.quiet:
            yield number
            number += 1

    def record(self, spread: float, attempt: T) -> None:
        if self.kept is None or spread < self.spread:
            self.spread, self.kept = spread, attempt
        self.quiet = spread <= REGRESSION_BAND

    @property
    def noisy(self) -> bool:
        return self.spread > REGRESSION_BAND


def verdict_spread(summary: dict[str, VariantTiming], roles: dict[str, str]) -> float:
    """The largest pass spread among the timings a verdict compares: the candidate, the prior
    best and the fastest possible baseline (the bound); `roles` maps each timed variant's name to
    its role. A noisy baseline that cannot be the bound changes no verdict, yet timing again for
    it cost most repeat attempts of the first H200 campaign (fixtures/ledgers/h200_campaign.jsonl:
    cupyx or pystencils above 2% while the candidate and the bound were within 1%). With no
    candidate (baselines only) every baseline counts."""
    compared = [name for name in summary if roles.get(name) != "baseline"]
    if compared:
        possible = [name for name in summary if roles.get(name) == "baseline" and not summary[name].impossible]
        if possible:
            compared.append(min(possible, key=lambda name: summary[name].median))
    return max(summary[name].spread for name in (compared or summary))


def judge_candidate(correctness: Correctness, timing: VariantTiming | None, *, bound: VariantTiming | None,
                    bound_label: str, prior: VariantTiming | None,
                    floor_seconds: Callable[[], float], launch_overhead: float | None,
                    ) -> tuple[list[str], str, float | None, tuple[float, float] | None]:
    """The operator gate on one measured candidate: (reasons, detail, speedup, 95% CI); no reason
    admits. In order: the checks, surviving timing, the physics floor, every timed launch's output,
    a bound to beat; then the speed rule (the CI's lower end above 1) and the prior-best rule: the
    median not more than the regression band slower than the prior best's (timed in the same run),
    nor slower beyond the noise of the two, the 95% CI of their ratio above 1. The band alone let
    session 47's gate replace star_1/512^3 f32's kernel with one 1.9% slower in the same passes (CI
    width 0.1%), and the case's standing speedup fell from 1.376x to 1.351x; a tie within the noise
    still supersedes. `floor_seconds` is called only for an impossible speed's detail."""
    if not correctness.correct:
        return [correctness.reason], correctness.detail, None, None
    if timing is None:
        return ["runtime_error"], "the candidate did not survive timing", None, None
    if timing.impossible:
        return ["impossible_speed"], (f"median {timing.median:.3e} s less the launch overhead {launch_overhead:.3e} s "
                                      f"is below the copy-bandwidth floor {floor_seconds():.3e} s"), None, None
    if not timing.timed_output_ok:
        return ["timed_output_mismatch"], f"output of the timed launches is wrong: {timing.timed_output_detail}", None, None
    if bound is None:
        return ["no_public_bound"], "no baseline was correct and timed on this case", None, None
    speedup = bound.median / timing.median
    ci = bootstrap_ratio_ci(bound.pass_medians, timing.pass_medians)
    reasons = []
    detail = f"{speedup:.3f}x over {bound_label} (95% CI {ci[0]:.3f}-{ci[1]:.3f})"
    if ci[0] <= 1.0:
        reasons.append("not_faster_than_public_bound")
    if prior is not None and (timing.median > prior.median * (1 + REGRESSION_BAND)
                              or bootstrap_ratio_ci(timing.pass_medians, prior.pass_medians)[0] > 1.0):
        reasons.append("regresses_prior_best")
        detail += f"; {timing.median / prior.median - 1:+.1%} against the prior best"
    return reasons, detail, speedup, ci


def rerun_verdict(reasons: list[str], ci: tuple[float, float] | None, noisy_spread: float | None,
                  standing: float | None = None) -> tuple[str, str]:
    """(verdict, why it is inconclusive or ""): reconfirmed | revised | inconclusive.
    `noisy_spread`: the kept timing attempt's spread when the measurement is noisy, else None;
    `standing`: the speedup the result stands at.

    Noise shields a result only as far as it reaches: a noisy measurement whose CI, with its upper
    end raised by the whole spread, still lies below the bound is revised, and one that still lies
    below the standing speedup less the band is reconfirmed (and so downgraded by `revision`). The
    CPU re-gate of issue 15 measured star_1/64x64x64/f16 at 0.187x (CI 0.174–0.210, spread 20.5%)
    and star_4/64x64x64/f32 at 1.029x (CI 1.022–1.071, spread 16.1%; standing 2.666x): no noise of
    20% explains either."""
    if set(reasons) - TIMING_REASONS:
        return "revised", ""
    ci_text = f"CI {ci[0]:.3f}–{ci[1]:.3f}" if ci else ""
    if noisy_spread is not None:
        reach = ci[1] * (1 + noisy_spread) if ci is not None else None
        if reach is not None and "not_faster_than_public_bound" in reasons and reach < 1.0:
            return "revised", ""
        if reach is not None and not reasons and standing and reach < standing * (1 - REGRESSION_BAND):
            return "reconfirmed", ""
        return "inconclusive", ", ".join(filter(None, [f"noisy: spread {noisy_spread:.1%}", ci_text]))
    if "not_faster_than_public_bound" in reasons and ci is not None and ci[1] >= 1.0:
        return "inconclusive", f"{ci_text} spans 1.000, the public bound"
    return ("revised" if reasons else "reconfirmed"), ""


def revision(verdict: str, ci: tuple[float, float] | None, standing: float | None) -> str | None:
    """The event a re-run's verdict calls for: a revised result is retracted; a reconfirmed one
    whose whole CI lies below its standing speedup less the regression band is downgraded."""
    if verdict == "revised":
        return "ResultRetracted"
    if verdict == "reconfirmed" and ci and standing and ci[1] < standing * (1 - REGRESSION_BAND):
        return "ResultDowngraded"
    return None


def kept_spread(attempts: list[dict[str, Any]], noisy: bool) -> float | None:
    """A measurement's `noisy_spread` for rerun_verdict: the kept (least) attempt spread when noisy."""
    return min(attempt["max_spread"] for attempt in attempts) if noisy else None
