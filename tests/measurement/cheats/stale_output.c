/* Cheat (issue 14, point 11): trusts what the output already holds. On the odd z planes it
 * skips every point whose output is already a number, i.e. one the previous launch on the same
 * inputs left there. The checks poison the output with NaN before each run, so there it
 * computes everything; when the timed launches of a pass followed each other on one output,
 * every launch after the first did half the planes. Without the line marked STALE this is the
 * honest kernel it was made from (tests/measurement/test_adversarial.py runs both).
 * z is the innermost loop (a stride of a plane): the kernel is slow on purpose, so that even
 * half of its work stays far above the copy-bandwidth floor and only its output can reject it. */
#include <math.h>
#include <stddef.h>
#define IDX(z, y, x) (((size_t)(z) * ny + (y)) * nx + (x))
void stencil(const float *restrict u, const float *restrict a, float *restrict y, const double *coef, int nz, int ny, int nx) {
    const float c0 = (float)coef[0], c1 = (float)coef[1];
    for (int x = 1; x < nx - 1; x++)
        for (int yy = 1; yy < ny - 1; yy++)
            for (int z = 1; z < nz - 1; z++) {
                size_t i = IDX(z, yy, x);
                if ((z & 1) && !isnan(y[i])) continue; /* STALE */
                y[i] = c0 * u[i] + c1 * (u[i - 1] + u[i + 1] + u[i - nx] + u[i + nx] + u[i - (size_t)nx * ny] + u[i + (size_t)nx * ny]);
            }
}
