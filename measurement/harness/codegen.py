"""Source of the *straightforward* kernel of any case, in C (CPU) and CUDA C++ (CUDA).

Straightforward means the obvious kernel a careful person writes first: one output point per
loop iteration (C, OpenMP over z,y in 3D and over y in 2D) or per thread (CUDA), every
neighbour loaded from memory, the coefficients taken from `coef[class_index]`, accumulation
in double for f64 and in float for f32 and f16 (f16 is half storage: `_Float16` in C,
`__half` in CUDA, converted to float on load and back on store). Both follow the kernel ABI
in measurement.backends.base; loops cover the written region only (halo on every axis).

Temporal types (diamond_tsT, T > 1 applications of star_1):

* C: two scratch grids of the accumulation type are malloc'd inside the call; step 1 reads u,
  steps 2..T-1 ping-pong between the scratch grids, each over its shrinking region (halo = the
  step number), and step T writes y over the case's region. Scratch in the accumulation type
  (not the storage type) means the only rounding to f16 is the final store, the same numerical
  floor as the CUDA kernel below. If malloc fails the kernel returns without writing y (the
  poisoned output then fails the check rather than the process).
* CUDA: one launch cannot synchronise the grid between steps (the ABI has no scratch and no
  multi-launch), so the kernel evaluates the T-step result directly: T applications of the
  linear operator c0·I + c1·(Sx + Sy + Sz) are one linear stencil of radius T over the
  octahedron |dz|+|dy|+|dx| <= T, with weight
      w(d) = Σ_m  C(T, m) · N(m; d) · c0^(T-m) · c1^m
  where N(m; d) is the number of m-step walks on the 6-neighbour lattice from 0 to d. The
  integers C(T, m)·N(m; d) (< 7^T, exact in double) are computed here at codegen time and
  emitted as __constant__ tables per symmetry class of |d|; each block evaluates the weights in
  double from the runtime coef into shared memory ((T+1)³ entries: 500 B for T = 4 in float,
  39 KB for T = 16 in double), then every thread sums over all octahedron points, each one
  loaded (129 loads for T = 4, 6017 for T = 16). Not the T-step arithmetic of the reference,
  but the same linear map; its only rounding to the storage type is the final store.

Single-step f16 cases on CUDA get a kernel of their own, four x points per thread with 8-byte
vector loads (measurement.harness.codegen_f16); their scalar kernel stays a historical baseline.

Nothing here imports Django.
"""
from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import numpy as np

from .cases import Case

# Element (storage) types and accumulation types per precision.
C_TYPES = {"f16": "_Float16", "f32": "float", "f64": "double"}
CUDA_TYPES = {"f16": "__half", "f32": "float", "f64": "double"}
ACC_TYPES = {"f16": "float", "f32": "float", "f64": "double"}

# The scalar straightforward CUDA kernel maps one thread to one grid point; tile = block. The
# single-step f16 kernel computes four x points per thread: straightforward_cuda_launch.
DEFAULT_CUDA_LAUNCH: dict[str, Any] = {"block": [32, 8, 1]}


def c_type(precision: str) -> str:
    """The C element type of a precision: `_Float16`, `float` or `double`."""
    return C_TYPES[precision]


def cuda_type(precision: str) -> str:
    """The CUDA element type of a precision: `__half`, `float` or `double`."""
    return CUDA_TYPES[precision]


def acc_type(precision: str) -> str:
    """The type the straightforward kernels accumulate in (C and CUDA spell it alike)."""
    return ACC_TYPES[precision]


def cuda_launch_geometry(case: Case, launch: dict[str, Any] | None = None) -> tuple[tuple[int, int, int], tuple[int, int, int], int]:
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


def grid_extents(case: Case) -> tuple[int, int, int]:
    """(nz, ny, nx) as the kernel receives them (2D: nz = 1)."""
    shape = tuple(case.shape)
    return (1, *shape) if len(shape) == 2 else shape  # type: ignore[return-value]


# ---------------------------------------------------------------- shared helpers


