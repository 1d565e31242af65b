"""benchmarks/pattern_copies.py's copies, run in the CPU emulation of the CUDA kernels: each must copy the whole array
and nothing else, or the walk it times is not a copy's (a marching copy that skipped planes would look fast)."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from measurement.harness.cases import parse_case
from measurement.harness.oracle import make_inputs

from .cuda_emulation import emulate

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import pattern_copies  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="the emulation compiles kernels with g++")


@pytest.mark.parametrize("case_id", ["star_1/12x6x64/f16", "star_1/4x4x1024/f16", "star_2/9x5x32/f32",
                                     "box2d_1/40x64/f32", "star_1/7x3x16/f64"])
def test_every_pattern_copy_copies_the_whole_array(case_id):
    case = parse_case(case_id)
    inputs = make_inputs(case, 5)
    made = pattern_copies.copies(case)
    assert [name for name, _ in made][:3] == ["flat", "march 32x8 l" + made[1][0].split(" l")[1], made[2][0]]
    for name, (source, launch) in made:
        output, written = emulate(case, source, launch, inputs, case.coefficients())
        assert written.all() and np.array_equal(output, inputs["u"]), name


def test_the_walks_as_wide_as_a_row_come_only_where_a_row_holds_the_block():
    narrow = [name for name, _ in pattern_copies.copies(parse_case("star_1/12x6x64/f16"))]
    wide = [name for name, _ in pattern_copies.copies(parse_case("star_1/4x4x1024/f16"))]
    assert not any(" 64x4" in name or " 128x2" in name for name in narrow)
    assert sum(" 64x4" in name for name in wide) == 2 and sum(" 128x2" in name for name in wide) == 2
