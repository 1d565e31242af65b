/* Cheat (or bug): takes the upper z neighbour two rows too far, reading up to a row past the end of u.
 * On the GPU nothing faults: the read lands in the NaN padding around u, so the last rows of
 * the output are NaN and the check reports unwritten_output (first reason in the judge's order). */
extern "C" __global__ void stencil(const float* __restrict__ u, const float* __restrict__ a, float* __restrict__ y,
                                   const double* __restrict__ coef, int nz, int ny, int nx)
{
    const int x = blockIdx.x * blockDim.x + threadIdx.x, j = blockIdx.y * blockDim.y + threadIdx.y, z = blockIdx.z;
    if (x < 1 || x >= nx - 1 || j < 1 || j >= ny - 1 || z < 1 || z >= nz - 1) return;
    const long long i = ((long long)z * ny + j) * nx + x, plane = (long long)nx * ny;
    const float c0 = (float)coef[0], c1 = (float)coef[1];
    y[i] = c0 * u[i] + c1 * (u[i - 1] + u[i + 1] + u[i - nx] + u[i + nx] + u[i - plane] + u[i + plane + 2 * nx]);
}
