"""V-wide vector loads of row windows for forge.kernelgen's general CUDA kernel (`vector_x` 2 or 4, global reads):
which unsigned type each load is, how its bits decode into acc_t, and which register holds each (offset, lane)."""
from __future__ import annotations

from typing import Callable

# Raw vector loads of V elements: (unsigned type of the load, loads per vector, elements per load).
_VEC_RAW = {
    ("f32", 2): ("uint2", 1), ("f32", 4): ("uint4", 1),
    ("f64", 2): ("uint4", 1), ("f64", 4): ("uint4", 2),
    ("f16", 2): ("unsigned int", 1), ("f16", 4): ("uint2", 1),
}
_COMPONENTS = {"unsigned int": [""], "uint2": [".x", ".y"], "uint4": [".x", ".y", ".z", ".w"]}


def _decode(precision: str, var: str, raw_type: str) -> list[str]:
    """acc_t expressions of the elements held in raw load `var`."""
    comps = _COMPONENTS[raw_type]
    if precision == "f32":
        return [f"__uint_as_float({var}{c})" for c in comps]
    if precision == "f64":
        return [f"__hiloint2double((int){var}{comps[n + 1]}, (int){var}{comps[n]})" for n in range(0, len(comps), 2)]
    halves = []
    for c in comps:
        halves.append(f"__half2float(__ushort_as_half((unsigned short)({var}{c} & 0xffffu)))")
        halves.append(f"__half2float(__ushort_as_half((unsigned short)({var}{c} >> 16)))")
    return halves


def vector_rows(precision: str, V: int, ldg: bool, rows: dict[tuple[int, int], tuple[int, int]],
                rowbase: Callable[[int, int], str], indent: str,
                ) -> tuple[list[str], Callable[[tuple[int, int, int], int], str]]:
    """Emit V-wide loads of every row window; return (lines, val) where val reads the registers.

    rows: (dz, dy) -> (min dx, max dx). Vectors start at x0 + V*k (k from floor(min/V) to
    floor((V-1+max)/V)); each is loaded only when it lies inside the row ([0, nx), nx % V == 0),
    else its registers stay 0 (they then feed only lanes outside the region)."""
    raw_type, per = _VEC_RAW[(precision, V)]
    per_load = V // per
    lines = []
    names: dict[tuple[int, int], tuple[int, list[str]]] = {}
    for n, ((dz, dy), (lo, hi)) in enumerate(sorted(rows.items())):
        k0, k1 = lo // V, (V - 1 + hi) // V
        regs = []
        for k in range(k0, k1 + 1):
            tag = f"{n}_{k - k0}"
            elems = [f"v{tag}_{e}" for e in range(V)]
            regs += elems
            lines.append(f"{indent}acc_t {', '.join(e + ' = 0' for e in elems)};")
            lines.append(f"{indent}if (x0 + {V * k} >= 0 && x0 + {V * k} < nx) {{")
            for q in range(per):
                ptr = f"u + {rowbase(dz, dy)} + x0 + {V * k + q * per_load}"
                load = f"__ldg((const {raw_type}*)({ptr}))" if ldg else f"*(const {raw_type}*)({ptr})"
                lines.append(f"{indent}    const {raw_type} r{tag}_{q} = {load};")
                for e, expr in enumerate(_decode(precision, f"r{tag}_{q}", raw_type)):
                    lines.append(f"{indent}    {elems[q * per_load + e]} = {expr};")
            lines.append(f"{indent}}}")
        names[(dz, dy)] = (k0, regs)

    def val(o, l):
        dz, dy, dx = o
        k0, regs = names[(dz, dy)]
        return regs[l + dx - V * k0]

    return lines, val

def row_windows(offsets: list[tuple[int, int, int]]) -> dict[tuple[int, int], tuple[int, int]]:
    rows: dict[tuple[int, int], tuple[int, int]] = {}
    for dz, dy, dx in offsets:
        lo, hi = rows.get((dz, dy), (dx, dx))
        rows[(dz, dy)] = (min(lo, dx), max(hi, dx))
    return rows
