"""The C (OpenMP) writer of forge.kernelgen: one sweep in the plan's loop order, T sweeps through
scratch grids, or overlapped temporal blocking (the CPU parameters of forge/kernelgen/plan.py)."""
from __future__ import annotations

from typing import Any, Callable

from measurement.harness.cases import Case
from measurement.harness.codegen import acc_type, c_type

from .plan import plan_comment
from .terms import grouped, offset_text, offsets3


def c_source(case: Case, p: dict[str, Any]) -> str:
    s = case.stencil
    restrict = "restrict " if p["restrict"] else ""
    out = [
        plan_comment(case, "cpu", p),
        "#include <stddef.h>",
        "#include <stdlib.h>" if s.time_steps > 1 else None,
        "",
        f"typedef {c_type(case.precision)} elem_t;",
        f"typedef {acc_type(case.precision)} acc_t;",
        "",
        f"void stencil(const elem_t* {restrict}u, const elem_t* {restrict}a, elem_t* {restrict}y, "
        f"const double* {restrict}coef, int nz, int ny, int nx)",
        "{",
        "    const ptrdiff_t sy = nx;",
        "    const ptrdiff_t sz = (ptrdiff_t)nx * ny;",
        "    (void)sz; (void)sy; (void)a;",
        *[f"    const acc_t c{k} = (acc_t)coef[{k}];" for k in range(len(s.classes))],
    ]
    if s.time_steps == 1:
        out += _c_sweep(case, p, str(s.halo), "u", True, "y", True, "    ")
    elif p["temporal"] == "blocked":
        out += _c_blocked(case, p)
    else:
        out += _c_sweeps(case, p)
    out.append("}")
    return "\n".join(line for line in out if line is not None) + "\n"


def _c_point(case: Case, p: dict[str, Any], load: Callable[[tuple[int, int, int]], str], indent: str) -> list[str]:
    """Lines computing `acc` for one point from load(offset)."""
    terms = list(zip(offsets3(case), case.stencil.class_index))
    if not p["unroll_classes"]:
        return [f"{indent}acc_t acc = 0;", *[f"{indent}acc += c{k} * {load(o)};" for o, k in terms]]
    lines = []
    for n, (k, offs) in enumerate(grouped(terms)):
        expr = " + ".join(load(o) for o in offs)
        lines.append(f"{indent}{'acc_t acc = ' if n == 0 else 'acc += '}c{k} * ({expr});")
    return lines


def _c_point_lines(case, p, src, src_elem, dst, dst_elem, indent, src_index="i", dst_index="i", strides=("sz", "sy")):
    def load(o):
        ref = f"{src}[{src_index}{offset_text(o, *strides)}]"
        return f"(acc_t){ref}" if src_elem else ref

    final = dst == "y"
    result = "acc * (acc_t)a[%s]" % dst_index if (case.stencil.variable_coefficient and final) else "acc"
    store = f"{dst}[{dst_index}] = (elem_t)({result});" if dst_elem else f"{dst}[{dst_index}] = {result};"
    return _c_point(case, p, load, indent) + [f"{indent}{store}"]


def _omp_for(p: dict[str, Any], loops: int, parallel: bool = True) -> str:
    clause = " collapse(2)" if (p["collapse"] == 2 and loops >= 2) else ""
    return f"#pragma omp {'parallel for' if parallel else 'for'}{clause} schedule({p['schedule']})"


