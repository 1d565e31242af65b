"""The hand-written H200 candidates (forge/handwritten.py) are correct before device time is
spent on them: each is run on the CPU by tests/forge/cuda_emulation.py (its threads are
independent), on an aligned shape (16-byte vector path) and on misaligned arrays (per-lane
scalar path), and judged like the gate's checks: the error within the tolerance and the floor
of the straightforward CUDA kernel, run the same way, and exactly the region written."""
from __future__ import annotations

import shutil

import numpy as np
import pytest

from forge.candidates import matrix_candidates, rows8_fits
from forge.handwritten import render
from measurement.harness.cases import parse_case
from measurement.harness.codegen import DEFAULT_CUDA_LAUNCH, straightforward_cuda
from measurement.harness.oracle import FLOOR_FACTOR, TOLERANCE, make_inputs, reference, relative_error

from .cuda_emulation import emulate

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ to emulate CUDA kernels on the CPU")

# Every type and precision of the GPU matrix at a small shape; x extents a multiple of every V
# (vector path) except where noted, the odd extents of the gate's check B elsewhere.
CASES = [
    "star_1/9x10x64/f32", "star_1/7x9x64/f16", "star_1/37x43x71/f64", "star_2/11x12x64/f64", "star_4/13x15x64/f32",
    "box_1/9x11x64/f16", "box_2/10x12x64/f32", "star2d_1/33x64/f32", "star2d_1/31x37/f16", "box2d_1/29x64/f16",
    "varcoef_star_1/9x11x64/f64", "varcoef_star_1/9x11x64/f16", "diamond_ts1/10x11x32/f32",
    "diamond_ts4/13x14x32/f32", "diamond_ts8/19x21x40/f32", "diamond_ts8/19x20x37/f32",
]


def judged(case, source, launch, misalign):
    inputs = make_inputs(case, 11)
    coefficients = case.coefficients()
    output, written = emulate(case, source, launch, inputs, coefficients, misalign=misalign)
    expected = np.zeros(case.shape, dtype=bool)
    expected[case.region] = True
    assert (written == expected).all(), f"wrote {int((written & ~expected).sum())} outside, missed {int((expected & ~written).sum())}"
    return relative_error(output[case.region], reference(case, inputs, coefficients))


@pytest.mark.parametrize("case_id", CASES)
def test_candidates_are_correct_on_both_paths(case_id):
    case = parse_case(case_id)
    floor = judged(case, straightforward_cuda(case), {k: list(v) for k, v in DEFAULT_CUDA_LAUNCH.items()}, False)
    candidates = matrix_candidates(case)
    assert candidates, "every single-application type gets at least one candidate"
    for subject, launch, _, source in candidates:
        for misalign in (False, True):
            error = judged(case, source, launch, misalign)
            assert error <= TOLERANCE[case.precision], (subject, misalign, error)
            assert error <= max(FLOOR_FACTOR[case.precision] * floor, 1e-15), (subject, misalign, error, floor)


def test_a_wrong_coefficient_is_caught():
    """The check above can fail: a kernel that weighs one class with another's coefficient."""
    case = parse_case("box_1/9x11x64/f32")
    source, launch, _ = render(case)
    broken = source.replace("(acc_t)coef[3]", "(acc_t)coef[2]")
    assert broken != source
    assert judged(case, broken, launch, False) > TOLERANCE[case.precision]


def test_temporal_types_get_the_composed_octahedron_then_the_pipeline():
    case = parse_case("diamond_ts8/512x512x512/f32")
    assert [c[0].split(":")[0] for c in matrix_candidates(case)] == ["octa", "pipe"]
    assert [c[0].split(":")[0] for c in matrix_candidates(parse_case("diamond_ts4/512x512x512/f64"))] == ["octa"]
    with pytest.raises(ValueError):
        render(case)


