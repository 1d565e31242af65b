"""`tcq` (forge/handwritten_tensor.py) is correct before device time is spent on it, in 3-D and 2-D: run on the CPU by
tests/forge/cuda_emulation.py, whose ldmatrix and m16n8k16 follow the PTX ISA's fragment layouts, on shapes that
take the 16-byte copies (nx a multiple of 8) and shapes that do not, aligned and not, judged like the gate's checks:
within the f16 tolerance and within the floor rule's 5x of the straightforward kernel's own error (its weights are
rounded to halves; the test says by how much that costs)."""
from __future__ import annotations

import shutil

import pytest

from forge.handwritten_tensor import check_case, matrices, render
from measurement.harness.cases import parse_case
from measurement.harness.codegen_cuda import straightforward_cuda, straightforward_cuda_launch
from measurement.harness.oracle import FLOOR_FACTOR, TOLERANCE

from .test_handwritten import judged

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ to emulate CUDA kernels on the CPU")


def floor(case) -> float:
    return judged(case, straightforward_cuda(case), straightforward_cuda_launch(case), False)


SHAPES = [  # (case, warps_x, warps_y, chunk, stages, direct); tests/forge/test_handwritten_gpu.py runs them too
    ("box_1/10x37x64/f16", 2, 2, 4, 3, None),   # 16-byte copies; |dz| = 1 straight into both queue slots
    ("box_1/10x37x45/f16", 2, 2, 4, 3, False),  # nx not a multiple of 8: every cell half by half; a scratch a |dz|
    ("box_2/11x35x80/f16", 4, 1, 3, 4, None),
    ("box_2/11x35x70/f16", 2, 2, 3, 2, True),
    ("star_4/14x41x72/f16", 2, 2, 3, 3, None),  # the x arms reach the window's edge: dx = -4 .. 4
    ("star_1/9x40x128/f16", 8, 1, 5, 4, None),
    ("varcoef_star_1/9x40x64/f16", 2, 2, 5, 3, None),  # each output times its own coefficient before the rounding
    ("varcoef_star_1/9x21x50/f16", 2, 1, 5, 3, None),
    ("box2d_1/100x136/f16", 4, 2, 1, 2, None),  # 2-D: one plane a block, no queue
    ("star2d_1/70x45/f16", 2, 1, 1, 2, None),
]


@pytest.mark.parametrize("case_id, warps_x, warps_y, chunk, stages, direct", SHAPES)
def test_the_tensor_core_queue_is_correct_on_both_paths(case_id, warps_x, warps_y, chunk, stages, direct):
    case = parse_case(case_id)
    source, launch, _ = render(case, warps_x, warps_y, chunk, stages, direct)
    bound = floor(case)
    for misalign in (False, True):
        error = judged(case, source, launch, misalign)
        assert error <= TOLERANCE[case.precision], (misalign, error)
        assert error <= FLOOR_FACTOR[case.precision] * bound, (misalign, error, bound)


def test_weights_rounded_to_halves_cost_less_than_twice_the_straightforward_error():
    """The floor rule allows 5x; box_2 (125 weights) is the worst of the cases above at about 1.7x."""
    case = parse_case("box_2/11x35x80/f16")
    source, launch, _ = render(case, 4, 1, 3, 4)
    assert judged(case, source, launch, False) < 2 * floor(case)


@pytest.mark.parametrize("old, new", [
    ("2 * q - 4 - g", "2 * q - 3 - g"),  # B shifted a column: every product weighs the wrong neighbour
    ("tile + a_at + (1) * PITCH + 8);", "tile + a_at + (1) * PITCH + 16);"),  # the second group's window 8 columns off
    ("qz[(ph + RZ + 1) % N][0]", "qz[(ph + RZ) % N][0]"),  # dz = -1's products into output p instead of p + 1
    ("wait_async<NB - 2>();", "wait_async<NB - 1>();"),  # plane p read before its copies land
])
def test_a_wrong_fragment_window_slot_or_wait_is_caught(old, new):
    case = parse_case("box_1/10x37x64/f16")
    source, launch, _ = render(case, 2, 2, 4, 3)
    assert old in source
    assert judged(case, source.replace(old, new), launch, False) > TOLERANCE[case.precision]


def test_the_matrices_a_plane_multiplies_by():
    """One B a nonzero (|dz|, |dy|): box_1 all four, star_R the in-plane cross and the centre alone above and below."""
    box = matrices(parse_case("box_1/64x64x64/f16"))
    assert sorted(box) == [(0, 0), (0, 1), (1, 0), (1, 1)] and all(-1 not in dx for dx in box.values())
    star = matrices(parse_case("star_4/64x64x64/f16"))
    assert sorted(star) == [(0, 0), (0, 1), (0, 2), (0, 3), (0, 4), (1, 0), (2, 0), (3, 0), (4, 0)]
    assert star[(0, 0)] == [4, 3, 2, 1, 0, 1, 2, 3, 4] and star[(2, 0)] == [-1, -1, -1, -1, 2, -1, -1, -1, -1]


def test_cases_and_parameters_outside_the_design_are_refused_with_the_reason():
    for case_id in ("box_1/64x64x64/f32", "box_4/64x64x64/f16", "star2d_1/256x256/f32", "diamond_ts4/64x64x64/f16"):
        with pytest.raises(ValueError, match="tcq is for"):
            check_case(parse_case(case_id))
    with pytest.raises(ValueError, match="at most 32 warps"):
        render(parse_case("box_1/64x64x64/f16"), 8, 8)
    with pytest.raises(ValueError, match="one plane: chunk 1"):
        render(parse_case("box2d_1/256x256/f16"), 4, 2, chunk=4)
    with pytest.raises(ValueError, match="2 to 8 buffers"):
        render(parse_case("box_1/64x64x64/f16"), 4, 2, stages=9)
