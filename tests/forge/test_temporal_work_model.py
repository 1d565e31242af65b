"""benchmarks/temporal_work_model.py: the redundant halo work of a T-step pipeline's tile, and the ceiling it sets on
diamond_ts8 over two launches of the ts4 kernel (docs/forge.md, `pipe`, session 48)."""
from __future__ import annotations

import sys
from pathlib import Path

from forge.handwritten_temporal import check_parameters
from measurement.harness.cases import parse_case

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import temporal_work_model  # noqa: E402

EXPORT = ROOT / "fixtures" / "ledgers" / "h200_campaign.jsonl"


def test_the_redundancy_counts_every_point_each_step_computes():
    # a 16 x 10 tile at T = 4 keeps 8 x 2 outputs; its steps compute 14x8, 12x6, 10x4 and 8x2 points
    assert temporal_work_model.redundancy(4, 16, 10) == (14 * 8 + 12 * 6 + 10 * 4 + 8 * 2) / (4 * 8 * 2)
    assert temporal_work_model.redundancy(8, 64, 32) > temporal_work_model.redundancy(4, 64, 32)


def test_a_tile_the_pipe_model_admits_is_one_the_pipe_renders():
    case = parse_case("diamond_ts8/256x256x256/f32")
    best = temporal_work_model.best_tile(8, temporal_work_model.fits_pipe)["tile"]
    check_parameters(case, *best, 64)  # raises if the tile did not fit the kernel's own limits
    assert not temporal_work_model.fits_pipe(8, 64, 36)  # 576 threads at 122 registers: over the register file


def test_no_tile_lets_ts8_do_less_work_a_point_step_than_the_admitted_ts4_kernels():
    result = temporal_work_model.model(EXPORT)
    assert {case: row["tile"] for case, row in result["admitted_ts4"].items()} == {
        "diamond_ts4/256x256x256/f32": [96, 32], "diamond_ts4/32x2048x2048/f32": [64, 24],
        "diamond_ts4/512x512x512/f32": [64, 24]}
    assert all(ceiling < 1 for ceiling in result["ts8_over_two_ts4_launches_at_equal_cost_a_point_step"].values())
    assert all(row["ts8_least_state_over_two_launches"] < 1 for row in result["admitted_ts4"].values())
