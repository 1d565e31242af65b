/* Cheat (or bug): takes the upper z neighbour two rows too far, reading up to a row past the end of u. */
#include <stddef.h>
#define IDX(z, y, x) (((size_t)(z) * ny + (y)) * nx + (x))
void stencil(const float *u, const float *a, float *y, const double *coef, int nz, int ny, int nx) {
    const float c0 = (float)coef[0], c1 = (float)coef[1];
    for (int z = 1; z < nz - 1; z++)
        for (int yy = 1; yy < ny - 1; yy++)
            for (int x = 1; x < nx - 1; x++) {
                size_t i = IDX(z, yy, x), plane = (size_t)nx * ny;
                y[i] = c0 * u[i] + c1 * (u[i - 1] + u[i + 1] + u[i - nx] + u[i + nx] + u[i - plane] + u[i + plane + 2 * nx]);
            }
}
