"""The vector path of a lean plane-queue kernel (forge/handwritten.py `render(pipelined=True)`) with its loads one
plane ahead: plane n + 1's row vectors are loaded raw into registers before plane n is converted, summed and stored,
so that a warp has a plane's loads in flight while it works on the one before.

Why (session 47): in the SASS of the admitted star_1/512^3 f16 kernel (rows16+alternate+lean, `nvcc -arch=sm_90`)
the second plane of each unrolled pair issues its loads only after the first plane's conversions, sums and store:
the store's branch (whole vector, or lanes at the grid's x edges) ends a basic block, and nvcc schedules no load
above it. So each warp waits a full memory latency every plane, and only the other resident warps (50% occupancy
at 52 registers) cover it. Session 46's pattern copies (H100) put the case's reads alone at about 90% of copy and
its kernel 9 points below: its own per-plane work. The 2D `burst` kernels, whose loads all issue before any
arithmetic, run above the marching copies (star2d_1/16384^2 f16 98.9% on the H100). Raw registers are the cheap
buffer: a 16-byte row vector is 4 registers in every precision, where the converted f16 row is 8 floats.

The last plane loads itself again (the address never leaves the chunk's planes) so the loop has no branch around
its loads; the lane path (odd shapes, unaligned arrays) keeps the plain march.
"""
from __future__ import annotations

from measurement.harness.cases import Case

from .handwritten_bodies import QUEUE_SHIFT, QUEUE_ZERO, march_direction, name, plane_sums, row_span, rows_needed
from .handwritten_loads import VECTOR_TYPE, row_load, vector_lines


def convert_helper(precision: str, vw: int, vector_bytes: int) -> list[str]:
    """`convert_vector`: one raw vector's VW lanes as acc_t, the conversion `load_vector` does after its load."""
    vtype = VECTOR_TYPE[precision, vector_bytes]
    load, _, _ = vector_lines(precision, vw, vtype)
    conversion = load[1:] if vw > 1 else ["    out[0] = (acc_t)v;"]  # one element a lane: `load` reads it from p
    return [f"__device__ __forceinline__ void convert_vector(const {vtype}& v, acc_t* out)", "{", *conversion, "}"]


def pipelined_march(case: Case, plan: dict, v: int, vw: int, vector_bytes: int, unroll: int, alternate: bool,
                    store: list[str], own_row: bool = False, shuffle: bool = False) -> list[str]:
    """The queue and the march of the vector path (nv vectors a row, `store` the queue's store at `out`): plane n's
    rows converted from the registers loaded last step, plane n + 1's loaded into them, then plane n summed. With
    `own_row` only the thread's own row (dy = 0, with its x halo) goes ahead, the DRAM row: the rows above and below are
    the neighbouring warps' own and mostly L1 and L2 hits, loaded in their step as the lean kernel does, and the
    kernel's registers fall (star_1/512^3 f16's rows16: 68 to 56). With `shuffle` a row's x halo comes from the
    neighbouring lanes' converted vectors by warp shuffles, as `render(shuffle=True)`'s does, and only its own vectors
    go ahead: the H200's pattern copies lost 8-9 points of copy to the two halo vectors a plane of star_1 f16."""
    three = case.stencil.dims == 3
    vtype = VECTOR_TYPE[case.precision, vector_bytes]
    rows = rows_needed(plan)
    spans = {dy: row_span(case, rows, dy, vw) for dy in rows}
    vectors: list[tuple[str, str, int, int]] = []  # (register, row, first lane, offset of the row's vector)
    for dy in sorted(rows):
        if own_row and dy:
            continue
        lo, hi = spans[dy]
        vectors += [(f"w{name(dy)}_{'l' if s < 0 else 'r' if s >= v else s // vw}", f"r{name(dy)}", s, dy)
                    for s in range(-vw if lo else 0, v + (vw if hi else 0), vw) if 0 <= s < v or not shuffle]
    loads = [f"            {register} = *reinterpret_cast<const {vtype}*>(u + p{f' + ({dy}L) * nx' if three and dy else ''}"
             f" + ({start}));" for register, _, start, dy in vectors]

    body = []
    for dy in sorted(rows):
        lo, hi = spans[dy]
        row = f"r{name(dy)}"
        body.append(f"        acc_t {row}[V + 2 * R];")
        offset = f"base + ({dy}L) * nx" if three and dy else "base"
        if own_row and dy:  # loaded in its step, as in the lean kernel
            body += row_load(row, offset, lo, hi, case.stencil.radius, "R", v, vw, "        ", shuffle)
            continue
        for register, of, start, _ in vectors:
            if of != row:
                continue
            if 0 <= start < v:
                body.append(f"        convert_vector({register}, &{row}[R + {start}]);")
            else:
                kept = [x for x in range(start, start + vw) if lo <= x <= v - 1 + hi]
                body += [f"        {{ acc_t t[VW]; convert_vector({register}, t);",
                         *[f"          {row}[R + ({x})] = t[{x - start}];" for x in kept], "        }"]
        if shuffle and (lo or hi):  # the halo from the neighbouring lanes (their own vectors, converted above)
            body += row_load(row, offset, lo, hi, case.stencil.radius, "R", v, vw, "        ", shuffle, own_loaded=True)
    return [
        "    acc_t q[2 * R + 1][V];", *QUEUE_ZERO,
        march_direction(three) if alternate else "    constexpr int dir = 1;",
        "    long base = (long)(dir > 0 ? kb - R : ke + R - 1) * sk + rowbase;",
        "    const long step = dir * sk;",
        "    const int count = ke - kb + 2 * R;",
        f"    {vtype} {', '.join(register for register, *_ in vectors)};",
        "    {", "        const long p = base;", *[line[4:] for line in loads], "    }",
        f"#pragma unroll {unroll}",
        "    for (int n = 0; n < count; ++n, base += step) {",
        *body,
        "        {  /* plane n + 1 (the last plane: itself again) */",
        "            const long p = base + (n + 1 < count ? step : 0);", *loads, "        }",
        *plane_sums(plan, case.stencil.radius, "        "),
        "        if (n >= 2 * R) {", "            const long out = base - R * step;", *store, "        }",
        *QUEUE_SHIFT,
        "    }",
    ]
