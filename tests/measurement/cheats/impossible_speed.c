/* Cheat: when the output already holds a number (not the checks' NaN poison), returns at once.
 * Every timed launch starts from an output the harness filled with a finite value, so every
 * timed launch returns at once and the median is the launch overhead alone: rejected as
 * impossible_speed, which the gate judges before the timed output (wrong too: the fill). */
#include <math.h>
#include <stddef.h>
#define IDX(z, y, x) (((size_t)(z) * ny + (y)) * nx + (x))
void stencil(const float *u, const float *a, float *y, const double *coef, int nz, int ny, int nx) {
    if (!isnan(y[IDX(1, 1, 1)])) return;
    const float c0 = (float)coef[0], c1 = (float)coef[1];
    for (int z = 1; z < nz - 1; z++)
        for (int yy = 1; yy < ny - 1; yy++)
            for (int x = 1; x < nx - 1; x++) {
                size_t i = IDX(z, yy, x);
                y[i] = c0 * u[i] + c1 * (u[i - 1] + u[i + 1] + u[i - nx] + u[i + nx] + u[i - (size_t)nx * ny] + u[i + (size_t)nx * ny]);
            }
}
