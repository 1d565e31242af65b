"""The operator gate's rules on synthetic values, each threshold at its edge (measurement.decisions,
measurement/harness/rules.py): the timing-attempt rule, which spread decides a repeat, the physics
floor, the gate's speed and prior-best rules, and a re-run's verdict and revision. The end-to-end
tests (test_gate.py, test_adversarial.py, test_gate_rerun_all.py) run the same functions on real
measurements; benchmarks/mutation_score.py checks that these tests fail when a rule is broken."""
from __future__ import annotations

import pytest

from measurement.decisions import (
    TIMING_REASONS,
    Attempts,
    judge_candidate,
    kept_spread,
    rerun_verdict,
    revision,
    verdict_spread,
)
from measurement.harness.judge import Correctness, VariantTiming
from measurement.harness.rules import IMPOSSIBLE_MARGIN, REGRESSION_BAND, impossible_speed


def timing(median: float, spread: float = 0.0, *, passes: list[float] | None = None, impossible: bool = False,
           output_ok: bool = True, name: str = "candidate") -> VariantTiming:
    """A timing whose pass medians all equal its median unless given: the bootstrap CI of two such
    timings is exactly the ratio of their medians, so the speed rule can be tested at its edge."""
    return VariantTiming(name=name, pass_medians=passes or [median] * 5, median=median, spread=spread,
                         achieved_bandwidth=1.0, fraction_of_copy=0.5, gflops=1.0, impossible=impossible,
                         timed_output_error=0.0 if output_ok else 0.5, timed_output_ok=output_ok,
                         timed_output_detail="" if output_ok else "pass 1, launch 4: error 0.5")


def read_back(text: str) -> str:
    """The same text as a new string object, as a verdict or role read back from a recorded event
    is: a rule must compare strings by value, never by identity."""
    return "".join(list(text))


def no_floor() -> float:
    raise AssertionError("the copy-bandwidth floor is read only for an impossible speed's detail")


def judge(candidate: VariantTiming | None, *, bound: VariantTiming | None = None, prior: VariantTiming | None = None,
          correctness: Correctness | None = None):
    return judge_candidate(correctness or Correctness(True), candidate, bound=bound, bound_label="pystencils 2.0",
                           prior=prior, floor_seconds=no_floor, launch_overhead=1e-6)


# ---- the thresholds ---------------------------------------------------------------------------


def test_the_thresholds_are_two_percent_and_nine_tenths():
    assert (REGRESSION_BAND, IMPOSSIBLE_MARGIN) == (0.02, 0.9)


# ---- the timing-attempt rule (both gates) ------------------------------------------------------


def run_attempts(spreads: list[float], allowed: int = 3) -> tuple[Attempts, list[int]]:
    """Drive the rule as the services do: one attempt per number it yields, each recorded."""
    attempts: Attempts[int] = Attempts(allowed)
    numbers = []
    for number in attempts:
        numbers.append(number)
        attempts.record(spreads[number], number)
    return attempts, numbers


def test_a_quiet_first_attempt_is_the_only_one():
    attempts, numbers = run_attempts([0.01, 0.001, 0.001])
    assert numbers == [0] and attempts.kept == 0 and not attempts.noisy


def test_a_spread_of_exactly_the_band_is_quiet_and_just_above_it_is_noisy():
    attempts, numbers = run_attempts([0.02, 0.5, 0.5])
    assert numbers == [0] and not attempts.noisy and attempts.spread == 0.02
    attempts, numbers = run_attempts([0.0201, 0.0201, 0.0201])
    assert numbers == [0, 1, 2] and attempts.noisy


def test_noisy_after_three_attempts_keeps_the_least_spread_not_the_last():
    attempts, numbers = run_attempts([0.09, 0.03, 0.05, 0.0])  # a fourth would be quiet: never timed
    assert numbers == [0, 1, 2]
    assert (attempts.kept, attempts.spread, attempts.noisy) == (1, 0.03, True)


