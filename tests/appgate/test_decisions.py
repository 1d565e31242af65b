"""The application gate's rules on synthetic datasets, each threshold at its edge (appgate.verdicts):
the all-dataset geometric mean against the 0.98 floor, parity, noisy -> inconclusive, the Amdahl
ceiling and its flag, the verdict's name, the state it leaves and what a re-run revises. The
gate runs on real programs in test_gate.py, test_verdicts.py and test_bundled_apps.py;
benchmarks/mutation_score.py checks that these tests fail when a rule is broken (it runs them
without Django: keep them free of it)."""
from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from appgate.verdicts import (
    FLOOR,
    amdahl_bounds,
    ceiling_problem,
    checks_of,
    conclude,
    geomean,
    parity,
    rerun_revision,
    spread,
    state_after,
    verdict_name,
)


def read_back(text: str) -> str:
    """The same text as a new string object, as a verdict read back from a recorded event is."""
    return "".join(list(text))


def dataset(name: str, speedup: float, ci: tuple[float, float] | None = None, *, noisy: bool = False,
            spreads: dict | None = None, fraction: float | None = None, hotspot: dict | None = None) -> dict:
    """An AppDatasetMeasured payload's fields that the verdict reads."""
    return {"dataset": name, "speedup": speedup, "speedup_ci": list(ci or (speedup * 1.01, speedup * 1.02)),
            "noisy": noisy, "spread": spreads or {"baseline": 0.01, "candidate": 0.01},
            "hotspot_fraction": fraction, "hotspot_samples": hotspot or {}}


def test_the_floor_is_0_98():
    assert FLOOR == 0.98


@pytest.mark.parametrize("speedup, below", [(0.979, True), (0.98, False), (0.981, False), (0.5, True), (5.0, False)])
def test_a_headline_below_the_floor_is_rejected(speedup, below):
    c = conclude([dataset("one", speedup)])
    assert c.reasons == (["below_floor"] if below else [])
    assert ("; below the 0.98x floor" in c.detail) == below
    assert verdict_name(c.reasons, c.inconclusive, self_checked=False) == ("rejected" if below else "admitted")


def test_the_headline_is_the_geometric_mean_of_every_dataset_not_the_best_or_the_average():
    c = conclude([dataset("small", 0.5, (0.4, 0.6)), dataset("large", 1.9, (1.8, 2.0))])
    assert c.headline == pytest.approx(math.sqrt(0.95)) and c.reasons == ["below_floor"]  # the average is 1.2
    assert c.datasets == {"small": 0.5, "large": 1.9}
    assert c.ci == [pytest.approx(math.sqrt(0.4 * 1.8)), pytest.approx(math.sqrt(0.6 * 2.0))]
    assert c.detail.startswith("0.975x all-dataset geometric mean over 2 dataset(s) (95% CI 0.849-1.095)")


@pytest.mark.parametrize("low, shown", [(1.0, True), (0.99, True), (1.0001, False)])
def test_an_admitted_headline_whose_ci_reaches_1_is_parity(low, shown):
    c = conclude([dataset("one", 1.2, (low, 1.3))])
    assert c.reasons == []
    assert ("; parity: the 95% CI reaches 1.0, so it is not shown to be faster" in c.detail) == shown


def test_a_headline_below_the_floor_is_not_called_parity():
    assert "parity" not in conclude([dataset("one", 0.97, (0.9, 1.05))]).detail


def test_a_noisy_dataset_makes_the_verdict_inconclusive_naming_the_widest_spread():
    c = conclude([dataset("quiet", 1.5, (1.4, 1.6)),
                  dataset("a", 1.5, (1.2, 1.9), noisy=True, spreads={"baseline": 0.05, "candidate": 0.03}),
                  dataset("b", 1.5, (1.2, 1.9), noisy=True, spreads={"baseline": 0.04, "candidate": 0.09})])
    assert c.noisy == ["a", "b"] and c.reasons == []
    assert c.inconclusive == f"noisy: spread 9.0% on b, CI {c.ci[0]:.3f}–{c.ci[1]:.3f}"
    assert verdict_name(c.reasons, c.inconclusive, self_checked=False) == "inconclusive"


