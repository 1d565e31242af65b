"""The straightforward CUDA kernel of a single-step f16 case: four x points per thread, 8-byte loads.

Why a kernel of its own: the scalar one (one point per thread, a 2-byte load per neighbour, kept
as the historical baseline `straightforward_f16_scalar`) issues as many load instructions per
point as the f32 kernel, each for half the bytes, and took 0.90-1.05x the f32 kernel's time on
the same grid (issue 15): an f16 bound that slow measured that weakness, not f16 stencils. The
obvious f16 kernel moves its bytes in wider loads:

* each thread computes POINTS = 4 consecutive x points x0 .. x0 + 3 (x0 a multiple of 4);
* for every row (dz, dy) the stencil touches it loads the aligned 4-half vector at x0 and, where
  that row has x neighbours, the aligned vectors left and right of it (8 bytes each; every
  radius is <= 4 = POINTS, so three vectors cover x0 - r .. x0 + 3 + r) and takes the unaligned
  neighbours x +- r from those registers: window element m holds x0 - 4 + m;
* each point's arithmetic is the scalar kernel's, in the same order: acc = 0, then
  acc += c[class] * (float)u[p + o] over the stencil's offsets, times (float)a[p] for varcoef, one
  rounding to f16 at the store (four halves, one 8-byte store inside the region). NVRTC contracts
  both kernels' sums into the same FMAs, so the outputs are the scalar kernel's, bit for bit.

The vector path needs rows that start 8-byte aligned: nx % 4 == 0 and u, a, y 8-byte aligned
(the harness's arrays are 256-byte aligned). Otherwise (the odd check shape B, nx = 71) each
thread computes its four points one by one with the scalar kernel's loads: a branch uniform over
the grid, the same arithmetic. The vectors left and right of a thread at a row's ends would lie
outside the row; there the thread loads its own vector again instead: no point of the written
region needs those values (its x - r >= 0 and x + r < nx).

Launch: LAUNCH, block 32 x 8 x 1 threads over a tile of 128 x 8 x 1 points. With tile = block
(codegen.DEFAULT_CUDA_LAUNCH, as some callers launch every straightforward kernel) it is still
correct: the blocks past the grid's end find no point and return.

Temporal f16 cases keep the scalar composed kernel (codegen.straightforward_cuda): its sum runs
over the octahedron in loops, not over a row list, and no matrix has an f16 diamond case.

Nothing here imports Django.
"""
from __future__ import annotations

from typing import Any

from .cases import Case
from .codegen_base import coefficient_locals, header, index_expr, sum_lines

POINTS = 4  # x points per thread: one 8-byte vector of halves
LAUNCH: dict[str, Any] = {"block": [32, 8, 1], "tile": [32 * POINTS, 8, 1]}
# The three aligned vectors of a row: left of the thread's own, its own, right of it.
SLOTS = (("l", "- POINTS * has_left"), ("c", ""), ("r", "+ POINTS * has_right"))
HALVES = ("__low2float({v}.lo)", "__high2float({v}.lo)", "__low2float({v}.hi)", "__high2float({v}.hi)")


def vectorised(case: Case) -> bool:
    """Whether the straightforward CUDA kernel of `case` is this module's (f16, one time step)."""
    return case.precision == "f16" and case.stencil.time_steps == 1


