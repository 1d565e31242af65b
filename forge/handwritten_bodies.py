"""What one input plane adds into the plane queue of the hand-written kernels (forge/handwritten.py):
the rows of its footprint loaded once (forge/handwritten_loads.py), then one in-plane orbit sum per
plane distance added into the queue (`plane_body`), or the composed octahedron's pair sums for
diamond_tsT (`temporal_body`). Kept apart from the kernel skeleton, which is the same for both."""
from __future__ import annotations

from measurement.harness.cases import Case

from .handwritten_loads import row_load


# The register queue of 2R + 1 partial output planes, zeroed before the march and shifted after each plane (the
# oldest stored): the same lines in the plain march (forge/handwritten.py) and the pipelined one.
QUEUE_ZERO = ["#pragma unroll", "    for (int s = 0; s < 2 * R + 1; ++s)", "#pragma unroll",
              "        for (int i = 0; i < V; ++i) q[s][i] = 0;"]
QUEUE_SHIFT = ["#pragma unroll", "        for (int s = 0; s < 2 * R; ++s)", "#pragma unroll",
               "            for (int i = 0; i < V; ++i) q[s][i] = q[s + 1][i];", "#pragma unroll",
               "        for (int i = 0; i < V; ++i) q[2 * R][i] = 0;"]


def march_direction(three: bool) -> str:
    """`alternate`'s direction: odd chunks (3D: blocks along z; 2D: threads along y) march down."""
    return f"    const int dir = ({'blockIdx.z' if three else '(blockIdx.y * blockDim.y + threadIdx.y)'} & 1) ? -1 : 1;"


def plane_plan(case: Case) -> dict:
    """For each plane distance m: {class: [(dy, dx), ...]} of the in-plane offsets it weighs."""
    stencil = case.stencil
    lookup = {offset: k for offset, k in zip(stencil.offsets, stencil.class_index)}
    per_distance: dict[int, dict[int, list[tuple[int, int]]]] = {}
    for offset, k in lookup.items():
        m = offset[0]
        inplane = offset[1:] if stencil.dims == 3 else (0, *offset[1:])
        if m < 0:
            mirrored = (-m, *offset[1:])
            if lookup.get(mirrored) != k:
                raise ValueError(f"{case.type}: offsets {offset} and {mirrored} differ in class")
            continue
        per_distance.setdefault(m, {}).setdefault(k, []).append(tuple(inplane))
    return per_distance


def rows_needed(plan: dict) -> dict[int, set[int]]:
    """For each row offset dy: the x offsets read from it."""
    rows: dict[int, set[int]] = {}
    for classes in plan.values():
        for offsets in classes.values():
            for dy, dx in offsets:
                rows.setdefault(dy, set()).add(dx)
    return rows


def plane_body(case: Case, plan: dict, v: int, vw: int, indent: str, shuffle: bool = False, ry: int = 1) -> list[str]:
    """Load plane k's needed rows, then add its orbit sums into the queue. With `ry` > 1 the rows of
    the footprints of the thread's ry output rows, each loaded once (clamped to the grid: a row beyond
    it feeds only outputs that are not stored), then one set of sums into each row's queue."""
    rows = rows_needed(plan)
    if ry > 1:
        rows = {a: set().union(*(rows.get(a - t, set()) for t in range(ry))) for a in range(min(rows), max(rows) + ry)}
    r = case.stencil.radius
    out: list[str] = []
    for dy in sorted(rows):
        lo, hi = row_span(case, rows, dy, vw)
        row = f"r{name(dy)}"
        offset = f"base + ({dy}L) * nx" if case.stencil.dims == 3 and dy else "base"
        if ry > 1 and dy:
            offset = f"base + (long)(min(max(j + ({dy}), 0), ny - 1) - j) * nx"
        out += [f"{indent}acc_t {row}[V + 2 * R];", *row_load(row, offset, lo, hi, r, "R", v, vw, indent, shuffle)]
    return out + plane_sums(plan, r, indent, ry)