def index_expr(offset: tuple[int, ...], base: str = "i") -> str:
    """`i + dz*sz + dy*sy + dx` for an offset in array-axis order (z, y, x) or (y, x)."""
    strides = ("sz", "sy", "")[3 - len(offset):]
    text = base
    for step, stride in zip(offset, strides):
        if step == 0:
            continue
        sign = "-" if step < 0 else "+"
        magnitude = abs(step)
        if stride == "":
            term = str(magnitude)
        else:
            term = stride if magnitude == 1 else f"{magnitude} * {stride}"
        text += f" {sign} {term}"
    return text


def header(case: Case, language: str) -> str:
    s = case.stencil
    lines = [
        f"/* Straightforward {language} kernel for {case.type}/{case.precision} (any shape; nz, ny, nx come at run time),",
        " * generated by measurement.harness.codegen.",
        f" * y[p] = {'a[p] * ' if s.variable_coefficient else ''}sum_o coef[class(o)] * u[p + o] over {len(s.offsets)} offsets"
        + (f", applied {s.time_steps} times" if s.time_steps > 1 else "")
        + ";",
        f" * written region: the grid minus a halo of {s.halo} on every axis. */",
    ]
    return "\n".join(lines)


def coefficient_locals(case: Case, indent: str) -> list[str]:
    return [f"{indent}const acc_t c{k} = (acc_t)coef[{k}];" for k in range(len(case.stencil.classes))]


def sum_lines(case: Case, load, indent: str) -> list[str]:
    """`acc += c<k> * LOAD(u, i + off);` for every offset, in the stencil's order."""
    s = case.stencil
    return [f"{indent}acc += c{k} * {load(index_expr(o))};" for o, k in zip(s.offsets, s.class_index)]


# ---------------------------------------------------------------- C


def straightforward_c(case: Case) -> str:
    """C source of the straightforward OpenMP kernel `stencil` for `case` (ABI: base.py)."""
    s = case.stencil
    elem, acc = c_type(case.precision), acc_type(case.precision)
    out = [
        header(case, "C"),
        "#include <stddef.h>",
        "#include <stdlib.h>" if s.time_steps > 1 else None,
        "",
        f"typedef {elem} elem_t;",
        f"typedef {acc} acc_t;",
        "",
        "void stencil(const elem_t* u, const elem_t* a, elem_t* y, const double* coef, int nz, int ny, int nx)",
        "{",
        "    const ptrdiff_t sy = nx;",
        "    const ptrdiff_t sz = (ptrdiff_t)nx * ny;",
        "    (void)sz; (void)a;",
        *coefficient_locals(case, "    "),
    ]
    if s.time_steps == 1:
        out += _c_sweep(case, str(s.halo), src="u", dst="y", src_is_elem=True, dst_is_elem=True)
    else:
        out += _c_time_steps(case)
    out.append("}")
    return "\n".join(line for line in out if line is not None) + "\n"


def _c_sweep(case: Case, halo: str, src: str, dst: str, src_is_elem: bool, dst_is_elem: bool) -> list[str]:
    """One application of the stencil over the region `halo` cells inside the grid's edges."""
    s = case.stencil

    def load(index: str) -> str:
        return f"(acc_t){src}[{index}]" if src_is_elem else f"{src}[{index}]"

    result = "acc * (acc_t)a[i]" if (s.variable_coefficient and dst == "y") else "acc"
    store = f"{dst}[i] = (elem_t)({result});" if dst_is_elem else f"{dst}[i] = {result};"
    if s.dims == 3:
        head = [
            "    #pragma omp parallel for collapse(2) schedule(static)",
            f"    for (int z = {halo}; z < nz - {halo}; ++z) {{",
            f"        for (int j = {halo}; j < ny - {halo}; ++j) {{",
            f"            for (int x = {halo}; x < nx - {halo}; ++x) {{",
            "                const ptrdiff_t i = z * sz + j * sy + x;",
        ]
        indent, tail = "                ", ["            }", "        }", "    }"]
    else:
        head = [
            "    #pragma omp parallel for schedule(static)",
            f"    for (int j = {halo}; j < ny - {halo}; ++j) {{",
            f"        for (int x = {halo}; x < nx - {halo}; ++x) {{",
            "            const ptrdiff_t i = j * sy + x;",
        ]
        indent, tail = "            ", ["        }", "    }"]
    body = [f"{indent}acc_t acc = 0;", *sum_lines(case, load, indent), f"{indent}{store}"]
    return head + body + tail