def test_the_one_change_variants_offered():
    """rows8 only where the x halo fits a narrower vector and one exists (not f64, not star_4 f32);
    planes (forge/handwritten_planes.py) last of the designs for the 3D constant-coefficient stars
    (star_R), then the marching-down and lean variants of the designs before it, then several rows a
    thread on short4's lean kernel for the f32 3D radius-1 constant-coefficient stencils alone, then `burst` (a
    short chunk of planes unrolled whole) for star_2 f32 and star_1 f64, where the H200 admitted it, and for star_1 in
    f16, for the H200's gate to decide (session 44; star_1 f32 and varcoef_star_1 f16 taken back in session 45), and
    last the lean kernels with their loads a plane ahead for star_1 and varcoef_star_1 in f32 and f16 (session 47), then
    the 16-byte ones with their registers capped for 32 warps an SM, then each with its own row alone ahead and with its
    x halo by shuffles (session 48: every kernel of the sweep family `pipelined`)."""
    def offered(case_id):
        return [c[0].split(":")[0] for c in matrix_candidates(parse_case(case_id))]

    down = ["short4+alternate", "rows8+alternate", "rows16+alternate"]  # session 28, after the rest
    lean = ["rows16+lean", "short4+lean", "rows8+lean"]  # session 30, last: up, then down where offered
    lean_down = ["rows16+alternate+lean", "short4+alternate+lean", "rows8+alternate+lean"]
    rows = ["short4+lean+ry2", "short4+lean+ry4", "short4+alternate+lean+ry2", "short4+alternate+lean+ry4"]  # session 32
    burst = ["burst16+by4+l4", "burst16+by4+l8"]
    ahead = [f"{name}+pipelined" for name in lean + lean_down]
    capped = ["rows16+lean+pipelined+mb", "short4+lean+pipelined+mb", "rows16+alternate+lean+pipelined+mb",
              "short4+alternate+lean+pipelined+mb"]
    ahead += [*capped, *(f"{name}+own" for name in ahead), *(f"{name}+shuffle" for name in ahead)]
    assert offered("star_1/512x512x512/f32") == ["rows16", "rows8", "short4", "planes", *down, *lean, *lean_down, *rows,
                                                 *ahead]
    assert offered("star_1/512x512x512/f16") == ["rows16", "rows8", "short4", "pipe", "planes", *down, *lean, *lean_down,
                                                 *burst, *ahead]
    assert offered("varcoef_star_1/512x512x512/f16") == ["rows16", "rows8", "short4", "pipe", "rows8+alternate",
                                                         "short4+alternate", "rows16+alternate", *lean, *lean_down, *ahead]
    assert offered("box_1/512x512x512/f32") == ["rows16", "rows8", "short4", *down, *lean, *lean_down, *rows]
    assert offered("varcoef_star_1/256x256x256/f32") == ["rows16", "rows8", "short4", "rows8+alternate",
                                                         "short4+alternate", "rows16+alternate", *lean, *lean_down, *ahead]
    assert offered("star_4/512x512x512/f16") == ["rows16", "rows8", "short4", "planes", *lean]
    assert offered("star_4/512x512x512/f32") == ["rows16", "short4", "planes", *lean[:2]]
    assert offered("star_2/512x512x512/f32") == ["rows16", "rows8", "short4", "planes", *lean, *burst]  # alternate lost
    assert offered("star_1/512x512x512/f64") == ["rows16", "short4", "planes", *lean[:2], *burst]
    assert offered("star_2/512x512x512/f64") == ["rows16", "short4", "planes", "planes+bulk+producer", *lean[:2]]


# session 28's changes and session 30's split and stride. Shuffles run where a warp's 32 lanes are all in x range, so the x
# extents hold whole warps (32 V lanes: 128 in f32, 256 in f16, 64 in f64) and, in 200, a whole
# warp beside a partial one that keeps the neighbouring vectors
CHANGED = ["star_1/6x7x200/f32", "star_1/5x6x64/f64", "box_1/5x6x256/f16", "star_4/9x10x128/f32", "star2d_1/9x128/f32",
           "box2d_1/9x256/f16", "varcoef_star_1/5x6x64/f64", "star_2/7x8x64/f64", "box_2/7x8x128/f32"]


@pytest.mark.parametrize("case_id", CHANGED)
# (l2_prefetch is not here: its hint is PTX, and the CPU reads plainly; the H200 sweep checked every variant's
# output against the straightforward kernel's, docs/benchmarks/handwritten_changes_h200_s28.json; session 32's
# `streaming` is, but only its addressing: the CPU stores plainly where the device stores by __stcs)
@pytest.mark.parametrize("changes", [{"shuffle": True}, {"alternate": True, "chunk": 2}, {"alternate": True, "chunk": 3, "by": 4},
                                     {"split": True}, {"split": True, "stride": True, "chunk": 3},
                                     {"alternate": True, "split": True, "stride": True, "chunk": 3},
                                     {"streaming": True, "split": True, "stride": True, "chunk": 3},
                                     {"unroll": 4, "alternate": True, "chunk": 3}, {"unroll": 8, "chunk": 5}])