def test_a_quiet_attempt_after_noisy_ones_ends_the_timing_and_is_kept():
    attempts, numbers = run_attempts([0.3, 0.015, 0.001])
    assert numbers == [0, 1] and (attempts.kept, attempts.noisy) == (1, False)


def test_of_equally_noisy_attempts_the_first_is_kept():
    attempts, _ = run_attempts([0.04, 0.04, 0.04])
    assert attempts.kept == 0


def test_a_first_attempt_without_any_spread_is_kept_until_a_measured_one_comes():
    attempts, numbers = run_attempts([float("inf"), float("inf"), 0.07], allowed=3)
    assert numbers == [0, 1, 2] and (attempts.kept, attempts.spread) == (2, 0.07)
    only, _ = run_attempts([float("inf")], allowed=1)
    assert only.kept == 0 and only.noisy


def test_an_attempt_whose_timing_failed_still_uses_up_its_number():
    attempts: Attempts[int] = Attempts(2)
    assert list(attempts) == [0, 1] and attempts.kept is None
    assert list(Attempts(0)) == []


def test_the_kept_spread_of_a_noisy_measurement_is_its_least():
    tried = [{"max_spread": 0.09}, {"max_spread": 0.03}, {"max_spread": 0.05}]
    assert kept_spread(tried, True) == 0.03
    assert kept_spread(tried, False) is None


# ---- which timings decide a repeat -------------------------------------------------------------


ROLES = {"straightforward": "baseline", "cupyx.ndimage": "baseline", "candidate": "candidate"}


def test_only_the_timings_a_verdict_compares_decide_a_repeat():
    """A noisy slow baseline causes no repeat; a noisy candidate, prior best or bound does."""
    quiet = {"straightforward": timing(1.0, 0.01), "cupyx.ndimage": timing(4.0, 0.30), "candidate": timing(0.5, 0.005)}
    assert verdict_spread(quiet, ROLES) == 0.01
    assert verdict_spread({**quiet, "straightforward": timing(1.0, 0.05)}, ROLES) == 0.05
    assert verdict_spread({**quiet, "candidate": timing(0.5, 0.04)}, ROLES) == 0.04
    prior = {**quiet, "prior_best": timing(0.6, 0.07)}
    assert verdict_spread(prior, {**ROLES, "prior_best": "prior_best"}) == 0.07
    # an impossible baseline is never the bound: the next fastest one is
    impossible_fast = {**quiet, "straightforward": timing(0.1, 0.5, impossible=True)}
    assert verdict_spread(impossible_fast, ROLES) == 0.30
    # baselines only: every one counts
    assert verdict_spread({k: v for k, v in quiet.items() if k != "candidate"}, ROLES) == 0.30
    # roles read back from events
    assert verdict_spread(quiet, {name: read_back(role) for name, role in ROLES.items()}) == 0.01


def test_with_every_baseline_impossible_the_candidates_own_spread_decides():
    summary = {"straightforward": timing(0.1, 0.5, impossible=True), "candidate": timing(0.5, 0.01)}
    assert verdict_spread(summary, ROLES) == 0.01


# ---- the physics floor -------------------------------------------------------------------------


def test_a_median_at_nine_tenths_of_the_floor_is_possible_and_below_it_impossible():
    assert not impossible_speed(0.9, 0.0, 1.0)  # exactly the margin: possible
    assert impossible_speed(0.9, 0.0, 1.0 + 1e-9)
    assert not impossible_speed(1.0, 0.0, 1.0)


def test_the_launch_overhead_is_taken_off_the_median_and_the_copy_before_the_floor_rule():
    assert impossible_speed(0.94, 0.5, 1.0)  # 0.44 s of work against the copy's 0.5 s: 0.45 s at the margin
    assert not impossible_speed(0.96, 0.5, 1.0)
    assert not impossible_speed(1.0, 0.5, 1.0)
    assert not impossible_speed(8.80e-6, 2.66e-6, 6.98e-6)  # the H200's star_1/128^3 f32 at 79% of its copy


