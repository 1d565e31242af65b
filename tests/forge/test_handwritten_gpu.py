"""Session 37's designs on a real GPU (marker `gpu`: `bash scripts/gpu_tests.sh tests/forge` on the device machine).
The emulation (tests/forge/cuda_emulation.py) runs their logic; what it cannot check is the hardware's side: that
`mbarrier.arrive.release.cluster` on another block's barrier and `try_wait.acquire.cluster` order the pushed rows
(cpipe's `signal`), and that `ldmatrix` and `mma.sync` lay out fragments as the emulation does (`tcq`); and pipe's
`pair` (its generic lambda and constant phases) through NVRTC. Each kernel
runs on the shapes its emulation tests use and on one of the matrix's, checked against the oracle: the
tolerance, nothing written outside the region, the inputs untouched."""
from __future__ import annotations

import pytest

from forge.candidates import burst
from forge.handwritten_cluster import render_cluster_pipe
from forge.handwritten_temporal import render_pipe
from forge.handwritten_tensor import render as render_tensor
from measurement.backends.base import Kernel
from measurement.harness.cases import parse_case
from measurement.harness.codegen_cuda import straightforward_cuda, straightforward_cuda_launch
from measurement.harness.oracle import FLOOR_FACTOR

from . import test_handwritten_cluster as cluster, test_handwritten_tensor as tensor
from .test_kernelgen import run_and_check

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def cuda_backend():
    from measurement.backends import get_backend

    return get_backend("cuda")


@pytest.mark.parametrize("case_id, width, height, cluster, chunk, shuffle", cluster.SHAPES + [
    ("diamond_ts8/128x128x128/f32", 64, 32, 2, 64, True),
    ("diamond_ts8/128x128x128/f32", 128, 16, 8, 64, True),
])
@pytest.mark.parametrize("pair", [False, True])
def test_the_signalled_cluster_pipeline_is_correct_on_the_gpu(cuda_backend, case_id, width, height, cluster, chunk, shuffle,
                                                              pair):
    case = parse_case(case_id)
    source, launch, _ = render_cluster_pipe(case, width, height, cluster, chunk, shuffle=shuffle, exchange="signal", pair=pair)
    run_and_check(cuda_backend, case, Kernel(source, launch))


@pytest.mark.parametrize("case_id, width, height, chunk, shuffle, skip", [
    ("diamond_ts4/128x128x128/f32", 96, 32, 32, False, True),
    ("diamond_ts4/128x128x128/f32", 64, 32, 32, True, True),
    ("diamond_ts8/128x128x128/f32", 64, 32, 32, True, False),
])
def test_the_pipe_marching_in_pairs_is_correct_on_the_gpu(cuda_backend, case_id, width, height, chunk, shuffle, skip):
    case = parse_case(case_id)
    source, launch, _ = render_pipe(case, width, height, chunk, shuffle=shuffle, skip=skip, pair=True)
    run_and_check(cuda_backend, case, Kernel(source, launch))


@pytest.mark.parametrize("case_id, warps_x, warps_y, chunk, stages, direct", tensor.SHAPES + [
    ("box_2/64x128x256/f16", 4, 2, 32, 4, None),
    ("star_4/64x128x256/f16", 4, 4, 32, 3, None),
    ("box2d_1/512x1024/f16", 8, 2, 1, 2, None),
])
def test_the_tensor_core_queue_is_correct_on_the_gpu(cuda_backend, case_id, warps_x, warps_y, chunk, stages, direct):
    case = parse_case(case_id)
    source, launch, _ = render_tensor(case, warps_x, warps_y, chunk, stages, direct)
    error = run_and_check(cuda_backend, case, Kernel(source, launch))
    floor = run_and_check(cuda_backend, case, Kernel(straightforward_cuda(case), straightforward_cuda_launch(case)))
    assert error <= FLOOR_FACTOR[case.precision] * floor, (error, floor)


def test_the_tensor_core_queue_with_copies_through_l1_is_correct_on_the_gpu(cuda_backend):
    """`cache="ca"` changes only the copies' cache operator, which the emulation does not see."""
    case = parse_case("box_2/64x128x256/f16")
    source, launch, _ = render_tensor(case, 4, 2, 32, 4, cache="ca")
    assert "cp.async.ca.shared.global" in source
    run_and_check(cuda_backend, case, Kernel(source, launch))


@pytest.mark.parametrize("case_id", ["star2d_1/1024x1031/f64", "star2d_1/1027x1024/f32", "box2d_1/1030x1000/f32",
                                     "star2d_1/2050x2048/f16", "box2d_1/1026x1032/f16", "star_1/35x66x131/f64",
                                     "star_2/37x70x129/f32", "star_1/35x66x264/f16"])
def test_the_burst_candidates_are_correct_on_the_gpu(cuda_backend, case_id):
    """Session 41's `burst` (forge/candidates.py `burst`), as campaigns submit it, on extents that are not multiples of
    its chunk or tile (the 3D stars of sessions 42 and 44 too): what the emulation checks, through NVRTC and the hardware's
    vector loads."""
    case = parse_case(case_id)
    made = burst(case)
    assert len(made) == 2
    for _, launch, _, source in made:
        run_and_check(cuda_backend, case, Kernel(source, launch))
