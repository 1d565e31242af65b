/* A deliberately slow box_2 f32 candidate (tests/measurement/test_tuning.py): the straightforward
 * loop, vectorised (restrict and omp simd, which the straightforward kernel lacks), but on one
 * thread and computing every point eight times, so that it stays slower than Halide's tuned
 * schedule on a loaded machine: computing each point twice, it was admitted over Halide once in
 * session 37, with the PostgreSQL and SQLite runs of the suite side by side on two cores. */
#include <stddef.h>

typedef float elem_t;
typedef float acc_t;

void stencil(const elem_t* restrict u, const elem_t* restrict a, elem_t* restrict y, const double* coef, int nz, int ny, int nx)
{
    const ptrdiff_t sy = nx;
    const ptrdiff_t sz = (ptrdiff_t)nx * ny;
    (void)sz; (void)a;
    const acc_t c0 = (acc_t)coef[0];
    const acc_t c1 = (acc_t)coef[1];
    const acc_t c2 = (acc_t)coef[2];
    const acc_t c3 = (acc_t)coef[3];
    const acc_t c4 = (acc_t)coef[4];
    const acc_t c5 = (acc_t)coef[5];
    const acc_t c6 = (acc_t)coef[6];
    const acc_t c7 = (acc_t)coef[7];
    const acc_t c8 = (acc_t)coef[8];
    const acc_t c9 = (acc_t)coef[9];
    for (int again = 0; again < 8; ++again)
    for (int z = 2; z < nz - 2; ++z) {
        for (int j = 2; j < ny - 2; ++j) {
            #pragma omp simd
            for (int x = 2; x < nx - 2; ++x) {
                const ptrdiff_t i = z * sz + j * sy + x;
                acc_t acc = 0;
                acc += c9 * (acc_t)u[i - 2 * sz - 2 * sy - 2];
                acc += c8 * (acc_t)u[i - 2 * sz - 2 * sy - 1];
                acc += c5 * (acc_t)u[i - 2 * sz - 2 * sy];
                acc += c8 * (acc_t)u[i - 2 * sz - 2 * sy + 1];
                acc += c9 * (acc_t)u[i - 2 * sz - 2 * sy + 2];
                acc += c8 * (acc_t)u[i - 2 * sz - sy - 2];
                acc += c7 * (acc_t)u[i - 2 * sz - sy - 1];
                acc += c4 * (acc_t)u[i - 2 * sz - sy];
                acc += c7 * (acc_t)u[i - 2 * sz - sy + 1];
                acc += c8 * (acc_t)u[i - 2 * sz - sy + 2];
                acc += c5 * (acc_t)u[i - 2 * sz - 2];
                acc += c4 * (acc_t)u[i - 2 * sz - 1];
                acc += c2 * (acc_t)u[i - 2 * sz];
                acc += c4 * (acc_t)u[i - 2 * sz + 1];
                acc += c5 * (acc_t)u[i - 2 * sz + 2];
                acc += c8 * (acc_t)u[i - 2 * sz + sy - 2];
                acc += c7 * (acc_t)u[i - 2 * sz + sy - 1];
                acc += c4 * (acc_t)u[i - 2 * sz + sy];
                acc += c7 * (acc_t)u[i - 2 * sz + sy + 1];
                acc += c8 * (acc_t)u[i - 2 * sz + sy + 2];
                acc += c9 * (acc_t)u[i - 2 * sz + 2 * sy - 2];
                acc += c8 * (acc_t)u[i - 2 * sz + 2 * sy - 1];
                acc += c5 * (acc_t)u[i - 2 * sz + 2 * sy];
                acc += c8 * (acc_t)u[i - 2 * sz + 2 * sy + 1];
                acc += c9 * (acc_t)u[i - 2 * sz + 2 * sy + 2];
                acc += c8 * (acc_t)u[i - sz - 2 * sy - 2];
                acc += c7 * (acc_t)u[i - sz - 2 * sy - 1];
                acc += c4 * (acc_t)u[i - sz - 2 * sy];
                acc += c7 * (acc_t)u[i - sz - 2 * sy + 1];
                acc += c8 * (acc_t)u[i - sz - 2 * sy + 2];
                acc += c7 * (acc_t)u[i - sz - sy - 2];
                acc += c6 * (acc_t)u[i - sz - sy - 1];
                acc += c3 * (acc_t)u[i - sz - sy];
                acc += c6 * (acc_t)u[i - sz - sy + 1];
                acc += c7 * (acc_t)u[i - sz - sy + 2];
                acc += c4 * (acc_t)u[i - sz - 2];
                acc += c3 * (acc_t)u[i - sz - 1];
                acc += c1 * (acc_t)u[i - sz];
                acc += c3 * (acc_t)u[i - sz + 1];
                acc += c4 * (acc_t)u[i - sz + 2];
                acc += c7 * (acc_t)u[i - sz + sy - 2];
                acc += c6 * (acc_t)u[i - sz + sy - 1];
                acc += c3 * (acc_t)u[i - sz + sy];
                acc += c6 * (acc_t)u[i - sz + sy + 1];
                acc += c7 * (acc_t)u[i - sz + sy + 2];
                acc += c8 * (acc_t)u[i - sz + 2 * sy - 2];
                acc += c7 * (acc_t)u[i - sz + 2 * sy - 1];
                acc += c4 * (acc_t)u[i - sz + 2 * sy];
                acc += c7 * (acc_t)u[i - sz + 2 * sy + 1];
                acc += c8 * (acc_t)u[i - sz + 2 * sy + 2];
                acc += c5 * (acc_t)u[i - 2 * sy - 2];
                acc += c4 * (acc_t)u[i - 2 * sy - 1];
                acc += c2 * (acc_t)u[i - 2 * sy];
                acc += c4 * (acc_t)u[i - 2 * sy + 1];
                acc += c5 * (acc_t)u[i - 2 * sy + 2];
                acc += c4 * (acc_t)u[i - sy - 2];
                acc += c3 * (acc_t)u[i - sy - 1];
                acc += c1 * (acc_t)u[i - sy];
                acc += c3 * (acc_t)u[i - sy + 1];
                acc += c4 * (acc_t)u[i - sy + 2];
                acc += c2 * (acc_t)u[i - 2];
                acc += c1 * (acc_t)u[i - 1];
                acc += c0 * (acc_t)u[i];
                acc += c1 * (acc_t)u[i + 1];
                acc += c2 * (acc_t)u[i + 2];
                acc += c4 * (acc_t)u[i + sy - 2];
                acc += c3 * (acc_t)u[i + sy - 1];
                acc += c1 * (acc_t)u[i + sy];
                acc += c3 * (acc_t)u[i + sy + 1];
                acc += c4 * (acc_t)u[i + sy + 2];
                acc += c5 * (acc_t)u[i + 2 * sy - 2];
                acc += c4 * (acc_t)u[i + 2 * sy - 1];
                acc += c2 * (acc_t)u[i + 2 * sy];
                acc += c4 * (acc_t)u[i + 2 * sy + 1];
                acc += c5 * (acc_t)u[i + 2 * sy + 2];
                acc += c8 * (acc_t)u[i + sz - 2 * sy - 2];
                acc += c7 * (acc_t)u[i + sz - 2 * sy - 1];
                acc += c4 * (acc_t)u[i + sz - 2 * sy];
                acc += c7 * (acc_t)u[i + sz - 2 * sy + 1];
                acc += c8 * (acc_t)u[i + sz - 2 * sy + 2];
                acc += c7 * (acc_t)u[i + sz - sy - 2];
                acc += c6 * (acc_t)u[i + sz - sy - 1];
                acc += c3 * (acc_t)u[i + sz - sy];
                acc += c6 * (acc_t)u[i + sz - sy + 1];
                acc += c7 * (acc_t)u[i + sz - sy + 2];
                acc += c4 * (acc_t)u[i + sz - 2];
                acc += c3 * (acc_t)u[i + sz - 1];
                acc += c1 * (acc_t)u[i + sz];
                acc += c3 * (acc_t)u[i + sz + 1];
                acc += c4 * (acc_t)u[i + sz + 2];
                acc += c7 * (acc_t)u[i + sz + sy - 2];
                acc += c6 * (acc_t)u[i + sz + sy - 1];
                acc += c3 * (acc_t)u[i + sz + sy];
                acc += c6 * (acc_t)u[i + sz + sy + 1];
                acc += c7 * (acc_t)u[i + sz + sy + 2];
                acc += c8 * (acc_t)u[i + sz + 2 * sy - 2];
                acc += c7 * (acc_t)u[i + sz + 2 * sy - 1];
                acc += c4 * (acc_t)u[i + sz + 2 * sy];
                acc += c7 * (acc_t)u[i + sz + 2 * sy + 1];
                acc += c8 * (acc_t)u[i + sz + 2 * sy + 2];
                acc += c9 * (acc_t)u[i + 2 * sz - 2 * sy - 2];
                acc += c8 * (acc_t)u[i + 2 * sz - 2 * sy - 1];
                acc += c5 * (acc_t)u[i + 2 * sz - 2 * sy];
                acc += c8 * (acc_t)u[i + 2 * sz - 2 * sy + 1];
                acc += c9 * (acc_t)u[i + 2 * sz - 2 * sy + 2];
                acc += c8 * (acc_t)u[i + 2 * sz - sy - 2];
                acc += c7 * (acc_t)u[i + 2 * sz - sy - 1];
                acc += c4 * (acc_t)u[i + 2 * sz - sy];
                acc += c7 * (acc_t)u[i + 2 * sz - sy + 1];
                acc += c8 * (acc_t)u[i + 2 * sz - sy + 2];
                acc += c5 * (acc_t)u[i + 2 * sz - 2];
                acc += c4 * (acc_t)u[i + 2 * sz - 1];
                acc += c2 * (acc_t)u[i + 2 * sz];
                acc += c4 * (acc_t)u[i + 2 * sz + 1];
                acc += c5 * (acc_t)u[i + 2 * sz + 2];
                acc += c8 * (acc_t)u[i + 2 * sz + sy - 2];
                acc += c7 * (acc_t)u[i + 2 * sz + sy - 1];
                acc += c4 * (acc_t)u[i + 2 * sz + sy];
                acc += c7 * (acc_t)u[i + 2 * sz + sy + 1];
                acc += c8 * (acc_t)u[i + 2 * sz + sy + 2];
                acc += c9 * (acc_t)u[i + 2 * sz + 2 * sy - 2];
                acc += c8 * (acc_t)u[i + 2 * sz + 2 * sy - 1];
                acc += c5 * (acc_t)u[i + 2 * sz + 2 * sy];
                acc += c8 * (acc_t)u[i + 2 * sz + 2 * sy + 1];
                acc += c9 * (acc_t)u[i + 2 * sz + 2 * sy + 2];
                y[i] = (elem_t)(acc);
            }
        }
    }
}
