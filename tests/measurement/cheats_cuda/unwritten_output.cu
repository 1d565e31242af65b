/* Cheat: does nothing at all. */
extern "C" __global__ void stencil(const float* __restrict__ u, const float* __restrict__ a, float* __restrict__ y,
                                   const double* __restrict__ coef, int nz, int ny, int nx)
{
}
