"""The oracle's inputs (reproducible, never zero), the judge's reading of NaN in an output, and of
the output of every timed launch (each started from a fresh fill, measurement/harness/protocol.py)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from measurement.backends.base import Kernel, Variant, fill_output_poison
from measurement.harness.cases import parse_case
from measurement.harness.judge import check_reference, judge_checks, judge_launches, summarise_timing
from measurement.harness.oracle import INPUT_CHUNKS, TOLERANCE, make_inputs
from measurement.harness.plan import check_plan
from measurement.harness.protocol import CheckRun, TimingSpec, time_variants

STALE_OUTPUT = Path(__file__).parent / "cheats" / "stale_output.c"


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


def test_the_judge_names_the_first_launch_whose_output_still_holds_the_fill():
    case = parse_case("star_1/16x16x16/f32")
    expected = np.linspace(1.0, 2.0, 10)
    good = expected.astype(np.float32)
    stale = good.copy()
    stale[::2] = np.float32(0.75)  # five points left as the harness filled them
    outputs = [np.stack([good, good]), np.stack([good, stale])]
    worst, checked, wrong, detail = judge_launches(case, outputs, [[1.2, -0.9], [0.6, 0.75]], expected)
    assert (checked, wrong) == (4, 1) and worst > TOLERANCE["f32"]
    assert detail.startswith("pass 2, launch 2: error") and "5 of them still the value the harness filled" in detail
    assert judge_launches(case, [np.stack([good, good])], [[1.2, -0.9]], expected)[1:3] == (2, 0)


def test_every_timed_launch_starts_from_a_fresh_fill_and_is_read_back():
    """In-process on the CPU, tiny and unflushed: the honest straightforward kernel's every launch
    is right; the stale-output cheat, which skips the odd planes wherever the output already holds
    a number, is wrong on every launch, the first included."""
    case = parse_case("star_1/12x12x12/f32")
    spec = TimingSpec(passes=2, launches=3, warmup=1, flush=False, seed=5, sample_seed=6, sample_count=500)
    coefficients = tuple(float(c) for c in case.coefficients())
    cheat = Variant("candidate", Kernel(STALE_OUTPUT.read_text(), {"threads": 1}), "candidate")
    run = time_variants("cpu", case.id, [Variant("straightforward"), cheat], coefficients, spec)
    for name in ("straightforward", "candidate"):
        assert [rows.shape[0] for rows in run.launch_outputs[name]] == [3, 3]
        fills = [fill for pass_fills in run.launch_fills[name] for fill in pass_fills]
        assert len(set(fills)) == 6 and all(0.5 <= abs(fill) < 1.5 for fill in fills)
    summary = summarise_timing(case, run, coefficients, spec)
    assert summary["straightforward"].timed_output_ok and summary["straightforward"].launches_wrong == 0
    assert not summary["candidate"].timed_output_ok
    assert (summary["candidate"].launches_checked, summary["candidate"].launches_wrong) == (6, 6)
    assert summary["candidate"].timed_output_detail.startswith("pass 1, launch 1: error")