def _indented(lines: list[str]) -> list[str]:
    return ["    " + line for line in lines]


def _c_time_steps(case: Case) -> list[str]:
    """T applications: u -> s0, then ping-pong s0 <-> s1 over shrinking regions, last -> y."""
    t = case.stencil.time_steps
    out = [
        "    /* T = %d steps: scratch grids in the accumulation type, step k over halo k. */" % t,
        "    const size_t n = (size_t)nz * (size_t)ny * (size_t)nx;",
        "    acc_t* s0 = (acc_t*)malloc(n * sizeof(acc_t));",
        "    acc_t* s1 = (acc_t*)malloc(n * sizeof(acc_t));" if t > 2 else "    acc_t* s1 = NULL;",
        "    if (s0 == NULL || (%s)) { free(s0); free(s1); return; }" % ("s1 == NULL" if t > 2 else "0"),
        "    /* step 1: u -> s0 */",
        "    {",
        "        acc_t* dst = s0;",
        *_indented(_c_sweep(case, "1", src="u", dst="dst", src_is_elem=True, dst_is_elem=False)),
        "    }",
    ]
    if t > 2:
        out += [
            f"    /* steps 2 .. {t - 1}: ping-pong between s0 and s1 */",
            f"    for (int step = 2; step < {t}; ++step) {{",
            "        const acc_t* src = (step % 2 == 0) ? s0 : s1;",
            "        acc_t* dst = (step % 2 == 0) ? s1 : s0;",
            "        const int h = step;",
            *_indented(_c_sweep(case, "h", src="src", dst="dst", src_is_elem=False, dst_is_elem=False)),
            "    }",
        ]
    last_src = "s0" if t % 2 == 0 else "s1"  # step T-1 wrote s0 when T-1 is odd
    out += [
        f"    /* step {t}: {last_src} -> y over the case's region */",
        "    {",
        f"        const acc_t* src = {last_src};",
        *_indented(_c_sweep(case, str(t), src="src", dst="y", src_is_elem=False, dst_is_elem=True)),
        "    }",
        "    free(s0);",
        "    free(s1);",
    ]
    return out


# ---------------------------------------------------------------- CUDA


def straightforward_cuda(case: Case) -> str:
    """CUDA C++ source of the straightforward kernel `stencil`, launched with
    straightforward_cuda_launch(case): single-step f16 cases get the vectorised kernel of
    codegen_f16 (imported here: it builds on this module's helpers), every other case the scalar one."""
    from .codegen_f16 import straightforward_cuda_f16, vectorised

    return straightforward_cuda_f16(case) if vectorised(case) else straightforward_cuda_scalar(case)


def straightforward_cuda_launch(case: Case) -> dict[str, Any]:
    """The launch JSON of straightforward_cuda(case) (a fresh dict of lists)."""
    from .codegen_f16 import LAUNCH, vectorised

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


def empty_c(case: Case) -> str:
    """A kernel with the ABI and no body: timing it gives the harness's own cost of a launch."""
    t = c_type(case.precision)
    return (f"void stencil(const {t} *u, const {t} *a, {t} *y, const double *coef, int nz, int ny, int nx)"
            " { (void)u; (void)a; (void)y; (void)coef; (void)nz; (void)ny; (void)nx; }\n")


def empty_cuda(case: Case) -> str:
    """The CUDA form of `empty_c`: a launch that does nothing."""
    t = cuda_type(case.precision)
    include = "#include <cuda_fp16.h>\n" if case.precision == "f16" else ""
    return (f'{include}extern "C" __global__ void stencil(const {t}* __restrict__ u, const {t}* __restrict__ a, '
            f"{t}* __restrict__ y, const double* __restrict__ coef, int nz, int ny, int nx) {{}}\n")
