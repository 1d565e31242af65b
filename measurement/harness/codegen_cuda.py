"""The straightforward CUDA kernel of any case (measurement.harness.codegen says what straightforward
means): one thread per grid point, launched with tile = block (DEFAULT_CUDA_LAUNCH), except
single-step f16 cases, whose kernel (measurement.harness.codegen_f16) computes four x points per
thread with 8-byte loads; their scalar kernel stays the historical baseline
`straightforward_f16_scalar`. Callers launch a straightforward kernel with
straightforward_cuda_launch(case).

Temporal types (diamond_tsT, T > 1 applications of star_1): one launch cannot synchronise the grid
between steps (the ABI has no scratch and no multi-launch), so the kernel evaluates the T-step
result directly: T applications of the linear operator c0·I + c1·(Sx + Sy + Sz) are one linear
stencil of radius T over the octahedron |dz|+|dy|+|dx| <= T, with weight
    w(d) = Σ_m  C(T, m) · N(m; d) · c0^(T-m) · c1^m
where N(m; d) is the number of m-step walks on the 6-neighbour lattice from 0 to d. The integers
C(T, m)·N(m; d) (< 7^T, exact in double) are computed here at codegen time and emitted as
__constant__ tables per symmetry class of |d|; each block evaluates the weights in double from the
runtime coef into shared memory ((T+1)³ entries: 500 B for T = 4 in float, 39 KB for T = 16 in
double), then every thread sums over all octahedron points, each one loaded (129 loads for T = 4,
6017 for T = 16). Not the T-step arithmetic of the reference, but the same linear map; its only
rounding to the storage type is the final store.

Nothing here imports Django.
"""
from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import numpy as np

from .cases import Case
from .codegen_base import acc_type, coefficient_locals, cuda_type, grid_extents, header, sum_lines
from .codegen_f16 import LAUNCH, straightforward_cuda_f16, vectorised

# The scalar straightforward CUDA kernel maps one thread to one grid point; tile = block. The
# single-step f16 kernel computes four x points per thread: straightforward_cuda_launch.
DEFAULT_CUDA_LAUNCH: dict[str, Any] = {"block": [32, 8, 1]}