def _c_sweep(case: Case, p: dict[str, Any], halo: str, src: str, src_elem: bool, dst: str, dst_elem: bool, indent: str) -> list[str]:
    """One application over the region `halo` inside the grid's edges, in the plan's loop order."""
    s = case.stencil
    body_indent = indent + "    " * (3 if s.dims == 3 else 2) + ("    " * 3 if p["loop_order"] == "tiled" else "")
    body = _c_point_lines(case, p, src, src_elem, dst, dst_elem, body_indent)
    simd = [f"{body_indent[:-4]}#pragma omp simd"] if p["simd"] else []
    I = indent  # noqa: E741
    H = halo
    if p["loop_order"] == "zyx":
        if s.dims == 3:
            return [
                f"{I}{_omp_for(p, 2)}",
                f"{I}for (int z = {H}; z < nz - {H}; ++z) {{",
                f"{I}    for (int j = {H}; j < ny - {H}; ++j) {{",
                f"{I}        const ptrdiff_t row = (ptrdiff_t)z * sz + (ptrdiff_t)j * sy;",
                *simd,
                f"{I}        for (int x = {H}; x < nx - {H}; ++x) {{",
                f"{I}            const ptrdiff_t i = row + x;",
                *body,
                f"{I}        }}",
                f"{I}    }}",
                f"{I}}}",
            ]
        return [
            f"{I}{_omp_for(p, 1)}",
            f"{I}for (int j = {H}; j < ny - {H}; ++j) {{",
            f"{I}    const ptrdiff_t row = (ptrdiff_t)j * sy;",
            *simd,
            f"{I}    for (int x = {H}; x < nx - {H}; ++x) {{",
            f"{I}        const ptrdiff_t i = row + x;",
            *body,
            f"{I}    }}",
            f"{I}}}",
        ]
    by = str(p["block_y"])
    bx = str(p["block_x"]) if p["block_x"] > 0 else "nx"
    head = [
        f"{I}{{",
        f"{I}    const int BY = {by}, BX = {bx};  /* tile (0 = whole rows: nx) */",
        f"{I}    {_omp_for(p, 2)}",
        f"{I}    for (int yb = {H}; yb < ny - {H}; yb += BY) {{",
        f"{I}        for (int xb = {H}; xb < nx - {H}; xb += BX) {{",
        f"{I}            const int ye = (yb + BY < ny - {H}) ? yb + BY : ny - {H};",
        f"{I}            const int xe = (xb + BX < nx - {H}) ? xb + BX : nx - {H};",
    ]
    if s.dims == 3:
        nest = [
            f"{I}            for (int z = {H}; z < nz - {H}; ++z) {{",
            f"{I}                for (int j = yb; j < ye; ++j) {{",
            f"{I}                    const ptrdiff_t row = (ptrdiff_t)z * sz + (ptrdiff_t)j * sy;",
            *simd,
            f"{I}                    for (int x = xb; x < xe; ++x) {{",
            f"{I}                        const ptrdiff_t i = row + x;",
            *body,
            f"{I}                    }}",
            f"{I}                }}",
            f"{I}            }}",
        ]
    else:
        nest = [
            f"{I}            for (int j = yb; j < ye; ++j) {{",
            f"{I}                const ptrdiff_t row = (ptrdiff_t)j * sy;",
            *simd,
            f"{I}                for (int x = xb; x < xe; ++x) {{",
            f"{I}                    const ptrdiff_t i = row + x;",
            *body,
            f"{I}                }}",
            f"{I}            }}",
        ]
    return head + nest + [f"{I}        }}", f"{I}    }}", f"{I}}}"]


def _c_sweeps(case: Case, p: dict[str, Any]) -> list[str]:
    """T whole-grid sweeps: u -> s0, ping-pong s0 <-> s1 over shrinking regions, last -> y."""
    t = case.stencil.time_steps
    r = "restrict " if p["restrict"] else ""
    out = [
        f"    /* T = {t} sweeps: scratch grids in the accumulation type, step k over halo k. */",
        "    const size_t n = (size_t)nz * (size_t)ny * (size_t)nx;",
        "    acc_t* s0 = (acc_t*)malloc(n * sizeof(acc_t));",
        "    acc_t* s1 = (acc_t*)malloc(n * sizeof(acc_t));" if t > 2 else "    acc_t* s1 = NULL;",
        "    if (s0 == NULL || (%s)) { free(s0); free(s1); return; }" % ("s1 == NULL" if t > 2 else "0"),
        "    {",
        f"        acc_t* {r}dst = s0;",
        *_c_sweep(case, p, "1", "u", True, "dst", False, "        "),
        "    }",
    ]
    if t > 2:
        out += [
            f"    for (int step = 2; step < {t}; ++step) {{",
            f"        const acc_t* {r}src = (step % 2 == 0) ? s0 : s1;",
            f"        acc_t* {r}dst = (step % 2 == 0) ? s1 : s0;",
            "        const int h = step;",
            *_c_sweep(case, p, "h", "src", False, "dst", False, "        "),
            "    }",
        ]
    last = "s0" if t % 2 == 0 else "s1"
    out += [
        "    {",
        f"        const acc_t* {r}src = {last};",
        *_c_sweep(case, p, str(t), "src", False, "y", True, "        "),
        "    }",
        "    free(s0);",
        "    free(s1);",
    ]
    return out


