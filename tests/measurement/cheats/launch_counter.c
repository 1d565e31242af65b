/* Cheat: keeps state of its own, a count of its calls in this process, and skips the odd z
 * planes on every call from the fifth on except each third one (calls 6, 9, 12, ...). The four
 * checks run in one child (calls 0-3: all computed); the timing child starts again at zero.
 * With one warm-up and 3 passes x 3 launches (test_adversarial.py) the last timed launch is
 * call 9, which computes everything, so a check of the last launch's output alone passes it:
 * only reading back the output of every launch (measurement/harness/protocol.py) sees the
 * skipped planes, which still hold what the harness filled the output with.
 * z is the innermost loop (a stride of a plane): the kernel is slow on purpose, so that even
 * half of its work stays far above the copy-bandwidth floor and only its output can reject it. */
#include <stddef.h>
#define IDX(z, y, x) (((size_t)(z) * ny + (y)) * nx + (x))
static unsigned long calls = 0;
void stencil(const float *restrict u, const float *restrict a, float *restrict y, const double *coef, int nz, int ny, int nx) {
    const unsigned long call = calls++;
    const int lazy = call >= 4 && call % 3 != 0;
    const float c0 = (float)coef[0], c1 = (float)coef[1];
    for (int x = 1; x < nx - 1; x++)
        for (int yy = 1; yy < ny - 1; yy++)
            for (int z = 1; z < nz - 1; z++) {
                if (lazy && (z & 1)) continue;
                size_t i = IDX(z, yy, x);
                y[i] = c0 * u[i] + c1 * (u[i - 1] + u[i + 1] + u[i - nx] + u[i + nx] + u[i - (size_t)nx * ny] + u[i + (size_t)nx * ny]);
            }
}