def cuda_launch_geometry(case: Case, launch: dict[str, Any] | None = None
                         ) -> tuple[tuple[int, int, int], tuple[int, int, int], int]:
    """(grid, block, shared_bytes) of a CUDA launch JSON for `case`, as the ABI defines them.

    grid = ceil(nx/tx) × ceil(ny/ty) × ceil(nz/tz), tile defaulting to block; 2D cases have nz = 1.
    """
    launch = dict(DEFAULT_CUDA_LAUNCH if not launch else launch)
    block = tuple(int(v) for v in launch.get("block", DEFAULT_CUDA_LAUNCH["block"]))
    tile = tuple(int(v) for v in launch.get("tile", block))
    if len(block) != 3 or len(tile) != 3 or min(block) < 1 or min(tile) < 1:
        raise ValueError(f"launch needs block and tile of three positive integers, got {launch!r}")
    nz, ny, nx = grid_extents(case)
    grid = (-(-nx // tile[0]), -(-ny // tile[1]), -(-nz // tile[2]))
    return grid, block, int(launch.get("shared_bytes", 0))


def straightforward_cuda(case: Case) -> str:
    """CUDA C++ source of the straightforward kernel `stencil`, launched with
    straightforward_cuda_launch(case): single-step f16 cases get the vectorised kernel of
    codegen_f16, every other case the scalar one."""
    return straightforward_cuda_f16(case) if vectorised(case) else straightforward_cuda_scalar(case)


def straightforward_cuda_launch(case: Case) -> dict[str, Any]:
    """The launch JSON of straightforward_cuda(case) (a fresh dict of lists)."""
    return {key: list(value) for key, value in (LAUNCH if vectorised(case) else DEFAULT_CUDA_LAUNCH).items()}


def straightforward_cuda_scalar(case: Case) -> str:
    """The scalar straightforward kernel: one thread per grid point, launched with tile = block
    (DEFAULT_CUDA_LAUNCH), one load per neighbour. For f16 single-step cases it is the historical
    baseline `straightforward_f16_scalar` (codegen_f16 says why it was replaced)."""
    s = case.stencil
    f16 = case.precision == "f16"
    composed = s.time_steps > 1
    out = [
        header(case, "CUDA"),
        "#include <cuda_fp16.h>" if f16 else None,
        "",
        f"typedef {cuda_type(case.precision)} elem_t;",
        f"typedef {acc_type(case.precision)} acc_t;",
        "#define LOAD(p, k) __half2float((p)[k])" if f16 else "#define LOAD(p, k) ((acc_t)(p)[k])",
        "#define STORE(v) __float2half(v)" if f16 else "#define STORE(v) ((elem_t)(v))",
        "",
        *(cuda_composed_tables(case) if composed else []),
        'extern "C" __global__ void stencil(const elem_t* __restrict__ u, const elem_t* __restrict__ a,',
        "                                   elem_t* __restrict__ y, const double* __restrict__ coef,",
        "                                   int nz, int ny, int nx)",
        "{",
        *(cuda_composed_weights() if composed else []),
        "    const int x = blockIdx.x * blockDim.x + threadIdx.x;",
        "    const int j = blockIdx.y * blockDim.y + threadIdx.y;",
        "    const int z = blockIdx.z * blockDim.z + threadIdx.z;",
        f"    const int h = {s.halo};",
    ]
    if s.dims == 3:
        out.append("    if (x < h || x >= nx - h || j < h || j >= ny - h || z < h || z >= nz - h) return;")
    else:
        out.append("    if (x < h || x >= nx - h || j < h || j >= ny - h || z != 0) return;")
    out += [
        "    const int sy = nx;",
        "    const int sz = nx * ny;",
        "    (void)sz; (void)a;",
        "    const int i = (z * ny + j) * nx + x;",
    ]
    if composed:
        out += cuda_composed_sum()
    else:
        load = lambda index: f"LOAD(u, {index})"  # noqa: E731
        out += coefficient_locals(case, "    ")
        out += ["    acc_t acc = 0;", *sum_lines(case, load, "    ")]
    result = "acc * LOAD(a, i)" if s.variable_coefficient else "acc"
    out += [f"    y[i] = STORE({result});", "}"]
    return "\n".join(line for line in out if line is not None) + "\n"


# T applications of star_1 in one launch: tables at file scope, weights per block, one sum per thread.


def cuda_composed_tables(case: Case) -> list[str]:
    """STEPS, CLASS_OF (|dz|,|dy|,|dx| -> symmetry class) and POLY (class -> weight polynomial)."""
    s = case.stencil
    if s.classes != ((0,), (1,)) or s.dims != 3:
        raise ValueError(f"composed time steps are only generated for 3D star_1, not {case.type}")
    t = s.time_steps
    polys = composed_star1_polynomials(t)
    classes = sorted(polys)
    index_of = {c: n for n, c in enumerate(classes)}
    side = t + 1
    class_of = []
    for az in range(side):
        for ay in range(side):
            for ax in range(side):
                cls = tuple(sorted((az, ay, ax)))
                class_of.append(index_of.get(cls, 0) if az + ay + ax <= t else 0)  # outside: never read
    rows = []
    for cls in classes:
        row = [0] * side
        for m, integer in polys[cls]:
            row[m] = integer
        rows.append("    {" + ", ".join(f"{float(v)!r}" for v in row) + "},  /* |d| = " + str(cls) + " */")
    class_lines = [", ".join(str(v) for v in class_of[k : k + side]) for k in range(0, len(class_of), side)]
    return [
        f"/* {t} applications of star_1 are one linear stencil over |dz|+|dy|+|dx| <= {t} with weights",
        f" *   w(d) = sum_m POLY[class(d)][m] * c0^({t}-m) * c1^m,  POLY = C({t},m) * N(m; d),",
        " * N(m; d) = number of m-step walks on the 6-neighbour lattice from 0 to d (integers, exact). */",
        f"#define STEPS {t}",
        "#define SIDE (STEPS + 1)",
        f"#define CLASSES {len(classes)}",
        "/* CLASS_OF[(|dz| * SIDE + |dy|) * SIDE + |dx|] = the offset's symmetry class (sorted |d|). */",
        "__constant__ unsigned short CLASS_OF[SIDE * SIDE * SIDE] = {",
        *[f"    {line}," for line in class_lines],
        "};",
        "__constant__ double POLY[CLASSES][SIDE] = {",
        *rows,
        "};",
        "",
    ]


def cuda_composed_weights() -> list[str]:
    """Every block computes the weight table from coef into shared memory (before any return)."""
    return [
        "    __shared__ acc_t w[SIDE * SIDE * SIDE];",
        "    {",
        "        double p0[SIDE], p1[SIDE];  /* powers of coef[0] (centre) and coef[1] (neighbour) */",
        "        p0[0] = 1.0; p1[0] = 1.0;",
        "        #pragma unroll",
        "        for (int k = 1; k <= STEPS; ++k) { p0[k] = p0[k - 1] * coef[0]; p1[k] = p1[k - 1] * coef[1]; }",
        "        const int rank = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;",
        "        for (int e = rank; e < SIDE * SIDE * SIDE; e += blockDim.x * blockDim.y * blockDim.z) {",
        "            const double* poly = POLY[CLASS_OF[e]];",
        "            double sum = 0.0;",
        "            #pragma unroll",
        "            for (int m = 0; m <= STEPS; ++m) sum += poly[m] * p0[STEPS - m] * p1[m];",
        "            w[e] = (acc_t)sum;",
        "        }",
        "    }",
        "    __syncthreads();",
    ]


def cuda_composed_sum() -> list[str]:
    return [
        "    acc_t acc = 0;",
        "    for (int dz = -STEPS; dz <= STEPS; ++dz) {",
        "        const int az = abs(dz);",
        "        for (int dy = -(STEPS - az); dy <= STEPS - az; ++dy) {",
        "            const int ay = abs(dy);",
        "            const int rx = STEPS - az - ay;",
        "            for (int dx = -rx; dx <= rx; ++dx) {",
        "                acc += w[(az * SIDE + ay) * SIDE + abs(dx)] * LOAD(u, i + dz * sz + dy * sy + dx);",
        "            }",
        "        }",
        "    }",
    ]


def composed_star1_weights(time_steps: int, coef) -> dict[tuple[int, int, int], float]:
    """The weight of every offset of the T-fold star_1 for coefficients (c0, c1), in float64
    (what the CUDA kernel evaluates; exposed for tests and for anyone checking the algebra)."""
    c0, c1 = float(coef[0]), float(coef[1])
    t = time_steps
    polys = composed_star1_polynomials(t)
    weight = {cls: sum(integer * c0 ** (t - m) * c1**m for m, integer in terms) for cls, terms in polys.items()}
    return {offset: weight[tuple(sorted(abs(v) for v in offset))] for offset in octahedron(t)}


def octahedron(radius: int) -> list[tuple[int, int, int]]:
    """Offsets (dz, dy, dx) with |dz|+|dy|+|dx| <= radius, z slowest."""
    r = radius
    return [
        (dz, dy, dx)
        for dz in range(-r, r + 1)
        for dy in range(-(r - abs(dz)), r - abs(dz) + 1)
        for dx in range(-(r - abs(dz) - abs(dy)), r - abs(dz) - abs(dy) + 1)
    ]


@lru_cache(maxsize=None)
def composed_star1_polynomials(time_steps: int) -> dict[tuple[int, int, int], list[tuple[int, int]]]:
    """For each class (sorted |d|) of the T-fold star_1: [(m, C(T, m)·N(m; d)), ...], m = moves.

    The weight is Σ (integer) · c0^(T-m) · c1^m. Integers are exact (each < 7^T <= 7^16 < 2^53).
    """
    t = time_steps
    size = 2 * t + 1
    walks = np.zeros((size, size, size), dtype=np.int64)
    walks[t, t, t] = 1
    per_moves = [walks.copy()]
    for _ in range(t):
        nxt = np.zeros_like(walks)
        nxt[1:, :, :] += walks[:-1, :, :]
        nxt[:-1, :, :] += walks[1:, :, :]
        nxt[:, 1:, :] += walks[:, :-1, :]
        nxt[:, :-1, :] += walks[:, 1:, :]
        nxt[:, :, 1:] += walks[:, :, :-1]
        nxt[:, :, :-1] += walks[:, :, 1:]
        walks = nxt
        per_moves.append(walks.copy())
    result: dict[tuple[int, int, int], list[tuple[int, int]]] = {}
    for offset in octahedron(t):
        cls = tuple(sorted(abs(v) for v in offset))
        if cls in result:
            continue
        at = tuple(t + v for v in cls)
        terms = []
        for m in range(t + 1):
            count = int(per_moves[m][at])
            if count:
                terms.append((m, math.comb(t, m) * count))
        result[cls] = terms
    return result



def empty_cuda(case: Case) -> str:
    """The CUDA form of `empty_c`: a launch that does nothing."""
    t = cuda_type(case.precision)
    include = "#include <cuda_fp16.h>\n" if case.precision == "f16" else ""
    return (f'{include}extern "C" __global__ void stencil(const {t}* __restrict__ u, const {t}* __restrict__ a, '
            f"{t}* __restrict__ y, const double* __restrict__ coef, int nz, int ny, int nx) {{}}\n")
