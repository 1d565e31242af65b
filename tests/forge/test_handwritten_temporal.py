"""The 3.5-D pipeline (`pipe`, forge/handwritten_temporal.py) is correct before device time is spent
on it: run on the CPU by tests/forge/cuda_emulation.py with every block's threads as real threads
meeting at its barriers, on shapes that give several blocks in x, y and z (partial tiles and
chunks at the far edges), on the vector and the per-lane scalar path, judged like the gate's
checks (tests/forge/test_handwritten.py's `judged`)."""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from forge.candidates import matrix_candidates
from forge.handwritten_temporal import check_parameters, default_parameters, pair_candidates, render_pipe
from measurement.harness.cases import parse_case
from measurement.harness.codegen import DEFAULT_CUDA_LAUNCH, straightforward_cuda
from measurement.harness.oracle import FLOOR_FACTOR, TOLERANCE

from .test_handwritten import judged

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import temporal_sweep  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ to emulate CUDA kernels on the CPU")


@pytest.mark.parametrize("case_id, width, height, chunk", [
    ("diamond_ts4/21x30x44/f32", 16, 12, 5),   # 2 x 6 x 3 blocks, the last of each partial
    ("diamond_ts8/26x37x40/f32", 24, 20, 4),   # T = 8: 5 x 9 x 3 blocks
    ("diamond_ts3/13x14x33/f32", 12, 10, 4),   # odd T and nx: the output tile is no multiple of 4, scalar loads
    ("star_1/21x30x44/f16", 16, 12, 5),        # T = 1 in f16: 8-byte loads of four halves, stores packed back
    ("varcoef_star_1/19x27x40/f16", 16, 8, 6),  # times the variable coefficient at the store
    ("varcoef_star_1/11x13x36/f32", 12, 6, 3),
])
def test_the_pipeline_is_correct_on_both_paths(case_id, width, height, chunk):
    case = parse_case(case_id)
    floor = judged(case, straightforward_cuda(case), {k: list(v) for k, v in DEFAULT_CUDA_LAUNCH.items()}, False)
    source, launch, _ = render_pipe(case, width, height, chunk)
    for misalign in (False, True):
        error = judged(case, source, launch, misalign)
        assert error <= TOLERANCE[case.precision], (misalign, error)
        assert error <= max(FLOOR_FACTOR[case.precision] * floor, 1e-15), (misalign, error, floor)


@pytest.mark.parametrize("case_id, width, height, chunk", [
    ("star_1/21x30x44/f16", 16, 12, 5),
    ("diamond_ts4/21x30x44/f32", 16, 12, 5),
])
def test_planes_loaded_further_ahead_compute_the_same(case_id, width, height, chunk):
    case = parse_case(case_id)
    source, launch, _ = render_pipe(case, width, height, chunk, prefetch=3)
    assert "ahead[3][V]" in source and source != render_pipe(case, width, height, chunk)[0]
    for misalign in (False, True):
        assert judged(case, source, launch, misalign) <= TOLERANCE[case.precision], misalign


BOTH = ((True, False), (False, True), (True, True))


@pytest.mark.parametrize("case_id, width, height, chunk, min_blocks, modes", [
    ("diamond_ts4/21x30x44/f32", 16, 16, 5, 3, BOTH),  # 4 lanes a row, 8 rows a warp: no warp skips at T = 4
    ("diamond_ts8/26x37x40/f32", 32, 20, 4, 1, BOTH),  # 8 lanes a row, 4 rows a warp: the first and last warps skip steps 4-8
    ("diamond_ts2/19x40x30/f32", 64, 8, 6, 2, BOTH),   # 16 lanes a row, 2 rows a warp; nx short of one tile
    ("diamond_ts4/21x30x44/f32", 24, 16, 5, 1, ((False, True),)),  # 6 lanes a row: warps end inside rows 5 and 10
])
def test_shuffles_and_skipped_warps_compute_the_same(case_id, width, height, chunk, min_blocks, modes):
    case = parse_case(case_id)
    for shuffle, skip in modes:
        source, launch, _ = render_pipe(case, width, height, chunk, shuffle=shuffle, skip=skip, min_blocks=min_blocks)
        assert ("__shfl_up_sync" in source) == shuffle and ("live &&" in source) == skip
        for misalign in (False, True):
            assert judged(case, source, launch, misalign) <= TOLERANCE[case.precision], (shuffle, skip, misalign)


@pytest.mark.parametrize("case_id, width, height, chunk, shuffle, skip", [
    ("diamond_ts8/26x37x40/f32", 32, 24, 4, True, False),  # a chunk shorter than the 2T fill: the steady body never runs
    ("diamond_ts4/21x30x44/f32", 24, 16, 5, False, True),
    ("diamond_ts4/21x30x44/f32", 32, 16, 3, True, True),   # 11 output planes in chunks of 3, 3, 3, 2: odd iteration counts
    ("diamond_ts2/19x40x30/f32", 64, 8, 6, True, False),
    ("star_1/12x20x40/f32", 32, 8, 4, True, False),        # T = 1
])
def test_the_march_in_pairs_computes_the_same(case_id, width, height, chunk, shuffle, skip):
    """`pair`: two iterations a body, each phase a constant; the queue's planes swap roles instead of moving."""
    case = parse_case(case_id)
    source, launch, _ = render_pipe(case, width, height, chunk, shuffle=shuffle, skip=skip, pair=True)
    assert "phase_t<1>" in source and "prev[" not in source
    for misalign in (False, True):
        assert judged(case, source, launch, misalign) <= TOLERANCE[case.precision], misalign