@pytest.mark.parametrize("overhead", [0.0, 0.05, 0.2, 0.39, 0.7, 1.0])
def test_a_kernel_no_faster_than_the_copy_is_never_impossible(overhead):
    """Taken off the median alone, an overhead over a tenth of the floor called a kernel slower than the copy
    impossible (the H200's star_1/128^3 f32: 8.96 us against a 6.98 us copy, 2.66 us of it the overhead)."""
    assert not impossible_speed(1.0, overhead, 1.0)


def test_an_overhead_longer_than_the_floor_is_not_taken_off():
    assert impossible_speed(0.99, 1.0, 1.0)  # an overhead as long as the floor still comes off: less than no work
    assert not impossible_speed(1.5, 1.0 + 1e-9, 1.0)  # a longer one is noise larger than the work
    assert not impossible_speed(9.5, 9.0, 1.0)  # 0.5 s of "work" left, but the overhead swamps it
    assert impossible_speed(0.85, 9.0, 1.0)  # the median alone below the floor stays impossible


# ---- the gate ----------------------------------------------------------------------------------


def test_a_failed_check_is_the_verdict_and_nothing_is_timed():
    failed = Correctness(False, "mismatch", "main: mismatch (error 0.3, tolerance 0.0001)")
    assert judge(timing(1.0), bound=timing(2.0), correctness=failed) == (
        ["mismatch"], "main: mismatch (error 0.3, tolerance 0.0001)", None, None)


def test_a_candidate_that_did_not_survive_timing_is_a_runtime_error():
    assert judge(None, bound=timing(2.0)) == (["runtime_error"], "the candidate did not survive timing", None, None)


def test_an_impossible_speed_is_rejected_with_the_floor_it_beat():
    reasons, detail, speedup, ci = judge_candidate(
        Correctness(True), timing(1e-4, impossible=True, output_ok=False), bound=timing(1.0), bound_label="scipy",
        prior=None, floor_seconds=lambda: 2e-3, launch_overhead=5e-6)
    assert (reasons, speedup, ci) == (["impossible_speed"], None, None)  # before the timed outputs are read
    assert detail == ("median 1.000e-04 s less the launch overhead 5.000e-06 s is below the copy-bandwidth floor "
                      "2.000e-03 s")


def test_a_wrong_timed_output_is_rejected_even_when_fast():
    assert judge(timing(0.1, output_ok=False), bound=timing(1.0)) == (
        ["timed_output_mismatch"], "output of the timed launches is wrong: pass 1, launch 4: error 0.5", None, None)


def test_without_a_correct_timed_baseline_there_is_no_bound_to_beat():
    assert judge(timing(0.1)) == (["no_public_bound"], "no baseline was correct and timed on this case", None, None)


def test_a_ci_whose_lower_end_is_1_is_not_faster_than_the_bound():
    reasons, detail, speedup, ci = judge(timing(1.0), bound=timing(1.0))
    assert reasons == ["not_faster_than_public_bound"] and speedup == 1.0 and ci == (1.0, 1.0)
    assert detail == "1.000x over pystencils 2.0 (95% CI 1.000-1.000)"


def test_a_ci_just_above_1_admits():
    reasons, _, speedup, ci = judge(timing(1.0), bound=timing(1.0001))
    assert reasons == [] and speedup == pytest.approx(1.0001) and ci[0] > 1.0


def test_the_speedup_is_the_bounds_median_over_the_candidates_and_the_ci_comes_from_the_pass_medians():
    candidate = timing(0.5, passes=[0.5, 0.5, 0.5, 0.5, 0.5])
    wide_bound = timing(1.0, passes=[0.4, 0.45, 1.0, 1.0, 1.0])  # its passes reach below the candidate's
    reasons, detail, speedup, ci = judge(candidate, bound=wide_bound)
    assert speedup == 2.0 and ci[0] < 1.0 < ci[1] and reasons == ["not_faster_than_public_bound"]
    assert detail == f"2.000x over pystencils 2.0 (95% CI {ci[0]:.3f}-{ci[1]:.3f})"


