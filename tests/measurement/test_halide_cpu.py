"""The "halide" baseline of the CPU backend (measurement.backends.halide_cpu), judged by the
gate's own checks (check_plan: odd shape, fresh and equal coefficients, guard pages both ends)."""
from __future__ import annotations

import pytest

# The device machine carries no Halide wheel, only the AOT-compiled pipelines (docs/gpu.md).
pytest.importorskip("halide")

from measurement.backends import cpu, halide_algorithm  # noqa: E402
from measurement.backends.base import Variant  # noqa: E402
from measurement.harness.cases import parse_case  # noqa: E402
from measurement.harness.judge import judge_checks  # noqa: E402
from measurement.harness.plan import check_plan  # noqa: E402
from measurement.harness.protocol import check_variant  # noqa: E402


@pytest.mark.parametrize(
    "case_id",
    ["star_1/12x13x14/f16", "box_2/11x12x13/f32", "star2d_3/20x21/f64", "box2d_1/19x23/f16",
     "varcoef_star_2/12x13x14/f64", "diamond_ts3/15x16x17/f32"],
)
def test_the_halide_baseline_passes_the_gate_checks_for_every_type(case_id):
    case = parse_case(case_id)
    specs = check_plan(case, "cpu", seed=11)
    runs = check_variant("cpu", case_id, Variant("halide"), specs)
    correctness = judge_checks(case, specs, runs)
    assert correctness.correct, correctness.detail


def test_the_identity_names_the_schedule_and_whether_a_tuning_run_chose_it(monkeypatch):
    monkeypatch.delenv(cpu.BASELINES_ENV, raising=False)  # every library the backend offers (the suite's default is fewer)
    case = parse_case("diamond_ts2/16x16x16/f64")
    backend = cpu.create()
    assert "halide" in backend.baseline_names(case)
    untuned = backend.prepare(case, Variant("halide"))
    assert untuned.precision == "f64"
    assert untuned.identity["schedule"] == halide_algorithm.default_schedule(case, "cpu")
    assert untuned.identity["tuned"] is False and untuned.identity["version"] == "21.0.0"
    tuned = backend.prepare(case, Variant("halide", schedule="fused_z4"))
    assert tuned.identity["tuned"] is True
    assert tuned.identity["schedule_text"] == halide_algorithm.schedules(case, "cpu")["fused_z4"]