def test_the_session_28_and_30_changes_are_correct(case_id, changes):
    """(and session 34's `unroll`, whose pragma g++ ignores: here only that the loop around it stays the march)"""
    case = parse_case(case_id)
    source, launch, _ = render(case, **changes)
    assert source != render(case, by=changes.get("by", 8), chunk=changes.get("chunk"))[0]
    for misalign in (False, True):
        assert judged(case, source, launch, misalign) <= TOLERANCE[case.precision], (changes, misalign)


ROWS_A_THREAD = [{"ry": 2}, {"ry": 3, "split": True, "stride": True, "chunk": 3},
                 {"ry": 2, "alternate": True, "split": True, "stride": True, "chunk": 2, "by": 4},
                 {"ry": 4, "vector_bytes": 8, "chunk": 3}]


@pytest.mark.parametrize("case_id,changes", [(c, changes) for c in CHANGED for changes in ROWS_A_THREAD
                                             if parse_case(c).stencil.dims == 3
                                             and (changes.get("vector_bytes") != 8 or rows8_fits(parse_case(c)))])
def test_several_rows_a_thread_are_correct(case_id, changes):
    """Session 32's `ry`: y extents of 6-10 rows leave a last thread with rows beyond the grid, and the
    first thread's rows below the halo, both clamped and never stored."""
    case = parse_case(case_id)
    source, launch, _ = render(case, **changes)
    by = changes.get("by", 8)
    assert (launch["block"][1], launch["tile"][1]) == (by, by * changes["ry"])  # each block's threads cover its tile
    assert f"of {changes['ry']} rows a thread, {by * changes['ry']} rows a block" in source
    for misalign in (False, True):
        assert judged(case, source, launch, misalign) <= TOLERANCE[case.precision], (changes, misalign)


def test_a_row_summed_into_the_wrong_queue_is_caught():
    """The check above can fail: the second row's centre sum added into the first row's queue."""
    case = parse_case("star_1/6x7x64/f32")
    source, launch, _ = render(case, ry=2)
    broken = source.replace("q[1][1][i] += s0_1;", "q[0][1][i] += s0_1;")
    assert broken != source
    assert judged(case, broken, launch, False) > TOLERANCE[case.precision]


def test_several_rows_a_thread_are_refused_where_they_do_not_apply():
    with pytest.raises(ValueError, match="3D"):
        render(parse_case("star2d_1/9x128/f32"), ry=2)
    with pytest.raises(ValueError, match="shuffled"):
        render(parse_case("star_1/6x7x200/f32"), ry=2, shuffle=True)


def test_a_wrong_plane_in_the_downward_march_is_caught():
    """The check above can fail: a chunk marching down that stores its complete plane as going up."""
    case = parse_case("star_1/9x10x64/f32")
    source, launch, _ = render(case, alternate=True, chunk=2)
    broken = source.replace("(k - R * dir)", "(k - R)")
    assert broken != source
    with pytest.raises(AssertionError, match="missed"):  # its planes land below its chunk
        judged(case, broken, launch, False)


@pytest.mark.parametrize("alternate", [False, True])
def test_a_wrong_start_plane_with_stride_is_caught(alternate):
    """The check above can fail: the advancing plane address started one plane off (it stays inside
    the arrays: a wrong stride would write past y and the emulation cannot stop a stray write)."""
    case = parse_case("star_1/9x10x64/f32")
    source, launch, _ = render(case, alternate=alternate, split=True, stride=True, chunk=3)
    broken = source.replace("(long)(kb - R) * sk", "(long)(kb - R + 1) * sk").replace("kb - R : ke + R - 1)",
                                                                                     "kb - R + 1 : ke + R - 2)")
    assert broken != source
    with pytest.raises(AssertionError, match="missed"):  # its planes land one off the region
        judged(case, broken, launch, False)


def test_a_wrong_shuffle_direction_is_caught():
    """The check above can fail: the right halo taken from the left neighbour."""
    case = parse_case("star_1/6x7x200/f32")
    source, launch, _ = render(case, shuffle=True)
    broken = source.replace("__shfl_down_sync", "__shfl_up_sync")
    assert broken != source
    assert judged(case, broken, launch, False) > TOLERANCE[case.precision]


@pytest.mark.parametrize("case_id", ["star2d_1/33x64/f64", "star2d_1/31x37/f64", "star_1/37x43x71/f64", "box_1/9x11x64/f64",
                                     "varcoef_star_1/9x11x64/f64"])