def straightforward_cuda_f16(case: Case) -> str:
    """CUDA C++ source of the vectorised straightforward f16 kernel `stencil` (ABI: base.py)."""
    s = case.stencil
    if not vectorised(case):
        raise ValueError(f"the vectorised f16 kernel is for single-step f16 cases, not {case.id}")
    inside = ("j < h || j >= ny - h || z < h || z >= nz - h" if s.dims == 3 else "j < h || j >= ny - h || z != 0")
    out = [
        header(case, "CUDA"),
        f"/* f16: {POINTS} x points per thread, 8-byte vector loads and stores (measurement.harness.codegen_f16). */",
        "#include <cuda_fp16.h>",
        "",
        "typedef __half elem_t;",
        "typedef float acc_t;",
        "#define LOAD(p, k) __half2float((p)[k])",
        "#define STORE(v) __float2half(v)",
        f"#define POINTS {POINTS}",
        "struct half4 { __half2 lo, hi; };",
        "/* 8-byte accesses through uint2: a struct of two __half2 is moved as two 4-byte accesses. */",
        "__device__ __forceinline__ half4 vec(const elem_t* p)",
        "{",
        "    const uint2 bits = *reinterpret_cast<const uint2*>(p);",
        "    half4 v;",
        "    v.lo = *reinterpret_cast<const __half2*>(&bits.x);",
        "    v.hi = *reinterpret_cast<const __half2*>(&bits.y);",
        "    return v;",
        "}",
        "__device__ __forceinline__ void store_vec(elem_t* p, const __half2 lo, const __half2 hi)",
        "{",
        "    uint2 bits;",
        "    bits.x = *reinterpret_cast<const unsigned*>(&lo);",
        "    bits.y = *reinterpret_cast<const unsigned*>(&hi);",
        "    *reinterpret_cast<uint2*>(p) = bits;",
        "}",
        "",
        'extern "C" __global__ void stencil(const elem_t* __restrict__ u, const elem_t* __restrict__ a,',
        "                                   elem_t* __restrict__ y, const double* __restrict__ coef,",
        "                                   int nz, int ny, int nx)",
        "{",
        "    const int x0 = POINTS * (blockIdx.x * blockDim.x + threadIdx.x);",
        "    const int j = blockIdx.y * blockDim.y + threadIdx.y;",
        "    const int z = blockIdx.z * blockDim.z + threadIdx.z;",
        f"    const int h = {s.halo};",
        f"    if (x0 + POINTS <= h || x0 >= nx - h || {inside}) return;",
        "    const int sy = nx;",
        "    const int sz = nx * ny;",
        "    (void)sz; (void)a;",
        *coefficient_locals(case, "    "),
        "    const int i0 = (z * ny + j) * nx + x0;",
        "    const bool aligned = nx % POINTS == 0 && ((size_t)u | (size_t)a | (size_t)y) % 8 == 0;",
        "    if (!aligned) {  /* rows not 8-byte aligned: the scalar kernel's loads, point by point */",
        "        for (int k = 0; k < POINTS; ++k) {",
        "            if (x0 + k < h || x0 + k >= nx - h) continue;",
        "            const int i = i0 + k;",
        "            acc_t acc = 0;",
        *sum_lines(case, lambda index: f"LOAD(u, {index})", "            "),
        f"            y[i] = STORE({'acc * LOAD(a, i)' if s.variable_coefficient else 'acc'});",
        "        }",
        "        return;",
        "    }",
        "    const int has_left = x0 > 0, has_right = x0 + POINTS < nx;  /* else the own vector again: never used */",
        *_vector_body(case),
        "}",
    ]
    return "\n".join(out) + "\n"


def _vector_body(case: Case) -> list[str]:
    """Loads of every row's vectors, the four sums in the stencil's offset order, the stores."""
    s = case.stencil
    rows: dict[tuple[int, ...], set[int]] = {}
    for offset in s.offsets:
        rows.setdefault(offset[:-1], set()).add(offset[-1])
    names = {row: f"r{n}" for n, row in enumerate(rows)}
    lines = []
    for row, shifts in rows.items():
        base = index_expr((*row, 0), "i0")
        needed = {k + dx + POINTS for k in range(POINTS) for dx in shifts}  # window elements m
        for slot, (suffix, shift) in enumerate(SLOTS):
            elements = sorted(m for m in needed if m // POINTS == slot)
            if not elements:
                continue
            vector = f"{names[row]}{suffix}"
            lines.append(f"    const half4 {vector} = vec(u + {base} {shift});" if shift else f"    const half4 {vector} = vec(u + {base});")
            lines += [f"    const acc_t {names[row]}_{m} = {HALVES[m % POINTS].format(v=vector)};" for m in elements]
    lines += [f"    acc_t acc{k} = 0;" for k in range(POINTS)]
    for offset, cls in zip(s.offsets, s.class_index):
        row, dx = names[offset[:-1]], offset[-1]
        lines += [f"    acc{k} += c{cls} * {row}_{k + dx + POINTS};" for k in range(POINTS)]
    if s.variable_coefficient:
        lines.append("    const half4 av = vec(a + i0);")
        lines += [f"    acc{k} *= {HALVES[k].format(v='av')};" for k in range(POINTS)]
    stores = [f"STORE(acc{k})" for k in range(POINTS)]
    lines += [
        "    if (x0 >= h && x0 + POINTS <= nx - h) {  /* all four points in the region: one 8-byte store */",
        f"        store_vec(y + i0, __halves2half2({stores[0]}, {stores[1]}), __halves2half2({stores[2]}, {stores[3]}));",
        "    } else {",
        *[f"        if (x0 + {k} >= h && x0 + {k} < nx - h) y[i0 + {k}] = {stores[k]};" for k in range(POINTS)],
        "    }",
    ]
    return lines
