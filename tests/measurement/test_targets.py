"""measurement/targets.py: issue 16's targets judged from per-case facts, the rules that the generated
operator tables and the audit site share. The cases are the H200 matrix's (fixtures/matrices/gpu.json),
the fractions and speedups of the sizes its campaign measured (docs/benchmarks/h200_operator_table.md)."""
from __future__ import annotations

import pytest

from measurement.roofline import TARGETS
from measurement.targets import (CaseFacts, WholeRerun, composed_speedup, evaluate, every_case_admitted,
                                 f16_memory_median, geomean_speedup, memory_floor, memory_median, rerun_time, sealing,
                                 temporal, temporal_steps)

STAR_1 = "star_1/512x512x512/f32"
STAR_2 = "star_2/512x512x512/f64"
BOX_2 = "box_2/512x512x512/f32"
BOX_1_F16 = "box_1/512x512x512/f16"
TS4 = "diamond_ts4/512x512x512/f32"
TS8 = "diamond_ts8/512x512x512/f32"
TS1 = "diamond_ts1/512x512x512/f32"


def memory(case: str, fraction: float | None, *, standing: bool = True, precision: str | None = None) -> CaseFacts:
    return CaseFacts(case=case, precision=precision or case.rsplit("/", 1)[1], bound_class="memory-bound",
                     standing=standing, fraction_of_copy=fraction)


def speed(case: str, speedup: float, *, same_precision: bool = True, standing: bool = True) -> CaseFacts:
    return CaseFacts(case=case, precision=case.rsplit("/", 1)[1], bound_class="memory-bound", standing=standing,
                     speedup=speedup, same_precision=same_precision)


def test_the_memory_median_counts_standing_memory_bound_cases_and_the_matrix_needs_every_one():
    facts = [memory(STAR_1, 0.95), memory(STAR_2, 0.93), memory(BOX_2, 0.91), memory(TS8, 0.40, standing=False),
             memory(BOX_1_F16, 0.10)]  # f16 kept apart
    evaluation = memory_median(facts)
    assert evaluation.value == pytest.approx(0.93) and evaluation.value_met is True
    assert evaluation.met is False  # diamond_ts8 has no standing result: over the matrix the target is not met
    assert evaluation.counted == (STAR_1, STAR_2, BOX_2) and evaluation.uncounted == (TS8,)
    assert evaluation.measured == "median 93% over 3 of 4 memory-bound f32 / f64 cases; 1 without a standing result"
    assert memory_median(facts[:3]).met is True
    assert evaluation.threshold == TARGETS["memory_median"]


def test_the_floor_names_every_case_below_it_sorted_by_case_id():
    facts = [memory(STAR_1, 0.79), memory(BOX_2, 0.95), memory(STAR_2, 0.30)]
    evaluation = memory_floor(facts)
    assert evaluation.failing == (STAR_1, STAR_2) and evaluation.met is False and evaluation.value == pytest.approx(0.30)
    assert evaluation.measured == f"minimum 30% ({STAR_2}); 2 of 3 below 80%"
    assert memory_floor([memory(STAR_1, 0.80), memory(BOX_2, 0.95)]).met is True  # at the floor is not below it


def test_f16_cases_have_their_own_median_and_compute_bound_cases_none():
    facts = [memory(BOX_1_F16, 0.86), memory(STAR_1, 0.20),
             CaseFacts(case=BOX_2, precision="f32", bound_class="compute-bound", standing=True, fraction_of_copy=0.1)]
    f16 = f16_memory_median(facts)
    assert (f16.name, f16.value, f16.met, f16.counted) == ("f16_memory_median", 0.86, True, (BOX_1_F16,))
    assert memory_median(facts).counted == (STAR_1,)


def test_without_a_memory_bound_case_the_bandwidth_targets_are_not_recorded():
    unknown = [CaseFacts(case=STAR_1, precision="f32", bound_class="unknown", standing=True, fraction_of_copy=0.9)]
    for evaluation in (memory_median(unknown), memory_floor(unknown), f16_memory_median(unknown)):
        assert evaluation.value is None and evaluation.met is None
        assert evaluation.measured.startswith("not recorded: no ")
    assert memory_floor(unknown).measured == ("not recorded: no f32 / f64 case is classified memory-bound "
                                              "(1 classified unknown: no machine balance)")
    none_standing = memory_median([memory(STAR_1, 0.95, standing=False)])
    assert none_standing.met is False and none_standing.value is None
    assert none_standing.measured == "none of the 1 memory-bound f32 / f64 cases has a standing result"


def test_the_geomean_takes_same_precision_f32_speedups_only_and_is_judged_on_the_mean():
    facts = [speed(STAR_1, 1.34), speed(BOX_2, 4.30), speed("box_1/512x512x512/f32", 3.0, same_precision=False),
             speed(TS8, 1.23, standing=False), speed(STAR_2, 9.0)]  # f64: not in the f32 headline
    evaluation = geomean_speedup(facts)
    assert evaluation.value == pytest.approx((1.34 * 4.30) ** 0.5)
    assert evaluation.counted == (STAR_1, BOX_2) and len(evaluation.uncounted) == 2
    assert evaluation.met is True  # 2.40x >= 2.35x, whatever the cases without a result
    assert evaluation.measured == "2.40x over 2 of 4 f32 cases; 2 without a same-precision standing result"
    assert geomean_speedup([speed(STAR_1, 1.64)]).met is False
    nothing = geomean_speedup([speed(STAR_1, 1.64, standing=False)])
    assert (nothing.value, nothing.met) == (None, False)