@pytest.mark.parametrize("changes", [{}, {"alternate": True, "chunk": 3, "by": 2}, {"split": True, "stride": True, "chunk": 5}])
def test_one_double_a_lane_is_correct(case_id, changes):
    """Session 34's 8-byte loads in f64 (one double a lane, `narrow` in benchmarks/handwritten_sweep.py): its x halo
    is the neighbouring lanes' doubles, on odd extents and unaligned arrays too."""
    case = parse_case(case_id)
    source, launch, _ = render(case, vector_bytes=8, **changes)
    assert "out[0] = (acc_t)*p;" in source and launch["tile"][0] == 32
    for misalign in (False, True):
        assert judged(case, source, launch, misalign) <= TOLERANCE[case.precision], (changes, misalign)


def test_one_double_a_lane_takes_no_load_hint():
    with pytest.raises(ValueError, match="no vector load or store to hint"):
        render(parse_case("star2d_1/33x64/f64"), vector_bytes=8, streaming=True)


@pytest.mark.parametrize("case_id", ["star2d_1/33x64/f64", "star2d_1/31x37/f64", "star2d_1/40x35/f32", "star_1/9x11x37/f64",
                                     "box_1/9x11x23/f32", "star_2/11x12x37/f32", "varcoef_star_1/9x11x23/f32",
                                     "star_1/11x9x45/f16", "varcoef_star_1/10x9x24/f16"])  # the next H200 sweep's f16
@pytest.mark.parametrize("changes", [{"chunk": 4}, {"chunk": 8, "by": 2, "vector_bytes": 8}, {"chunk": 3, "split": True}])
def test_a_burst_chunk_is_correct_up_to_the_grid_edge(case_id, changes):
    """Session 41's `burst`: the chunk unrolled whole, every row read; the last chunk of an extent that is not a
    multiple of it reads its last row again and must store nothing past it (37, 35 and 23 are not)."""
    case = parse_case(case_id)
    source, launch, _ = render(case, burst=True, **changes)  # 8-byte vectors in every precision: the sweep's burst8
    assert "the chunk unrolled whole, every row read" in source and "min(kb - R + n, ke + R - 1)" in source
    for misalign in (False, True):
        assert judged(case, source, launch, misalign) <= TOLERANCE[case.precision], (changes, misalign)


def test_a_burst_chunk_marches_one_way_one_row_a_thread():
    for changes in ({"alternate": True}, {"stride": True}, {"ry": 2}):
        with pytest.raises(ValueError, match="a burst chunk is short and unrolled whole"):
            render(parse_case("star_1/9x11x64/f32"), burst=True, **changes)


@pytest.mark.parametrize("by, min_blocks", [(8, 5), (4, 10)])
def test_a_register_cap_changes_only_the_kernel_declaration(by, min_blocks):
    """Session 45's `min_blocks`: `__launch_bounds__(32 x by, min_blocks)` on the lean kernel and a line in its comment
    (the ledger keys a kernel by its source), the launch and the rest of the source as without it, and still correct on
    an extent that is not a multiple of the chunk or the tile."""
    case = parse_case("star_1/11x9x45/f16")
    plain, launch, _ = render(case, by=by, split=True, stride=True, alternate=True)
    capped, capped_launch, _ = render(case, by=by, split=True, stride=True, alternate=True, min_blocks=min_blocks)
    declaration = f'extern "C" __global__ void __launch_bounds__({32 * by}, {min_blocks}) stencil('
    assert declaration in capped and "__launch_bounds__" not in plain and capped_launch == launch
    unchanged = capped.replace(declaration, 'extern "C" __global__ void stencil(')
    assert [line for line in unchanged.splitlines() if line not in plain.splitlines()] == [
        f"/* Changes: odd chunks march down, vector and lane paths in two loops, plane address advanced by the stride, "
        f"registers capped for {min_blocks} resident blocks an SM. */"]
    for misalign in (False, True):
        assert judged(case, capped, launch, misalign) <= TOLERANCE[case.precision], misalign


@pytest.mark.parametrize("case_id, alternate, stride", [("star_1/11x9x45/f16", True, True), ("star_1/11x9x45/f16", False, False),
                                                        ("varcoef_star_1/13x7x40/f16", True, False),
                                                        ("box2d_1/37x45/f32", False, True)])