@pytest.mark.parametrize("old, new", [
    ("{ q[wb][s - 1][i] = nw[i];", "{ q[rb][s - 1][i] = nw[i];"),  # the newer plane overwritten: roles not swapped
    ("iteration(k + 1, phase_t<1>{}, phase_t<0>{});", "iteration(k + 1, phase_t<0>{}, phase_t<0>{});"),  # a phase repeated
])
def test_a_paired_march_with_a_wrong_role_or_phase_is_caught(old, new):
    """(The fill's test needs no such check: a step computed in the fill anyway works on planes of the chunk's
    unneeded z halo, and the output is the same; the test only saves the work.)"""
    case = parse_case("diamond_ts4/21x30x44/f32")
    source, launch, _ = render_pipe(case, 16, 12, 5, pair=True)
    assert old in source
    assert judged(case, source.replace(old, new), launch, False) > TOLERANCE[case.precision]


def test_a_skip_that_drops_a_needed_row_is_caught():
    """The check above can fail: warps skipping step s one row too early."""
    case = parse_case("diamond_ts8/26x37x40/f32")
    source, launch, _ = render_pipe(case, 32, 20, 4, skip=True)
    broken = source.replace("row_last >= s && row_first < H - s", "row_last > s && row_first < H - s - 1")
    assert broken != source
    assert judged(case, broken, launch, False) > TOLERANCE[case.precision]


def test_shuffles_need_rows_of_whole_power_of_two_lanes():
    case = parse_case("diamond_ts4/256x256x256/f32")
    with pytest.raises(ValueError, match="power-of-two"):
        render_pipe(case, 96, 32, 32, shuffle=True)  # 24 lanes a row
    assert "__launch_bounds__(384, 3)" in render_pipe(case, 64, 24, 32, min_blocks=3)[0]
    assert render_pipe(case, 64, 24, 32, shuffle=False, skip=False)[0] == render_pipe(case, 64, 24, 32)[0]


def test_a_pipeline_with_a_wrong_z_neighbour_is_caught():
    """The check above can fail: a step that takes its own plane for the one below."""
    case = parse_case("diamond_ts4/21x30x44/f32")
    source, launch, _ = render_pipe(case, 16, 12, 5)
    broken = source.replace("prev[s - 1][i] + nw[i]", "cur[s - 1][i] + nw[i]")
    assert broken != source
    assert judged(case, broken, launch, False) > TOLERANCE[case.precision]


def test_parameters_that_leave_no_output_or_overflow_shared_memory_are_refused():
    case = parse_case("diamond_ts8/512x512x512/f32")
    for width, height in ((16, 32), (64, 16), (128, 64)):
        with pytest.raises(ValueError):
            check_parameters(case, width, height, 64)
    for other in ("star_2/64x64x64/f32", "box_1/64x64x64/f16", "star_1/64x64x64/f64", "star2d_1/64x64/f32"):
        with pytest.raises(ValueError):
            check_parameters(parse_case(other), 64, 32, 64)


def test_campaigns_offer_the_pipeline_after_the_octahedron_and_to_f16_star_1_before_planes():
    offered = [c[0].split(":")[0] for c in matrix_candidates(parse_case("diamond_ts8/512x512x512/f32"))]
    assert offered == ["octa", "pipe"]
    # up to T = 4 also the march two iterations a body (session 39's sweep), at the pipe's tile and at 64 x 24
    assert [c[0].split(":")[0] for c in matrix_candidates(parse_case("diamond_ts4/256x256x256/f32"))] == [
        "octa", "pipe", "pipe+pair", "pipe64x24+pair"]
    assert default_parameters(parse_case("diamond_ts8/512x512x512/f32")) == (64, 32, 128)
    offered = [c[0].split(":")[0] for c in matrix_candidates(parse_case("star_1/512x512x512/f16"))]
    assert offered[:5] == ["rows16", "rows8", "short4", "pipe", "planes"]  # then the marching-down variants
    assert "pipe" not in [c[0].split(":")[0] for c in matrix_candidates(parse_case("star_1/512x512x512/f32"))]
    assert default_parameters(parse_case("diamond_ts4/256x256x256/f32")) == (96, 32, 64)


def test_the_paired_candidates_are_the_kernels_the_h200_sweep_timed_fastest():
    """What a campaign gates is byte for byte what session 39's sweep timed (docs/benchmarks/temporal_pair_h200_s39.json):
    each diamond_ts4 case's fastest variant is one of its `pair_candidates`."""
    sweep = json.loads((ROOT / "docs" / "benchmarks" / "temporal_pair_h200_s39.json").read_text())
    ts4 = [row for row in sweep["cases"] if row["case"].startswith("diamond_ts4/")]
    assert len(ts4) == 2
    for row in ts4:
        case = parse_case(row["case"])
        (params,) = [p for label, p, _ in temporal_sweep.pair_variants(case) if label == row["best"]]
        source, launch, _ = render_pipe(case, **params)
        assert (source, launch) in [(c[3], c[1]) for c in pair_candidates(case)], row["best"]
