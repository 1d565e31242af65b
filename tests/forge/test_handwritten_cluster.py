"""The cluster pipeline (`cpipe`, forge/handwritten_cluster.py) is correct before device time is spent on it:
run on the CPU by tests/forge/cuda_emulation.py, every block of a cluster a set of fibers of one scheduler
(its own barrier and shared memory, the cluster's barrier across them), on shapes with several clusters in
x, y and z and a partial last cluster, judged like the gate's checks; with each of its three exchanges of the
edge rows (session 37's `signal` on mbarriers across the cluster as well)."""
from __future__ import annotations

import shutil

import numpy as np
import pytest

from forge.handwritten_cluster import check_cluster, cluster_tile_y, render_cluster_pipe
from measurement.harness.cases import parse_case
from measurement.harness.codegen import cuda_launch_geometry
from measurement.harness.oracle import TOLERANCE

from .cuda_emulation import emulate
from .test_handwritten import judged

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ to emulate CUDA kernels on the CPU")


SHAPES = [  # (case, width, height, cluster, chunk, shuffle); tests/forge/test_handwritten_gpu.py runs them too
    ("diamond_ts8/26x37x40/f32", 24, 8, 4, 4, False),  # blocks of 8 rows, shorter than the 2T = 16 of the y halo
    ("diamond_ts8/26x37x40/f32", 32, 8, 4, 4, True),   # x neighbours by shuffles (8 lanes a row)
    ("diamond_ts4/21x30x44/f32", 16, 6, 3, 5, False),  # 3 blocks a cluster; the grid holds a cluster beyond the rows
    ("diamond_ts4/21x30x44/f32", 16, 8, 2, 5, True),
    ("diamond_ts4/12x20x136/f32", 128, 4, 4, 3, True),  # 32 lanes a row: each warp one row, as 128 x 16 on the H200
]


@pytest.mark.parametrize("case_id, width, height, cluster, chunk, shuffle", SHAPES)
@pytest.mark.parametrize("exchange", ["push", "pull", "signal"])
def test_the_cluster_pipeline_is_correct_on_both_paths(case_id, width, height, cluster, chunk, shuffle, exchange):
    case = parse_case(case_id)
    source, launch, _ = render_cluster_pipe(case, width, height, cluster, chunk, shuffle=shuffle, exchange=exchange)
    assert f"__cluster_dims__(1, {cluster}, 1)" in source
    for misalign in (False, True):
        assert judged(case, source, launch, misalign) <= TOLERANCE[case.precision], misalign


@pytest.mark.parametrize("exchange", ["push", "signal"])
def test_the_cluster_pipeline_marching_in_pairs_is_correct(exchange):
    """With pipe's `pair` (two iterations a body, forge/handwritten_temporal.py) under each exchange's barrier."""
    for case_id, width, height, cluster, chunk, shuffle in SHAPES[::2]:
        case = parse_case(case_id)
        source, launch, _ = render_cluster_pipe(case, width, height, cluster, chunk, shuffle=shuffle, exchange=exchange,
                                                pair=True)
        assert "phase_t<1>" in source
        assert judged(case, source, launch, False) <= TOLERANCE[case.precision], case_id


@pytest.mark.parametrize("old, new", [
    ("if (push_up || push_down) far[at] = f;", ""),  # the edge rows not pushed: the halo rows hold nothing
    ("        cluster_sync();\n    }", "        __syncthreads();\n    }"),  # the block's barrier only: a neighbour's rows read early
])
def test_a_cluster_pipeline_that_skips_its_exchange_is_caught(old, new):
    case = parse_case("diamond_ts8/26x37x40/f32")
    source, launch, _ = render_cluster_pipe(case, 24, 8, 4, 4, shuffle=False)
    assert old in source
    assert judged(case, source.replace(old, new), launch, False) > 1e-3


@pytest.mark.parametrize("old, new", [
    # the edge rows read the ring before the neighbour's push of that step has arrived
    ("            if ((from_above || from_below) && it > 0) bar_wait_cluster(full + (s - 1) * 3 + bp, seen);\n", ""),
    ("far[(s * 3 + b) * 2 * TX] = f; ", ""),  # arrivals without the row: the ring holds nothing
    ("bp = (it + 2) % 3;", "bp = it % 3;"),  # this iteration's buffer, not the last one's
    ("const unsigned seen = (unsigned)((it - 1) / 3) & 1u;", "const unsigned seen = (unsigned)((it + 2) / 3) & 1u;"),
])
def test_a_signalled_exchange_that_reads_early_or_waits_wrong_is_caught(old, new):
    """Each mistake reads a row that is not there yet (wrong results) or waits for a phase no one completes
    (the emulation reports the deadlock)."""
    case = parse_case("diamond_ts8/26x37x40/f32")
    source, launch, _ = render_cluster_pipe(case, 24, 8, 4, 4, shuffle=False, exchange="signal")
    assert old in source
    try:
        error = judged(case, source.replace(old, new), launch, False)
    except AssertionError as failure:
        assert "deadlocked" in str(failure)
    else:
        assert error > 1e-3


def test_the_grid_is_whole_clusters_and_covers_every_output_row():
    for case_id, height, cluster in (("diamond_ts8/512x512x512/f32", 32, 2), ("diamond_ts8/512x512x512/f32", 16, 8),
                                     ("diamond_ts4/21x30x44/f32", 6, 3)):
        case = parse_case(case_id)
        _, launch, _ = render_cluster_pipe(case, 64 if case.shape[2] > 64 else 16, height, cluster, 4, shuffle=False)
        grid = cuda_launch_geometry(case, launch)[0]
        t = case.stencil.time_steps
        assert grid[1] % cluster == 0
        assert grid[1] // cluster * (cluster * height - 2 * t) >= case.shape[1] - 2 * t
    assert cluster_tile_y(parse_case("diamond_ts8/512x512x512/f32"), 32, 2) == 24  # 22 blocks: 11 clusters of 48 rows


def test_the_emulation_refuses_a_grid_that_is_no_whole_number_of_clusters():
    case = parse_case("diamond_ts8/26x37x40/f32")
    source, launch, _ = render_cluster_pipe(case, 24, 8, 4, 4, shuffle=False)
    with pytest.raises(AssertionError, match="no whole number of clusters"):
        emulate(case, source, {**launch, "tile": [launch["tile"][0], 37, 4]}, {"u": np.zeros(case.shape, "f4")},
                case.coefficients())


def test_parameters_outside_the_design_are_refused_with_the_reason():
    ts8 = parse_case("diamond_ts8/512x512x512/f32")
    with pytest.raises(ValueError, match="2 to 8 blocks"):
        check_cluster(ts8, 64, 32, 16, 128)
    with pytest.raises(ValueError, match="more registers"):
        check_cluster(ts8, 64, 64, 2, 128)
    with pytest.raises(ValueError, match="diamond_tsT"):
        check_cluster(parse_case("star_1/64x64x64/f32"), 64, 32, 2, 16)
    with pytest.raises(ValueError, match="whole number of clusters"):
        check_cluster(parse_case("diamond_ts8/26x37x40/f32"), 32, 8, 3, 4)
    with pytest.raises(ValueError, match="one of push, pull, signal"):
        check_cluster(ts8, 64, 32, 2, 128, "broadcast")
