/* An honest star_1 kernel: the straightforward loop with the neighbour sum written out. */
#include <stddef.h>
#define IDX(z, y, x) (((size_t)(z) * ny + (y)) * nx + (x))
void stencil(const float *restrict u, const float *restrict a, float *restrict y, const double *coef, int nz, int ny, int nx) {
    const float c0 = (float)coef[0], c1 = (float)coef[1];
    #pragma omp parallel for collapse(2) schedule(static)
    for (int z = 1; z < nz - 1; z++)
        for (int yy = 1; yy < ny - 1; yy++) {
            #pragma omp simd
            for (int x = 1; x < nx - 1; x++) {
                size_t i = IDX(z, yy, x);
                y[i] = c0 * u[i] + c1 * (u[i - 1] + u[i + 1] + u[i - nx] + u[i + nx] + u[i - (size_t)nx * ny] + u[i + (size_t)nx * ny]);
            }
        }
}
