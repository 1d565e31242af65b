"""The oracle's inputs (reproducible, never zero) and the judge's reading of NaN in an output."""
from __future__ import annotations

import numpy as np
import pytest

from measurement.backends.base import fill_output_poison
from measurement.harness.cases import parse_case
from measurement.harness.judge import check_reference, judge_checks
from measurement.harness.oracle import INPUT_CHUNKS, make_inputs
from measurement.harness.plan import check_plan
from measurement.harness.protocol import CheckRun


@pytest.mark.parametrize("case_id", ["varcoef_star_1/37x43x71/f16", "star2d_1/301x317/f64", "star_1/5x6x7/f32"])
def test_inputs_reproducible_nonzero_and_in_range(case_id):
    case = parse_case(case_id)
    first, again, other = make_inputs(case, 11), make_inputs(case, 11), make_inputs(case, 12)
    for name, values in first.items():
        assert values.dtype == case.dtype and values.shape == case.shape
        assert np.array_equal(values, again[name])
        assert not np.array_equal(values, other[name])
        magnitude = np.abs(values.astype(np.float64))
        assert magnitude.min() >= 0.5 and magnitude.max() <= 1.5
    negative = (first["u"] < 0).mean()
    assert 0.35 < negative < 0.65
    if "a" in first:
        assert (first["a"] > 0).all()


def test_every_slab_gets_its_own_stream():
    """Slabs drawn from one stream would repeat; each of the INPUT_CHUNKS slabs must differ."""
    case = parse_case(f"star_1/{INPUT_CHUNKS * 2}x16x16/f64")
    u = make_inputs(case, 5)["u"]
    slabs = [u[2 * i : 2 * i + 2].tobytes() for i in range(INPUT_CHUNKS)]
    assert len(set(slabs)) == INPUT_CHUNKS


@pytest.mark.parametrize("precision", ["f16", "f32", "f64"])
def test_judge_tells_a_computed_nan_from_the_untouched_poison(precision):
    """On the GPU an out-of-bounds read computes NaN from the inputs' NaN padding; an unwritten
    cell keeps the poison's bits. The judge must name them differently."""
    case = parse_case(f"star_1/12x13x14/{precision}")
    spec = check_plan(case, "cpu", 9)[0]
    shaped = case.with_shape(spec.shape)
    exact = np.full(shaped.shape, np.nan, dtype=case.dtype)
    exact[shaped.region] = check_reference(case, spec).astype(case.dtype)

    def verdict(output):
        run = CheckRun(spec.label, output, True, None, 0.0)
        return judge_checks(case, [spec], [run]).reason

    assert verdict(exact) is None
    unwritten_cell = exact.copy()
    fill_output_poison(unwritten_cell)
    unwritten_cell[shaped.region] = exact[shaped.region]
    unwritten_cell[2, 2, 2] = unwritten_cell[0, 0, 0]  # the poison, copied bit for bit
    assert verdict(unwritten_cell) == "unwritten_output"
    computed = unwritten_cell.copy()
    computed[2, 2, 2] = exact[2, 2, 2]
    computed[3, 3, 3] = np.nan  # numpy's NaN: another bit pattern, as arithmetic on a NaN gives
    assert verdict(computed) == "out_of_bounds"