def test_temporal_needs_every_diamond_of_four_steps_or_more_standing_over_its_composed_bound():
    ts4_256 = "diamond_ts4/256x256x256/f32"
    facts = [CaseFacts(case=TS1, precision="f32", bound_class="memory-bound", standing=True, composed_speedup=1.0),
             CaseFacts(case=TS4, precision="f32", bound_class="memory-bound", standing=True, composed_speedup=1.633),
             CaseFacts(case=ts4_256, precision="f32", bound_class="memory-bound", standing=True, composed_speedup=1.698),
             CaseFacts(case=TS8, precision="f32", bound_class="memory-bound", standing=False, composed_speedup=0.739)]
    evaluation = temporal(facts)
    assert evaluation.scope == (ts4_256, TS4, TS8)  # T = 1 is no temporal case
    assert evaluation.met is False and evaluation.failing == (TS8,) and evaluation.uncounted == (TS8,)
    assert evaluation.value == pytest.approx(1.633) and evaluation.value_met is True
    assert evaluation.measured == f"{ts4_256} 1.698x, {TS4} 1.633x, {TS8} 0.739x (no standing result)"
    assert temporal(facts[:3]).met is True
    unmeasured = temporal([CaseFacts(case=TS4, precision="f32", bound_class="memory-bound", standing=True)])
    assert unmeasured.met is False and unmeasured.measured == f"{TS4} not measured against a composed bound"
    assert temporal(facts[:1]).met is None and temporal_steps(TS8) == 8 and temporal_steps(STAR_1) is None


def test_the_composed_bound_is_the_hardest_one_the_newest_verdict_timed_itself():
    admitting = {"baselines": {"composed(star_1 admitted x8)": {"speedup": 1.226}, "halide": {"speedup": 1.3}}}
    rerun = {"baselines": {"composed(star_1 admitted x8)": {"speedup": 1.21},
                           "composed(diamond_ts4 admitted x2)": {"speedup": 0.739}}}
    carried = {"baselines": {"composed(diamond_ts4 admitted x2)": {"speedup": 2.0, "carried": True}}}
    left_out = {"left_out": ["composed(star_1 admitted x8)"], "baselines": {"composed(star_1 admitted x8)": {"speedup": 3.0}}}
    assert composed_speedup([admitting, rerun]) == pytest.approx(0.739)
    assert composed_speedup([admitting, rerun, carried, left_out]) == pytest.approx(0.739)  # timed nothing itself
    assert composed_speedup([admitting]) == pytest.approx(1.226)
    assert composed_speedup([{"baselines": {"halide": {"speedup": 1.3}}}]) is None


def test_the_rerun_target_needs_every_standing_result_rerun_within_the_time():
    payload = {"wall_seconds": 212.44, "cases": [STAR_1, BOX_2], "standing": 2, "not_run": [], "counts": {"failed": 0}}
    met = rerun_time(WholeRerun.from_payload(payload))
    assert (met.met, met.value, met.measured) == (True, 212.44, "212.4 s for 2 of 2 standing results")
    late = rerun_time(WholeRerun.from_payload({**payload, "wall_seconds": 301.0}))
    assert late.met is False and late.value_met is False
    cut = rerun_time(WholeRerun.from_payload({**payload, "cases": [STAR_1], "not_run": [BOX_2]}))
    assert cut.met is False and cut.value_met is True and cut.measured.endswith("; 1 left by its deadline")
    failed = rerun_time(WholeRerun.from_payload({**payload, "counts": {"failed": 1}}))
    assert failed.met is False and failed.measured.endswith("; 1 failed")
    missing = rerun_time(None)
    assert (missing.met, missing.value) == (None, None) and missing.measured.startswith("not recorded: ")


def test_a_case_converged_with_a_kernel_and_left_unsealed_fails_the_sealing_target():
    facts = [CaseFacts(case=STAR_1, precision="f32", bound_class="memory-bound", standing=True, sealed=True,
                       sealed_for_standing_kernel=True, converged=True, converged_with_kernel=True),
             CaseFacts(case=BOX_2, precision="f32", bound_class="memory-bound", standing=True, converged=True,
                       converged_with_kernel=True),
             CaseFacts(case=TS8, precision="f32", bound_class="memory-bound", standing=False, converged=True)]
    evaluation = sealing(facts)
    assert evaluation.met is False and evaluation.failing == (BOX_2,) and evaluation.counted == (STAR_1,)
    assert evaluation.measured == ("1 of 2 cases converged with an admitted kernel are sealed; 1 of 3 cases sealed "
                                   "for the kernel that stands now")
    assert sealing(facts[:1]).met is True and sealing(facts[2:]).met is True  # nothing converged with a kernel


def test_every_case_admitted_counts_standing_results():
    facts = [memory(STAR_1, 0.9), memory(TS8, None, standing=False)]
    evaluation = every_case_admitted(facts)
    assert (evaluation.value, evaluation.met, evaluation.uncounted) == (1.0, False, (TS8,))
    assert every_case_admitted(facts[:1]).met is True and every_case_admitted([]).met is None


def test_evaluate_states_every_target_once_in_the_tables_order():
    names = [e.name for e in evaluate([memory(STAR_1, 0.9)], None)]
    assert names == ["admitted", "sealed", "memory_median", "memory_floor", "f16_memory_median", "geomean", "temporal",
                     "rerun_seconds"]
    assert set(TARGETS) <= set(names)