# a prior best whose passes spread 4% either side of its median: a candidate's ratio to it is noise within that
NOISY_PRIOR = [0.96, 0.98, 1.0, 1.02, 1.04]


@pytest.mark.parametrize("median, regresses", [(1.0199, False), (1.02, False), (1.0201, True), (0.5, False)])
def test_a_median_more_than_2_percent_slower_than_the_prior_best_regresses_however_noisy(median, regresses):
    candidate = timing(median, passes=[median * p for p in NOISY_PRIOR])
    reasons, detail, _, _ = judge(candidate, bound=timing(10.0), prior=timing(1.0, passes=NOISY_PRIOR[::-1]))
    assert reasons == (["regresses_prior_best"] if regresses else [])
    assert detail.endswith(f"; {median - 1:+.1%} against the prior best") == regresses


@pytest.mark.parametrize("median, regresses", [(1.0, False), (1.0001, True), (1.019, True), (0.999, False)])
def test_a_candidate_slower_than_the_prior_best_beyond_the_noise_regresses_within_the_band(median, regresses):
    """Session 47: star_1/512^3 f32's new kernel ran 1.9% slower than the kernel it replaced, every pass alike."""
    reasons, _, _, _ = judge(timing(median), bound=timing(10.0), prior=timing(1.0))
    assert reasons == (["regresses_prior_best"] if regresses else [])


def test_a_candidate_slower_than_the_prior_best_within_the_noise_supersedes_it():
    candidate = timing(1.01, passes=[1.01 * p for p in NOISY_PRIOR])
    reasons, _, _, _ = judge(candidate, bound=timing(10.0), prior=timing(1.0, passes=NOISY_PRIOR[::-1]))
    assert reasons == []


def test_without_a_prior_best_nothing_regresses_and_both_rules_can_fail_together():
    assert judge(timing(5.0), bound=timing(10.0))[0] == []
    reasons, detail, _, _ = judge(timing(5.0), bound=timing(4.0), prior=timing(2.0))
    assert reasons == ["not_faster_than_public_bound", "regresses_prior_best"]
    assert detail == "0.800x over pystencils 2.0 (95% CI 0.800-0.800); +150.0% against the prior best"


# ---- a re-run's verdict and revision -----------------------------------------------------------


def test_noise_explains_only_a_slow_or_impossibly_fast_median():
    assert TIMING_REASONS == {"not_faster_than_public_bound", "impossible_speed"}


@pytest.mark.parametrize("reasons, ci, spread, verdict, why", [
    (["mismatch"], None, 0.37, "revised", ""),  # a wrong output retracts, noisy timing or not
    (["timed_output_mismatch"], None, 0.37, "revised", ""),
    (["timed_output_mismatch", "not_faster_than_public_bound"], (0.5, 0.9), None, "revised", ""),
    ([], (1.2, 1.4), 0.37, "inconclusive", "noisy: spread 37.0%, CI 1.200–1.400"),
    # issue 14's two one-click retractions, now inconclusive: star_1/64x64x64/f32 (noisy) and box2d_1/512x512/f32
    (["not_faster_than_public_bound"], (0.308, 0.764), 0.5, "inconclusive", "noisy: spread 50.0%, CI 0.308–0.764"),
    (["not_faster_than_public_bound"], (0.070, 26.156), None, "inconclusive",
     "CI 0.070–26.156 spans 1.000, the public bound"),
    (["not_faster_than_public_bound"], (0.5, 1.0), None, "inconclusive",
     "CI 0.500–1.000 spans 1.000, the public bound"),
    (["not_faster_than_public_bound"], (0.5, 0.9999), None, "revised", ""),  # quiet, and wholly below the bound
    # noisy, but below the bound by more than the noise: the CPU re-gate's star_1/64x64x64/f16 (issue 15)
    (["not_faster_than_public_bound"], (0.174, 0.210), 0.205, "revised", ""),
    (["not_faster_than_public_bound"], (0.70, 0.85), 0.20, "inconclusive", "noisy: spread 20.0%, CI 0.700–0.850"),
    (["impossible_speed"], None, 0.1, "inconclusive", "noisy: spread 10.0%"),
    (["impossible_speed"], None, None, "revised", ""),
    ([], (1.9, 2.1), None, "reconfirmed", ""),
    ([], None, None, "reconfirmed", ""),
])
def test_a_rerun_revises_only_on_conclusive_evidence(reasons, ci, spread, verdict, why):
    assert rerun_verdict(reasons, ci, spread) == (verdict, why)


