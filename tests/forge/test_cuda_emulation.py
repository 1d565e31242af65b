"""tests/forge/cuda_emulation.py itself: its fibers meet at barriers as the GPU's threads do, and a
kernel whose threads wait at barriers no other thread reaches is reported, not left to hang."""
import numpy as np
import pytest

from measurement.harness.cases import parse_case

from .cuda_emulation import emulate

CASE = parse_case("star_1/4x4x64/f32")
HEAD = """typedef float elem_t;
extern "C" __global__ void stencil(const elem_t* __restrict__ u, const elem_t* __restrict__ a,
                                   elem_t* __restrict__ y, const double* __restrict__ coef,
                                   int nz, int ny, int nx)
{
    extern __shared__ float ring[];
    const int t = threadIdx.x;
"""


def run(body: str) -> np.ndarray:
    inputs = {"u": np.arange(CASE.points, dtype=np.float32).reshape(CASE.shape)}
    launch = {"block": [32, 1, 1], "tile": [1 << 30, 1 << 30, 1 << 30], "shared_bytes": 32 * 4}
    output, _ = emulate(CASE, HEAD + body + "}\n", launch, inputs, np.zeros(2))
    return output


def test_a_barrier_orders_shared_memory_and_a_shuffle_reads_the_neighbouring_lane():
    """Each thread writes its slot, meets the others, then reads its neighbour's slot; the shuffle
    hands lane t the value of lane t + 1 (its own at the warp's end)."""
    output = run("""
    ring[t] = u[t];
    __syncthreads();
    y[t] = ring[(t + 1) % 32] + 1000.0f * __shfl_down_sync(0xffffffffu, u[t], 1);
""")
    lanes = np.arange(32, dtype=np.float32)
    assert np.array_equal(output.reshape(-1)[:32], (lanes + 1) % 32 + 1000 * np.minimum(lanes + 1, 31))


def test_threads_waiting_at_barriers_no_other_reaches_are_reported():
    with pytest.raises(AssertionError, match="deadlocked at a barrier"):
        run("""
    if (t == 0) y[0] = __shfl_down_sync(0xffffffffu, u[0], 1);  /* waits for the other 31 lanes */
    else __syncthreads();                                        /* waits for lane 0 */
""")