def test_a_noisy_dataset_of_one_pass_says_so_and_noise_beats_the_floor():
    c = conclude([dataset("one", 0.5, (0.4, 0.6), noisy=True, spreads={"baseline": None, "candidate": None})])
    assert c.inconclusive == "noisy: one pass only on one, CI 0.400–0.600" and c.reasons == ["below_floor"]
    assert verdict_name(c.reasons, c.inconclusive, self_checked=True) == "inconclusive"


def test_of_several_noisy_one_pass_datasets_the_first_is_named():
    c = conclude([dataset(name, 1.5, noisy=True, spreads={"baseline": None, "candidate": None}) for name in ("a", "b")])
    assert c.inconclusive.startswith("noisy: one pass only on a, CI ")


def test_a_quiet_run_is_not_inconclusive():
    c = conclude([dataset("one", 1.5)])
    assert (c.noisy, c.inconclusive) == ([], "")


@pytest.mark.parametrize("reasons, inconclusive, self_checked, name", [
    (["below_floor"], "", False, "rejected"), (["below_floor"], "", True, "rejected"),
    ([], "", True, "self-checked"), ([], "", False, "admitted"), ([], "noisy: ...", False, "inconclusive"),
])
def test_the_verdicts_name(reasons, inconclusive, self_checked, name):
    assert verdict_name(reasons, inconclusive, self_checked) == name


@pytest.mark.parametrize("headline, flagged", [(1.02, False), (1.0201, True), (0.5, False)])
def test_a_headline_more_than_2_percent_above_the_amdahl_ceiling_is_a_measurement_problem(headline, flagged):
    problem = ceiling_problem(headline, 1.0)
    assert bool(problem) == flagged
    if flagged:
        assert problem.startswith(f"measurement problem: the headline {headline:.2f}x is above the Amdahl "
                                  "ceiling 1.00x")


def test_without_a_ceiling_or_a_headline_nothing_is_flagged():
    assert ceiling_problem(5.0, None) == "" and ceiling_problem(None, 1.0) == ""


def test_the_amdahl_ceiling_comes_from_the_median_fraction_and_the_hotspots_own_speedup():
    measured = [dataset("a", 1.3, fraction=0.4, hotspot={"baseline": [4.0, 4.0, 9.0], "candidate": [2.0, 2.0, 1.0]}),
                dataset("b", 1.3, fraction=0.5, hotspot={"baseline": [8.0], "candidate": [1.0]}),
                dataset("c", 1.3, fraction=0.9, hotspot={"baseline": [1.0], "candidate": []})]
    bounds = amdahl_bounds(measured)
    assert bounds["hotspot_fraction"] == 0.5  # the median of 0.4, 0.5, 0.9
    assert bounds["hotspot_speedup"] == pytest.approx(4.0)  # geometric mean of 4/2 and 8/1; c has no candidate clock
    assert bounds["amdahl_ceiling"] == pytest.approx(1 / (1 - 0.5 + 0.5 / 4.0))
    assert bounds["amdahl_limit"] == pytest.approx(2.0)
    c = conclude(measured)
    assert c.amdahl == bounds and "measurement problem" not in c.detail
    flagged = conclude([dict(d, speedup=2.0, speedup_ci=[1.9, 2.1]) for d in measured])
    assert "; measurement problem: the headline 2.00x is above the Amdahl ceiling 1.60x" in flagged.detail


def test_the_hotspots_speedup_is_a_ratio_of_medians_not_a_whole_number():
    bounds = amdahl_bounds([dataset("a", 1.2, fraction=0.6, hotspot={"baseline": [3.0], "candidate": [2.0]})])
    assert bounds["hotspot_speedup"] == pytest.approx(1.5)
    assert bounds["amdahl_limit"] == pytest.approx(2.5)  # 1 / (1 - 0.6)
    assert bounds["amdahl_ceiling"] == pytest.approx(1 / (1 - 0.6 + 0.6 / 1.5))


def test_a_whole_hotspot_has_no_amdahl_limit_and_no_clocks_no_bounds():
    whole = amdahl_bounds([dataset("a", 2.0, fraction=1.0, hotspot={"baseline": [2.0], "candidate": [1.0]})])
    assert whole["amdahl_limit"] is None and whole["amdahl_ceiling"] == pytest.approx(2.0)
    unmeasured = amdahl_bounds([dataset("a", 2.0, fraction=0.5, hotspot={"baseline": [2.0], "candidate": [0.0]})])
    assert unmeasured["hotspot_speedup"] is None and unmeasured["amdahl_ceiling"] is None
    assert amdahl_bounds([dataset("a", 2.0)]) == {}