def row_span(case: Case, rows: dict[int, set[int]], dy: int, vw: int) -> tuple[int, int]:
    """The x offsets lo <= 0 <= hi read from row dy, within the one neighbouring vector a side that a row loads."""
    lo, hi = min(min(rows[dy]), 0), max(max(rows[dy]), 0)
    if -lo > vw or hi > vw:
        raise ValueError(f"{case.type}: an x halo of {max(-lo, hi)} exceeds a {vw}-lane vector")
    return lo, hi


def plane_sums(plan: dict, r: int, indent: str, ry: int = 1) -> list[str]:
    """Plane k's orbit sums, from its rows r<dy>[R + i + dx], added into the queue (each of the ry rows' queues)."""
    out = ["#pragma unroll", f"{indent}for (int i = 0; i < V; ++i) {{"]
    inner = indent + "    "
    for t in range(ry):
        suffix, queue = (f"_{t}", f"q[{t}]") if ry > 1 else ("", "q")
        for m in sorted(plan):
            terms = []
            for k, offsets in sorted(plan[m].items()):
                points = " + ".join(f"r{name(dy + t)}[R + i + ({dx})]" for dy, dx in sorted(offsets))
                terms.append(f"c{k} * ({points})")
            out.append(f"{inner}const acc_t s{m}{suffix} = {' + '.join(terms)};")
        for dz in range(-r, r + 1):
            out.append(f"{inner}{queue}[{r - dz}][i] += s{abs(dz)}{suffix};")
    out.append(f"{indent}}}")
    return out


def temporal_body(case: Case, index: dict, v: int, indent: str) -> list[str]:
    """Plane k of the octahedron: rows +-a summed, pair sums in x, s_m += w(m,a,b) p_b."""
    t = case.stencil.time_steps
    vw = v  # one 16-byte vector a thread
    out = [f"{indent}acc_t s[{t + 1}][V];", "#pragma unroll", f"{indent}for (int m = 0; m <= {t}; ++m)", "#pragma unroll",
           f"{indent}    for (int i = 0; i < V; ++i) s[m][i] = 0;"]
    for a in range(t + 1):
        h = t - a
        out += [f"{indent}{{", f"{indent}    acc_t r[V + {2 * h}];",
                *row_load("r", f"base + ({a}L) * nx", -h, h, h, str(h), v, vw, indent + "    ")]
        if a:
            out += [f"{indent}    {{", f"{indent}        acc_t o[V + {2 * h}];",
                    *row_load("o", f"base - ({a}L) * nx", -h, h, h, str(h), v, vw, indent + "        "), "#pragma unroll",
                    f"{indent}        for (int l = 0; l < V + {2 * h}; ++l) r[l] += o[l];", f"{indent}    }}"]
        inner = indent + "        "
        out += ["#pragma unroll", f"{indent}    for (int i = 0; i < V; ++i) {{", f"{inner}const acc_t p0 = r[i + {h}];",
                *[f"{inner}const acc_t p{b} = r[i + {h - b}] + r[i + {h + b}];" for b in range(1, h + 1)]]
        for m in range(h + 1):
            terms = " + ".join(f"w[{index[tuple(sorted((m, a, b)))]}] * p{b}" for b in range(h - m + 1))
            out.append(f"{inner}s[{m}][i] += {terms};")
        out += [f"{indent}    }}", f"{indent}}}"]
    out += ["#pragma unroll", f"{indent}for (int i = 0; i < V; ++i) {{", f"{indent}    q[{t}][i] += s[0][i];",
            *[f"{indent}    q[{t - m}][i] += s[{m}][i]; q[{t + m}][i] += s[{m}][i];" for m in range(1, t + 1)], f"{indent}}}"]
    return out


def name(dy: int) -> str:
    """A row offset as a C identifier suffix."""
    return f"m{-dy}" if dy < 0 else f"p{dy}"
