/* Cheat (issue 14, point 11): trusts what the output already holds. On the odd z planes a
 * thread skips every point whose output is already a number, i.e. one the previous launch on
 * the same inputs left there (on the H200 this moved star_4/512^3 f32 from 1.091x to an
 * admitted 1.397x). The checks poison the output with NaN, so there it computes everything.
 * Without the line marked STALE this is the honest kernel it was made from.
 * One thread per row, walking x: neighbouring threads touch different rows, so the loads are
 * not coalesced and the kernel is slow on purpose; even half of its work stays far above the
 * copy-bandwidth floor, so only its output can reject it.
 * Launch: {"block": [1, 128, 1], "tile": [65536, 128, 1]} (a block: 128 rows of one plane). */
extern "C" __global__ void stencil(const float* __restrict__ u, const float* __restrict__ a, float* __restrict__ y,
                                   const double* __restrict__ coef, int nz, int ny, int nx)
{
    const int j = blockIdx.y * blockDim.y + threadIdx.y, z = blockIdx.z;
    if (j < 1 || j >= ny - 1 || z < 1 || z >= nz - 1) return;
    const long long plane = (long long)nx * ny;
    const float c0 = (float)coef[0], c1 = (float)coef[1];
    for (int x = 1; x < nx - 1; ++x) {
        const long long i = (long long)z * plane + (long long)j * nx + x;
        if ((z & 1) && !isnan(y[i])) continue; /* STALE */
        y[i] = c0 * u[i] + c1 * (u[i - 1] + u[i + 1] + u[i - nx] + u[i + nx] + u[i - plane] + u[i + plane]);
    }
}