def test_a_prefetch_ahead_adds_only_the_hint_and_stays_in_the_chunk(case_id, alternate, stride):
    """Session 46's `ahead`: the march's each step gains only the prefetch of its row `ahead` planes on (and the helper
    and a comment line; the launch as without it), and the kernel is still correct on extents that are not multiples of
    the chunk or the tile, marching up and down."""
    case = parse_case(case_id)
    plain, launch, _ = render(case, by=4, chunk=4, split=True, stride=stride, alternate=alternate)
    ahead, ahead_launch, _ = render(case, by=4, chunk=4, split=True, stride=stride, alternate=alternate, ahead=2)
    assert ahead_launch == launch and "prefetch_l2" not in plain
    added = [line.strip() for line in ahead.splitlines() if line not in plain.splitlines()]
    hints = sorted({line for line in added if line.startswith("if (") and "prefetch_l2(" in line})
    assert len(hints) == 1 and ahead.count(hints[0]) == 2  # once in each of the split loops
    assert hints[0].count("prefetch_l2(") == (2 if case.stencil.variable_coefficient else 1)
    assert ("n + D <" if alternate else "k + D <") in hints[0]
    for misalign in (False, True):
        assert judged(case, ahead, launch, misalign) <= TOLERANCE[case.precision], misalign


def test_a_prefetch_ahead_is_not_for_a_burst():
    with pytest.raises(ValueError, match="ahead"):
        render(parse_case("star_1/11x9x45/f16"), chunk=4, split=True, burst=True, ahead=2)


@pytest.mark.parametrize("case_id, changes", [("star_1/9x10x64/f32", {"alternate": True}), ("star_1/11x9x48/f16", {}),
                                              ("box_1/9x11x64/f16", {"alternate": True, "vector_bytes": 8}),
                                              ("star_1/9x10x64/f16", {"own_row": True}),
                                              ("box_1/9x11x64/f32", {"alternate": True, "own_row": True}),
                                              ("star_2/11x12x64/f64", {"alternate": True}), ("star_4/13x15x64/f32", {}),
                                              ("varcoef_star_1/10x9x24/f16", {"alternate": True}),
                                              ("varcoef_star_1/5x6x256/f16", {"shuffle": True, "alternate": True}),
                                              ("star2d_1/31x64/f16", {"alternate": True}), ("box2d_1/37x48/f32", {"by": 4}),
                                              ("star_1/6x7x200/f32", {"shuffle": True, "alternate": True}),
                                              ("box_1/5x6x256/f16", {"shuffle": True}),
                                              ("box2d_1/9x256/f16", {"shuffle": True, "own_row": True})])
def test_a_pipelined_march_is_correct_and_leaves_the_lane_path_as_it_was(case_id, changes):
    """Session 47's `pipelined`: the vector path loads the next plane's (2D: row's) vectors a step ahead and the last
    plane its own again; x extents a multiple of V take it, misaligned arrays the lane path, which is the lean kernel's.
    Chunks of 3 end inside the grid and at its edge, marching up and down; with `own_row` the other rows load in
    their own step; with `shuffle` the x halo comes from the neighbouring lanes where a warp is whole (200: a whole
    warp beside a partial one)."""
    case = parse_case(case_id)
    plain, launch, _ = render(case, chunk=3, split=True, stride=True, **{k: v for k, v in changes.items() if k != "own_row"})
    source, pipelined_launch, _ = render(case, chunk=3, split=True, stride=True, pipelined=True, **changes)
    assert pipelined_launch == launch and "convert_vector" in source and "convert_vector" not in plain
    lane_path = "constexpr bool vec = false;"
    assert source[source.index(lane_path):] == plain[plain.index(lane_path):]
    for misalign in (False, True):
        assert judged(case, source, launch, misalign) <= TOLERANCE[case.precision], misalign


def test_a_pipelined_march_with_the_shuffled_halo_the_wrong_way_is_caught():
    case = parse_case("star_1/6x7x200/f32")
    source, launch, _ = render(case, chunk=3, split=True, stride=True, pipelined=True, shuffle=True)
    broken = source.replace("__shfl_down_sync", "__shfl_up_sync")
    assert broken != source and judged(case, broken, launch, False) > TOLERANCE[case.precision]


def test_a_pipelined_march_that_loads_the_same_plane_again_is_caught():
    case = parse_case("star_1/9x10x64/f32")
    source, launch, _ = render(case, chunk=3, split=True, stride=True, alternate=True, pipelined=True)
    stuck = source.replace("base + (n + 1 < count ? step : 0)", "base")
    assert stuck != source and judged(case, stuck, launch, False) > TOLERANCE[case.precision]


def test_a_pipelined_march_is_a_lean_kernels_vector_path_alone():
    case = parse_case("star_1/11x9x45/f16")
    for changes in ({}, {"split": True}, {"split": True, "stride": True, "ry": 2}, {"split": True, "stride": True, "ahead": 2},
                    {"split": True, "burst": True}):
        with pytest.raises(ValueError, match="pipelined"):
            render(case, chunk=4, pipelined=True, **changes)
    with pytest.raises(ValueError, match="pipelined"):
        render(case, chunk=4, split=True, stride=True, own_row=True)
