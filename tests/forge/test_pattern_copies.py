"""benchmarks/pattern_copies.py's copies, run in the CPU emulation of the CUDA kernels: each must copy the whole array
and nothing else, or the walk it times is not a copy's (a marching copy that skipped planes would look fast)."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from measurement.harness.cases import parse_case
from measurement.harness.codegen import cuda_launch_geometry
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
        assert written.all() and np.array_equal(output.view(bits(case)), expected(case, inputs["u"], name)), name


def bits(case) -> np.dtype:
    return np.dtype(f"u{case.dtype.itemsize}")


def expected(case, u: np.ndarray, name: str) -> np.ndarray:
    """u's bits, XORed for `rows3` with the rows above and below (the grid's edge row with itself, so to zero), and for
    `rows3+halo` also with the 16-byte vectors left and right (the edge vector with itself)."""
    value = u.view(bits(case)).copy()
    if not name.startswith("rows3"):
        return value
    plain = u.view(bits(case))
    ny = case.shape[-2]
    rows = np.arange(ny)
    value ^= plain[..., np.maximum(rows - 1, 0), :] ^ plain[..., np.minimum(rows + 1, ny - 1), :]
    if name.startswith("rows3+halo"):
        v = 16 // case.dtype.itemsize
        lanes = np.arange(case.shape[-1])
        starts = lanes - lanes % v
        left = np.where(starts >= v, lanes - v, lanes)
        right = np.where(starts + v < case.shape[-1], lanes + v, lanes)
        value ^= plain[..., left] ^ plain[..., right]
    return value


@pytest.mark.parametrize("case_id", ["star_1/64x1024x1024/f16", "star_1/256x256x256/f32", "star_1/512x512x512/f16",
                                     "star2d_1/16384x16384/f16", "box2d_1/128x8388608/f16"])
def test_the_flat_copy_has_blocks_for_every_streaming_multiprocessor(case_id):
    """Its first H100 run gave it a block a plane: 64 blocks at 64x1024x1024, and 32% of the copy ceiling there."""
    case = parse_case(case_id)
    grid, block, _ = cuda_launch_geometry(case, pattern_copies.flat_copy(case)[1])
    assert pattern_copies.FLAT_BLOCKS <= grid[0] * grid[1] * grid[2] <= 2 * pattern_copies.FLAT_BLOCKS
    assert block == (256, 1, 1)


def test_the_neighbour_reads_are_walked_in_3d_only():
    assert sum(name.startswith("rows3") and "blocks" not in name
               for name, _ in pattern_copies.copies(parse_case("star_1/12x6x64/f16"))) == 4
    assert sum(name.startswith("chunk") for name, _ in pattern_copies.copies(parse_case("star_1/12x6x64/f16"))) == 4
    limited = [(name, launch) for name, (_, launch) in pattern_copies.copies(parse_case("star_1/12x6x64/f16"))
               if "blocks an SM" in name]
    assert [launch["shared_bytes"] // 1024 for _, launch in limited] == [48, 64, 48, 64]
    assert not any(name.startswith(("rows3", "chunk")) for name, _ in pattern_copies.copies(parse_case("box2d_1/40x64/f32")))
    with pytest.raises(ValueError, match="3D only"):
        pattern_copies.march_copy(parse_case("box2d_1/40x64/f32"), 32, 8, 4, "rows3")


def test_the_walks_as_wide_as_a_row_come_only_where_a_row_holds_the_block():
    narrow = [name for name, _ in pattern_copies.copies(parse_case("star_1/12x6x64/f16"))]
    wide = [name for name, _ in pattern_copies.copies(parse_case("star_1/4x4x1024/f16"))]
    assert not any(" 64x4" in name or " 128x2" in name for name in narrow)
    assert sum(" 64x4" in name for name in wide) == 2 and sum(" 128x2" in name for name in wide) == 2