def _c_blocked(case: Case, p: dict[str, Any]) -> list[str]:
    """Overlapped temporal blocking (3D, T > 1): per output tile [z0,z1)x[y0,y1)x[x0,x1), step k
    computes [lo - (T-k), hi + (T-k)) clipped to the step's valid region [k, n-k) on each axis, in
    a per-thread scratch whose origin is the tile's corner minus T."""
    t = case.stencil.time_steps
    r = "restrict " if p["restrict"] else ""
    simd = "#pragma omp simd" if p["simd"] else None
    bx = str(p["block_x"]) if p["block_x"] > 0 else f"nx - 2 * {t}"
    I = "                    "  # noqa: E741 - inside the tile loops

    def step(kind: str) -> list[str]:
        # kind: first (u -> scratch), middle (scratch -> scratch, run-time k), last (scratch -> y)
        k = {"first": "1", "middle": "k", "last": str(t)}[kind]
        if kind == "first":
            src, src_elem, src_index, src_strides = "u", True, "gi", ("sz", "sy")
        else:
            src, src_elem, src_index, src_strides = "src", False, "li", ("lsz", "lsy")
        if kind == "last":
            dst, dst_elem, dst_index = "y", True, "gi"
        else:
            dst, dst_elem, dst_index = "dst", False, "li"
        ind = I + "                "
        body = _c_point_lines(case, p, src, src_elem, dst, dst_elem, ind, src_index=src_index, dst_index=dst_index, strides=src_strides)
        return [
            f"{I}    const int g = {t} - {k};  /* ghost cells still to grow */",
            f"{I}    const int zl = (z0 - g > {k}) ? z0 - g : {k}, zh = (z1 + g < nz - {k}) ? z1 + g : nz - {k};",
            f"{I}    const int yl = (y0 - g > {k}) ? y0 - g : {k}, yh = (y1 + g < ny - {k}) ? y1 + g : ny - {k};",
            f"{I}    const int xl = (x0 - g > {k}) ? x0 - g : {k}, xh = (x1 + g < nx - {k}) ? x1 + g : nx - {k};",
            f"{I}    for (int z = zl; z < zh; ++z) {{",
            f"{I}        for (int j = yl; j < yh; ++j) {{",
            f"{I}            const ptrdiff_t grow = (ptrdiff_t)z * sz + (ptrdiff_t)j * sy;",
            f"{I}            const ptrdiff_t lrow = (ptrdiff_t)(z - oz) * lsz + (ptrdiff_t)(j - oy) * lsy - ox;",
            *([f"{I}            {simd}"] if simd else []),
            f"{I}            for (int x = xl; x < xh; ++x) {{",
            f"{I}                const ptrdiff_t gi = grow + x, li = lrow + x;",
            f"{I}                (void)gi; (void)li;",
            *body,
            f"{I}            }}",
            f"{I}        }}",
            f"{I}    }}",
        ]

    out = [
        f"    /* T = {t} steps by overlapped temporal blocking: tiles of BZ x BY x BX outputs, each computed",
        "     * through all T steps in a per-thread scratch of (BZ+2T) x (BY+2T) x (BX+2T) accumulators. */",
        f"    const int T = {t};",
        f"    const int BZ = {p['block_z']}, BY = {p['block_y']}, BX = {bx};",
        "    const ptrdiff_t lsy = BX + 2 * T, lsz = (ptrdiff_t)(BX + 2 * T) * (BY + 2 * T);",
        "    const size_t scratch = (size_t)(BZ + 2 * T) * (size_t)lsz;",
        "    #pragma omp parallel",
        "    {",
        "        acc_t* s0 = (acc_t*)malloc(scratch * sizeof(acc_t));",
        "        acc_t* s1 = (acc_t*)malloc(scratch * sizeof(acc_t));" if t > 2 else "        acc_t* s1 = NULL;",
        "        const int ok = s0 != NULL && (%s);" % ("s1 != NULL" if t > 2 else "1"),
        f"        {_omp_for(p, 2, parallel=False)}",
        "        for (int z0 = T; z0 < nz - T; z0 += BZ) {",
        "            for (int y0 = T; y0 < ny - T; y0 += BY) {",
        "                if (!ok) continue;  /* no scratch: leave the tile unwritten (fails the check) */",
        "                for (int x0 = T; x0 < nx - T; x0 += BX) {",
        "                    const int z1 = (z0 + BZ < nz - T) ? z0 + BZ : nz - T;",
        "                    const int y1 = (y0 + BY < ny - T) ? y0 + BY : ny - T;",
        "                    const int x1 = (x0 + BX < nx - T) ? x0 + BX : nx - T;",
        "                    const int oz = z0 - T, oy = y0 - T, ox = x0 - T;  /* scratch origin */",
        "                    {  /* step 1: u -> s0 */",
        f"                        acc_t* {r}dst = s0;",
        *step("first"),
        "                    }",
    ]
    if t > 2:
        out += [
            f"                    for (int k = 2; k < {t}; ++k) {{",
            f"                        const acc_t* {r}src = (k % 2 == 0) ? s0 : s1;",
            f"                        acc_t* {r}dst = (k % 2 == 0) ? s1 : s0;",
            *["    " + line for line in step("middle")],
            "                    }",
        ]
    last = "s0" if t % 2 == 0 else "s1"
    out += [
        f"                    {{  /* step {t}: {last} -> y over the tile */",
        f"                        const acc_t* {r}src = {last};",
        *step("last"),
        "                    }",
        "                }",
        "            }",
        "        }",
        "        free(s0);",
        "        free(s1);",
        "    }",
    ]
    return out


