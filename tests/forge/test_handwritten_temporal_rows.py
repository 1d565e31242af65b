"""`pipe_rows` (forge/handwritten_temporal_rows.py), the pipeline with R rows a thread, is correct
before device time is spent on it: emulated on the CPU by tests/forge/cuda_emulation.py (every
block's threads as real threads at its barriers, warp shuffles at a barrier of the warp), on
shapes that give several blocks in x, y and z, on the vector and the per-lane scalar path, judged
like the gate's checks."""
from __future__ import annotations

import shutil

import pytest

from forge.handwritten_temporal_rows import render_pipe_rows
from measurement.harness.cases import parse_case
from measurement.harness.oracle import TOLERANCE

from .test_handwritten import judged

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ to emulate CUDA kernels on the CPU")


@pytest.mark.parametrize("case_id, width, height, chunk, rows", [
    ("diamond_ts4/21x30x44/f32", 16, 16, 5, 2),  # one warp of 4-lane rows: shuffles
    ("diamond_ts8/26x37x40/f32", 32, 32, 4, 2),  # four warps of 8 rows: the first and last skip steps 8
    ("diamond_ts4/21x30x44/f32", 24, 16, 5, 2),  # 6 lanes a row: x neighbours from the shared row
    ("diamond_ts3/13x14x33/f32", 16, 16, 4, 4),  # 4 rows a thread, odd T and nx: scalar loads
])
def test_rows_a_thread_compute_the_pipeline(case_id, width, height, chunk, rows):
    case = parse_case(case_id)
    source, launch, _ = render_pipe_rows(case, width, height, chunk, rows)
    assert launch["block"] == [width // 4, height // rows, 1]
    for misalign in (False, True):
        assert judged(case, source, launch, misalign) <= TOLERANCE[case.precision], misalign


def test_a_row_that_takes_its_own_values_for_the_row_below_is_caught():
    case = parse_case("diamond_ts4/21x30x44/f32")
    source, launch, _ = render_pipe_rows(case, 16, 16, 5, 2)
    broken = source.replace("cur[s - 1][r + 1][i]", "cur[s - 1][r][i]")
    assert broken != source
    assert judged(case, broken, launch, False) > TOLERANCE[case.precision]


def test_tiles_that_do_not_split_into_rows_or_cases_without_steps_are_refused():
    with pytest.raises(ValueError, match="multiple of 2 rows"):
        render_pipe_rows(parse_case("diamond_ts4/256x256x256/f32"), 64, 25, 32, 2)
    with pytest.raises(ValueError, match="T > 1"):
        render_pipe_rows(parse_case("star_1/256x256x256/f16"), 128, 24, 32, 2)