def test_the_spread_of_a_variants_passes():
    assert spread([2.0, 2.2, 1.8]) == pytest.approx(0.2)
    assert spread([1.0, 3.0, 2.0]) == 1.0 and spread([1.0, 3.0]) == 1.0  # (max - min) / median
    assert spread([0.5, 0.6, 0.4]) == pytest.approx(0.4)  # runs shorter than a second
    assert spread([1.0]) is None and spread([0.0, 0.0]) is None
    assert geomean([2.0, 8.0]) == pytest.approx(4.0)


@pytest.mark.parametrize("status, low, shown", [
    ("admitted", 1.0, True), ("admitted", 1.0001, False), ("downgraded", 0.9, True), ("self-checked", 0.9, True),
    ("rejected", 0.9, False), ("inconclusive", 0.9, False), ("admitted", None, False),
])
def test_parity_is_shown_only_on_a_standing_result(status, low, shown):
    assert parity(status, [low, 1.2]) == shown
    assert not parity(status, None) and not parity(status, [])


@pytest.mark.parametrize("verdict, reasons, headline, state, why", [
    ("admitted", [], 1.5, "INTEGRATED", "1.5x"),
    ("self-checked", [], 1.5, "RESEARCH",
     "self-checked only (no output compared): 1.5x; declare a comparison to integrate it"),
    ("inconclusive", [], 1.5, "IN_PROGRESS", "inconclusive (1.5x); run the gate again on a quieter machine"),
    ("rejected", ["candidate_incorrect", "x"], None, "RESEARCH",
     "the candidate did not pass: candidate_incorrect, x: 1.5x"),
    ("rejected", ["below_floor"], 0.9, "DROPPED", "correct but 1.5x"),
])
def test_the_state_a_verdict_leaves(verdict, reasons, headline, state, why):
    assert state_after(verdict, reasons, headline, "1.5x") == (state, why)
    assert state_after(read_back(verdict), reasons, headline, "1.5x") == (state, why)  # as read from an event


@pytest.mark.parametrize("verdict, headline, upper, inconclusive, kind", [
    ("admitted", 1.9, 1.9599, "", "ResultDowngraded"),  # the whole CI below 2.0 less 2%
    ("admitted", 1.9, 1.9601, "", None),
    ("admitted", 1.9, 1.96, "", None),
    ("rejected", 0.5, 0.6, "", "ResultDowngraded"),  # measured below the floor: it stands at what was measured
    ("rejected", None, None, "", "ResultRetracted"),  # the candidate failed
    ("inconclusive", 0.5, 0.6, "noisy: spread 9.0% on a", None),  # noise revises nothing
    ("inconclusive", None, None, "noisy: spread 9.0% on a", None),
])
def test_an_app_rerun_revises_only_on_conclusive_evidence(verdict, headline, upper, inconclusive, kind):
    ci = None if upper is None else [upper - 0.1, upper]
    assert rerun_revision(verdict, headline, ci, 2.0, inconclusive) == kind
    assert rerun_revision(read_back(verdict), headline, ci, 2.0, inconclusive) == kind


def test_an_app_rerun_of_a_result_without_a_standing_headline_never_downgrades():
    assert rerun_revision("admitted", 0.5, [0.4, 0.6], None, "") is None


@pytest.mark.parametrize("own_check, compare, checks", [
    ({"result_pattern": "PASSED"}, [{"kind": "values"}], ["own_check", "compare"]),
    ({"result_pattern": "PASSED"}, [], ["own_check"]), (None, [{"kind": "values"}], ["compare"]), (None, [], []),
])
def test_the_checks_a_verdict_rests_on(own_check, compare, checks):
    """The manifest's correctness block (test_verdicts.py gates real manifests with each)."""
    correctness = SimpleNamespace(own_check=own_check, compare=compare)
    loaded = SimpleNamespace(manifest=SimpleNamespace(correctness=correctness))
    assert checks_of(loaded) == checks
