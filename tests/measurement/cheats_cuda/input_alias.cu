/* Cheat: puts its result into the input array and leaves the output alone. Every block computes
 * its points into a device-global scratch array; the last block to finish copies the scratch
 * over u (so no thread reads a neighbour that another has already overwritten). */
#define CAPACITY (1 << 20)
__device__ float scratch[CAPACITY];
__device__ unsigned int finished = 0;

extern "C" __global__ void stencil(const float* __restrict__ u, const float* __restrict__ a, float* __restrict__ y,
                                   const double* __restrict__ coef, int nz, int ny, int nx)
{
    const long long n = (long long)nz * ny * nx, plane = (long long)nx * ny;
    const int x = blockIdx.x * blockDim.x + threadIdx.x, j = blockIdx.y * blockDim.y + threadIdx.y, z = blockIdx.z;
    if (n > CAPACITY) return;
    const long long i = ((long long)z * ny + j) * nx + x;
    if (x < nx && j < ny && z < nz) {
        if (x < 1 || x >= nx - 1 || j < 1 || j >= ny - 1 || z < 1 || z >= nz - 1) {
            scratch[i] = u[i];
        } else {
            const float c0 = (float)coef[0], c1 = (float)coef[1];
            scratch[i] = c0 * u[i] + c1 * (u[i - 1] + u[i + 1] + u[i - nx] + u[i + nx] + u[i - plane] + u[i + plane]);
        }
    }
    __threadfence();
    __syncthreads();
    __shared__ bool last;
    const int rank = threadIdx.y * blockDim.x + threadIdx.x, threads = blockDim.x * blockDim.y * blockDim.z;
    if (rank == 0) last = atomicAdd(&finished, 1u) == gridDim.x * gridDim.y * gridDim.z - 1u;
    __syncthreads();
    if (!last) return;
    __threadfence();
    for (long long k = rank; k < n; k += threads) ((float*)u)[k] = ((volatile float*)scratch)[k];
    if (rank == 0) finished = 0;
}
