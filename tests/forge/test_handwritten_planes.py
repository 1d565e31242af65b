"""The `planes` candidate (forge/handwritten_planes.py) is correct before device time is spent on it:
each rendering runs on the CPU through tests/forge/cuda_emulation.py, whose threaded mode meets its
barriers and lands its cp.async copies only at the waits that cover them, on the vector path
(aligned arrays, nx a multiple of V) and the scalar one (misaligned arrays, odd nx), judged as
tests/forge/test_handwritten.py judges rows16: within the tolerance and the straightforward CUDA
kernel's error floor, and exactly the region written."""
from __future__ import annotations

import shutil

import pytest

from forge.candidates import matrix_candidates
from forge.handwritten_planes import render
from measurement.harness.cases import parse_case
from measurement.harness.codegen import DEFAULT_CUDA_LAUNCH, straightforward_cuda
from measurement.harness.oracle import FLOOR_FACTOR, TOLERANCE

from .test_handwritten import judged

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ to emulate CUDA kernels on the CPU")

# (case, chunk): every precision at R = 1, 2 and 4; x extents a multiple of V take the vector path
# unless misaligned, the odd ones (131, 70, 67, 69) the scalar path; chunk 4 gives several blocks in z
# and 260 x 40 several in x and y, so tile edges meet inside the grid.
CASES = [
    ("star_2/11x12x64/f64", None), ("star_4/13x15x64/f32", None), ("star_4/12x37x136/f16", 4),
    ("star_2/20x40x260/f32", 4), ("star_2/10x21x131/f32", None), ("star_2/9x19x70/f16", 3),
    ("star_4/13x17x67/f64", 2), ("star_4/14x18x40/f64", 3),
    ("star_1/11x35x264/f32", 4), ("star_1/9x18x69/f32", 3), ("star_1/10x17x36/f64", None), ("star_1/8x19x70/f16", 2),
    ("star_1/9x12x128/f16", 3),
]


@pytest.mark.parametrize("case_id, chunk", CASES)
def test_planes_is_correct_on_both_paths(case_id, chunk):
    case = parse_case(case_id)
    floor = judged(case, straightforward_cuda(case), {k: list(v) for k, v in DEFAULT_CUDA_LAUNCH.items()}, False)
    source, launch, _ = render(case, chunk=chunk)
    for misalign in (False, True):
        error = judged(case, source, launch, misalign)
        assert error <= TOLERANCE[case.precision], (misalign, error)
        assert error <= max(FLOOR_FACTOR[case.precision] * floor, 1e-15), (misalign, error, floor)


def test_reading_a_plane_before_its_copies_land_is_caught():
    """The emulation can fail the ring: waiting for one plane too few reads the buffer's old plane."""
    case = parse_case("star_2/11x12x64/f32")
    source, launch, _ = render(case, chunk=4)
    broken = source.replace("wait_async<NB - 2>();", "wait_async<NB - 1>();")
    assert broken != source
    assert not judged(case, broken, launch, False) <= TOLERANCE[case.precision]


def test_planes_offered_for_the_constant_coefficient_3d_stars_only():
    """Last of the designs (for star_2 f64 with session 33's producer warp after it); only session 28's odd
    chunks marching down, session 30's lean variants and session 32's several rows a thread on them
    (forge/candidates.py) follow it."""
    def offered(case_id):
        return [c[0].split(":")[0] for c in matrix_candidates(parse_case(case_id)) if "+lean" not in c[0].split(":")[0]]

    assert offered("star_4/512x512x512/f32") == ["rows16", "short4", "planes"]
    assert offered("star_2/512x512x512/f64") == ["rows16", "short4", "planes", "planes+bulk+producer"]
    assert "planes+bulk+producer" not in offered("star_1/512x512x512/f64") + offered("star_2/512x512x512/f32")
    assert offered("star_4/512x512x512/f16")[-1] == "planes"
    assert offered("star_1/512x512x512/f32")[3:] == ["planes", "short4+alternate", "rows8+alternate", "rows16+alternate"]
    assert "planes" not in offered("varcoef_star_1/512x512x512/f32")
    with pytest.raises(ValueError):
        render(parse_case("box_2/64x64x64/f32"))


# session 32's `bulk`: the f32 and f64 cases above (bulk copies move whole 16-byte units)
BULK = [(case_id, chunk) for case_id, chunk in CASES if not case_id.endswith("f16")]


