/* Cheat: computes only the first half of the z range. */
extern "C" __global__ void stencil(const float* __restrict__ u, const float* __restrict__ a, float* __restrict__ y,
                                   const double* __restrict__ coef, int nz, int ny, int nx)
{
    const int x = blockIdx.x * blockDim.x + threadIdx.x, j = blockIdx.y * blockDim.y + threadIdx.y, z = blockIdx.z;
    if (x < 1 || x >= nx - 1 || j < 1 || j >= ny - 1 || z < 1 || z >= nz / 2) return;
    const long long i = ((long long)z * ny + j) * nx + x, plane = (long long)nx * ny;
    const float c0 = (float)coef[0], c1 = (float)coef[1];
    y[i] = c0 * u[i] + c1 * (u[i - 1] + u[i + 1] + u[i - nx] + u[i + nx] + u[i - plane] + u[i + plane]);
}
