"""The Halide algorithm and schedule families (measurement.backends.halide_algorithm), JIT-run
on the CPU against the float64 oracle; the CUDA family is only lowered here (no GPU needed)."""
from __future__ import annotations

import os

import numpy as np
import pytest

# The device machine runs the AOT-compiled pipelines and carries no Halide wheel (docs/gpu.md).
hl = pytest.importorskip("halide")

from measurement.backends import halide_algorithm as ha  # noqa: E402
from measurement.harness.cases import parse_case  # noqa: E402
from measurement.harness.oracle import TOLERANCE, make_inputs, reference, relative_error  # noqa: E402


def realize(case, built, seed=5):
    """Run `built` on fresh inputs into a NaN-filled y cropped to the written region."""
    inputs = make_inputs(case, seed)
    coef = case.coefficients()
    y = np.full(case.shape, np.nan, dtype=case.dtype)
    built.params["u"].set(hl.Buffer(inputs["u"]))
    if "a" in built.params:
        built.params["a"].set(hl.Buffer(inputs["a"]))
    built.params["coef"].set(hl.Buffer(np.ascontiguousarray(coef)))
    out = hl.Buffer(y[case.region])
    out.set_min([case.stencil.halo] * case.stencil.dims)
    built.pipeline.realize(out)
    return y, relative_error(y[case.region], reference(case, inputs, coef))


@pytest.mark.parametrize("case_id", ["star_2/11x13x15/f32", "diamond_ts3/13x15x17/f64", "box2d_1/9x41/f16"])
def test_every_cpu_schedule_computes_the_case_and_writes_only_its_region(case_id):
    case = parse_case(case_id)
    for name in ha.schedules(case, "cpu"):
        y, error = realize(case, ha.build(case, "cpu", name))
        assert error <= TOLERANCE[case.precision], f"{case_id} {name}: error {error:.3g}"
        outside = np.ones(case.shape, dtype=bool)
        outside[case.region] = False
        assert np.isnan(y[outside].astype(np.float64)).all(), f"{case_id} {name} wrote outside the region"


@pytest.mark.parametrize("case_id",
                         ["varcoef_star_1/9x10x11/f16", "box_1/7x8x9/f32", "star2d_4/13x12/f64", "diamond_ts2/9x9x9/f16"])
def test_the_default_schedule_is_correct_for_every_type_and_precision(case_id):
    case = parse_case(case_id)
    built = ha.build(case, "cpu")
    assert built.schedule == ha.default_schedule(case, "cpu")
    assert built.schedule_text == ha.schedules(case, "cpu")[built.schedule]
    _, error = realize(case, built)
    assert error <= TOLERANCE[case.precision]


def test_diamond_builds_one_func_per_time_step_ending_in_the_output():
    built = ha.build(parse_case("diamond_ts4/16x16x16/f32"), "cpu")
    assert [f.name() for f in built.funcs][-1].startswith("out") and len(built.funcs) == 4


def test_an_unknown_schedule_names_the_family():
    case = parse_case("star_1/16x16x16/f32")
    with pytest.raises(KeyError, match="vec_par_z"):
        ha.build(case, "cpu", "no_such_schedule")


def test_every_cuda_schedule_lowers_and_the_autoscheduler_text_is_stable(tmp_path):
    """AOT for the CUDA target runs on any machine; the autoscheduler's text is the identity, so
    two builds in one process (Halide renames the second `out` to `out_1`) must read alike."""
    case = parse_case("diamond_ts2/64x64x64/f32")
    family = ha.schedules(case, "cuda")
    assert any(text.startswith(ha.AUTOSCHEDULE) for text in family.values())
    for name in family:
        built = ha.build(case, "cuda", name)
        built.pipeline.compile_to_static_library(os.fspath(tmp_path / name), list(built.params.values()), name,
                                                 ha.halide_target("cuda"))
        assert (tmp_path / f"{name}.a").stat().st_size > 0
    auto = next(name for name, text in family.items() if text.startswith(ha.AUTOSCHEDULE))
    assert ha.build(case, "cuda", auto).schedule_text == ha.build(case, "cuda", auto).schedule_text