@pytest.mark.parametrize("producer", [False, True], ids=["bulk", "producer"])
@pytest.mark.parametrize("case_id, chunk", BULK)
def test_bulk_is_correct_on_both_paths(case_id, chunk, producer):
    """Copies land when their mbarrier's phase completes (tests/forge/cuda_emulation.py), on the bulk
    path (aligned, nx a multiple of V: the tile edges clamped to the grid) and the per-thread one; with
    session 33's producer warp too (15 computing warps and the producer, as the sweep runs it)."""
    case = parse_case(case_id)
    source, launch, _ = render(case, chunk=chunk, bulk=True, producer=producer, height=15 if producer else 16)
    assert "bulk_copy(" in source and "cp.async.cg" not in source
    assert launch["block"][1] == launch["tile"][1] + producer
    for misalign in (False, True):
        assert judged(case, source, launch, misalign) <= TOLERANCE[case.precision], misalign


@pytest.mark.parametrize("producer", [False, True], ids=["bulk", "producer"])
@pytest.mark.parametrize("broken_by", [
    ("bar_wait(&full[read], (i / NB) & 1);", "/* no wait */"),  # reads a buffer before its plane lands
    ("if (reused) bar_wait(&empty[buffer], ((plane - zb + R) / NB - 1) & 1);", "/* no wait */"),  # refills one in use
])
def test_a_bulk_ring_out_of_order_is_caught(broken_by, producer):
    """The emulation can fail the ring: a thread that reads a buffer without waiting for its plane's
    mbarrier reads its old plane; a producer that refills a buffer without waiting for every warp to be
    done with it completes the buffer's next phase under a warp that lags (the emulation lets warps
    drift apart: one sits out two rounds in turn, and one eight), which then waits for a phase that has
    passed. Either way the emulation fails it: wrong values, or a deadlock it reports. In warp order alone
    the second passed (7.6e-8, session 32), and for the producer warp with two-round lags alone (session 33)."""
    case = parse_case("star_2/20x40x260/f32")
    assert_out_of_order_caught(case, *render(case, chunk=4, bulk=True, producer=producer)[:2], broken_by)


def assert_out_of_order_caught(case, source: str, launch: dict, broken_by: tuple[str, str]) -> None:
    """`source` with `broken_by` applied fails the emulation: wrong values, or a deadlock it reports."""
    broken = source.replace(*broken_by)
    assert broken != source
    try:
        error = judged(case, broken, launch, False)
    except AssertionError as failure:
        assert "deadlocked" in str(failure)
    else:
        assert not error <= TOLERANCE[case.precision]


def test_bulk_is_refused_for_narrower_vectors():
    with pytest.raises(ValueError, match="16-byte"):
        render(parse_case("star_1/8x19x70/f16"), bulk=True)
    with pytest.raises(ValueError, match="needs bulk"):
        render(parse_case("star_1/8x19x70/f32"), producer=True)


# session 34's `pull`: R = 4 would need 10 buffers, more than render allows (and than an SM holds at 15 rows)
PULL = [(case_id, chunk) for case_id, chunk in BULK if parse_case(case_id).stencil.radius <= 2]


@pytest.mark.parametrize("extra", [0, 1], ids=["2R+2", "2R+3"])
@pytest.mark.parametrize("case_id, chunk", PULL)
def test_pull_is_correct_on_both_paths(case_id, chunk, extra):
    """Each output summed whole from the 2R + 1 planes of the ring around it, with the fewest buffers `pull` allows
    (2R + 2: one plane in flight) and one more."""
    case = parse_case(case_id)
    stages = 2 * case.stencil.radius + 2 + extra
    source, launch, _ = render(case, chunk=chunk, bulk=True, producer=True, pull=True, height=15, stages=stages)
    assert "acc_t q[" not in source and "pulled whole" in source
    for misalign in (False, True):
        assert judged(case, source, launch, misalign) <= TOLERANCE[case.precision], misalign


@pytest.mark.parametrize("broken_by", [
    ("bar_arrive(&empty[(i - 2 * R) % NB]);", "bar_arrive(&empty[(i - 2 * R + 1) % NB]);"),  # releases a plane still read
    ("ring[((i - R - d) % NB) * CELLS + own], below", "ring[((i - R - d + 1) % NB) * CELLS + own], below"),  # a wrong z arm
    ("const vec_t* tile = ring + ((i - R) % NB) * CELLS;", "const vec_t* tile = ring + ((i - R + 1) % NB) * CELLS;"),  # arms of p
])
def test_a_pulled_output_out_of_order_is_caught(broken_by):
    case = parse_case("star_2/20x40x260/f32")
    assert_out_of_order_caught(case, *render(case, chunk=4, bulk=True, producer=True, pull=True, height=15, stages=6)[:2], broken_by)


def test_pull_is_refused_without_the_producer_or_enough_buffers():
    case = parse_case("star_2/20x40x260/f32")
    with pytest.raises(ValueError, match="at least 6 stages"):
        render(case, bulk=True, producer=True, pull=True, stages=5)
    with pytest.raises(ValueError, match="needs producer"):
        render(case, bulk=True, pull=True, stages=6)
