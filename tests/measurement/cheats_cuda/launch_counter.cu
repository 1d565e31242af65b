/* Cheat: a __device__ launch counter (state that outlives a launch, in the module) decides to
 * skip the odd z planes on every launch from the fifth on except each third one (launches 6,
 * 9, 12, ...). The four checks are launches 0-3 of one child, all computed; the timing child
 * loads the module afresh. With one warm-up and 3 passes x 3 launches (test_cuda_backend.py)
 * the last timed launch is launch 9, which computes everything, so a check of the last
 * launch's output alone passes it: only reading back the output of every launch
 * (measurement/harness/protocol.py) sees the skipped planes, which still hold what the harness
 * filled the output with. The counter is read by each block as it starts and advanced by the
 * last block to finish, so all blocks of one launch agree.
 * One thread per row (slow on purpose, as stale_output.cu: only the output can reject it).
 * Launch: {"block": [1, 128, 1], "tile": [65536, 128, 1]}. */
__device__ unsigned int launches = 0;
__device__ unsigned int finished = 0;

extern "C" __global__ void stencil(const float* __restrict__ u, const float* __restrict__ a, float* __restrict__ y,
                                   const double* __restrict__ coef, int nz, int ny, int nx)
{
    __shared__ int lazy;
    if (threadIdx.y == 0) {
        const unsigned int launch = *(volatile unsigned int*)&launches;
        lazy = launch >= 4u && launch % 3u != 0u;
    }
    __syncthreads();
    const int j = blockIdx.y * blockDim.y + threadIdx.y, z = blockIdx.z;
    if (j >= 1 && j < ny - 1 && z >= 1 && z < nz - 1 && !(lazy && (z & 1))) {
        const long long plane = (long long)nx * ny;
        const float c0 = (float)coef[0], c1 = (float)coef[1];
        for (int x = 1; x < nx - 1; ++x) {
            const long long i = (long long)z * plane + (long long)j * nx + x;
            y[i] = c0 * u[i] + c1 * (u[i - 1] + u[i + 1] + u[i - nx] + u[i + nx] + u[i - plane] + u[i + plane]);
        }
    }
    __syncthreads();
    if (threadIdx.y == 0) {
        __threadfence();
        if (atomicAdd(&finished, 1u) == gridDim.x * gridDim.y * gridDim.z - 1u) {
            launches += 1u;
            finished = 0u;
            __threadfence();
        }
    }
}