def test_noise_reaches_as_far_as_the_ci_raised_by_the_whole_spread():
    # 0.8 raised by 25% is exactly 1.0: within the noise's reach of the bound
    assert rerun_verdict(["not_faster_than_public_bound"], (0.5, 0.8), 0.25)[0] == "inconclusive"
    assert rerun_verdict(["not_faster_than_public_bound"], (0.5, 0.7999), 0.25)[0] == "revised"


def test_noise_cannot_shield_a_fall_far_below_the_standing_speedup():
    # the CPU re-gate's star_4/64x64x64/f32 (issue 15): 1.029x, CI 1.022-1.071, spread 16.1%, standing 2.666x
    assert rerun_verdict([], (1.022, 1.071), 0.161, standing=2.666) == ("reconfirmed", "")
    assert revision("reconfirmed", (1.022, 1.071), 2.666) == "ResultDowngraded"
    # within reach of the noise: 1.071 raised by 16.1% is 1.243, above 1.2 less the band
    assert rerun_verdict([], (1.022, 1.071), 0.161, standing=1.2)[0] == "inconclusive"
    # the edge: 1.0 raised by 25% is 1.25; 1.25 / 0.98 = 1.2755...
    assert rerun_verdict([], (0.9, 1.0), 0.25, standing=1.2756)[0] == "reconfirmed"
    assert rerun_verdict([], (0.9, 1.0), 0.25, standing=1.2754)[0] == "inconclusive"
    # exactly at the edge: 0.98 raised by 100% is 1.96, 2.0 less the band is 1.96: not below it
    assert rerun_verdict([], (0.5, 0.98), 1.0, standing=2.0)[0] == "inconclusive"
    # a noisy re-run that found a reason is never reconfirmed by a fall below the standing speedup
    assert rerun_verdict(["impossible_speed"], (1.022, 1.071), 0.161, standing=2.666)[0] == "inconclusive"
    assert rerun_verdict([], (1.022, 1.071), 0.161, standing=None)[0] == "inconclusive"


@pytest.mark.parametrize("upper, kind", [
    (1.9599, "ResultDowngraded"), (1.96, None), (1.9601, None), (1.97, None), (1.5, "ResultDowngraded"),
])
def test_only_a_whole_ci_below_the_standing_value_less_2_percent_downgrades(upper, kind):
    assert revision("reconfirmed", (1.0, upper), 2.0) == kind


def test_only_a_reconfirmed_verdict_downgrades_and_only_a_revised_one_retracts():
    assert revision("inconclusive", (0.3, 0.7), 2.0) is None
    assert revision("revised", None, 2.0) == "ResultRetracted"
    assert revision("reconfirmed", None, 2.0) is None
    assert revision("reconfirmed", (1.0, 1.5), None) is None
    assert revision(read_back("revised"), None, 2.0) == "ResultRetracted"
    assert revision(read_back("reconfirmed"), (1.0, 1.5), 2.0) == "ResultDowngraded"
