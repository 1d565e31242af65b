"""Render a specialised kernel for a case from a *plan*: the forge's kernel generator.

A plan is a small frozen set of parameters (`Plan`); `render(case, backend, plan)` turns it into
a `measurement.backends.base.Kernel` (source + launch JSON) that follows the kernel ABI of
measurement/backends/base.py exactly and is correct on every shape (odd extents too) for every
stencil type (star_R, box_R, star2d_R, box2d_R, varcoef_star_R, diamond_tsT) and precision.
Every parameter defaults to a kernel close to the straightforward one of
measurement.harness.codegen; the levers of forge.levers change one parameter per round.

Deterministic and offline: the same (case type, precision, plan) always gives the same source
(shapes are run-time arguments; the source never depends on the case's shape).

CPU parameters (C with OpenMP; `{"threads": N}` launch):

  threads         None | int >= 1    OpenMP threads (launch JSON); None = all cores.
  schedule        static | dynamic | guided   the `schedule(...)` of the parallel loop.
  collapse        1 | 2              `collapse(2)` over the two outer parallel loops (z,y; tile
                                     loops when tiled). Ignored by untiled 2D loops (one y loop).
  loop_order      zyx | tiled        zyx: z, y, x loops over the region (x contiguous innermost;
                                     the only order that keeps x unit-stride). tiled: cache blocking,
                                     parallel over (y, x) tiles, each tile marches z (3D) or its y
                                     rows (2D) so the 2R+1 planes/rows it reuses stay in cache.
  block_y         int >= 0           tiled y extent; 0 = auto (16 in 3D, 64 in 2D).
  block_x         int >= 0           tiled x extent; 0 = auto (whole rows in 3D, 512 in 2D).
  block_z         int >= 0           z tile of temporal blocking only; 0 = auto (8).
                                     block_* are ignored (normalised to 0) by zyx loops.
  unroll_classes  bool               neighbour sum written per symmetry class,
                                     c_k * (u[..] + u[..] + ...), one multiply per class.
  simd            bool               `#pragma omp simd` on the x loop.
  restrict        bool               `restrict` on the pointer parameters and scratch pointers.
  temporal        sweeps | blocked   diamond_tsT (T > 1) only, ignored elsewhere. sweeps: T
                                     whole-grid sweeps through two scratch grids (the
                                     straightforward scheme). blocked: overlapped temporal
                                     blocking: the output is cut into (block_z, block_y, block_x)
                                     tiles, each thread computes all T steps of a tile in its own
                                     small scratch (tile + 2T ghost cells per axis, redundant
                                     ghost work), so the T steps run in cache. Same arithmetic
                                     (accumulation-type scratch) as the sweeps. loop_order is
                                     ignored by blocked (it has its own tile loops).

CUDA parameters (launch `{"block": [bx,by,bz], "tile": [tx,ty,tz], "shared_bytes": S}`):

  block           (bx, by, bz)       threads per block (bx*by*bz <= 1024, bz <= 64). 2D types use
                                     z = 0 only: threads with threadIdx.z > 0 idle (levers keep bz = 1).
  z_march         int >= 0           0: one output plane per thread. L > 0 (3D only; ignored by
                                     2D types): each thread walks L consecutive output planes,
                                     reading every input plane of its chunk once and pushing its
                                     contributions into a register queue of 2R+1 accumulators
                                     (2.5D marching; star: u[z±d] reuse in registers, box: each
                                     plane's (2R+1)^2 footprint read once instead of 2R+1 times).
                                     tile z = bz * L.
  smem_tile       bool               stage the block's inputs in shared memory: an x-y tile plus
                                     halo of every plane it needs (one plane per z-layer of the
                                     block at a time when marching; a 3D tile with halo otherwise),
                                     then read neighbours from shared memory. Cooperative scalar
                                     global loads (coalesced), dynamic shared memory (shared_bytes).
  ldg             bool               global loads through the read-only cache (__ldg).
  unroll_classes  bool               as for the CPU (per-class sums).
  vector_x        1 | 2 | 4          each thread computes V consecutive x points (tile x = bx*V).
                                     Without smem_tile, rows are read with V-wide vector loads
                                     (uint/uint2/uint4 reinterpretation) when the run-time shape and
                                     pointer alignment allow it (nx % V == 0, u aligned to V
                                     elements); otherwise a scalar path with clamped x computes the
                                     same lanes (odd shapes stay correct). With smem_tile the
                                     lanes read shared memory (x coarsening only).
  f16_acc         f32                f16 is stored as __half and accumulated in float; "f32" is the
                                     only value (a lower-precision accumulation is not offered).
  temporal        composed | march   diamond_tsT (T > 1) only: both evaluate the T steps in one
                                     launch through the composed weights of codegen (an octahedron
                                     stencil of radius T whose weights each block computes from
                                     coef into shared memory). composed: codegen's run-time loops
                                     over the octahedron (honours block and ldg; z_march,
                                     smem_tile, vector_x and unroll_classes are ignored). march:
                                     the octahedron as an unrolled radius-T stencil through the
                                     general kernel, z-marching with chunk z_march (0 = 8); every
                                     CUDA parameter applies. Source size grows as T^3: levers
                                     propose it for T <= 6 only.

Parameters that do not apply are normalised away by `effective()` (the source records the
effective plan in its header), so two plans that differ only in ignored parameters render the
same source.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

from measurement.backends.base import Kernel
from measurement.harness import codegen
from measurement.harness.cases import Case
from measurement.harness.codegen import acc_type, c_type, cuda_type, octahedron

BACKENDS = ("cpu", "cuda")

CPU_DEFAULTS: dict[str, Any] = {
    "threads": None,
    "schedule": "static",
    "collapse": 2,
    "loop_order": "zyx",
    "block_z": 0,
    "block_y": 0,
    "block_x": 0,
    "unroll_classes": False,
    "simd": False,
    "restrict": False,
    "temporal": "sweeps",
}

CUDA_DEFAULTS: dict[str, Any] = {
    "block": tuple(codegen.DEFAULT_CUDA_LAUNCH["block"]),
    "z_march": 0,
    "smem_tile": False,
    "ldg": False,
    "unroll_classes": False,
    "vector_x": 1,
    "f16_acc": "f32",
    "temporal": "composed",
}

DEFAULTS = {"cpu": CPU_DEFAULTS, "cuda": CUDA_DEFAULTS}

SCHEDULES = ("static", "dynamic", "guided")
LOOP_ORDERS = ("zyx", "tiled")
CPU_TEMPORAL = ("sweeps", "blocked")
CUDA_TEMPORAL = ("composed", "march")
VECTOR_WIDTHS = (1, 2, 4)

AUTO_BLOCK_3D = {"y": 16, "x": 0}  # x 0: whole rows
AUTO_BLOCK_2D = {"y": 64, "x": 512}
AUTO_BLOCK_Z = 8
AUTO_MARCH = 8  # chunk of CUDA temporal "march" when z_march is 0


# ---------------------------------------------------------------- plans


def _freeze(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    return value


def _thaw(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_thaw(v) for v in value]
    return value


@dataclass(frozen=True)
class Plan:
    """Parameters of one kernel: backend plus sorted (key, value) pairs (values hashable: lists
    become tuples). Keys not stored take the backend's defaults when rendered."""

    backend: str
    params: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"unknown backend {self.backend!r}; use one of {BACKENDS}")
        items = dict(self.params)
        if len(items) != len(self.params):
            raise ValueError("a plan names each parameter once")
        unknown = set(items) - set(DEFAULTS[self.backend])
        if unknown:
            raise ValueError(f"unknown {self.backend} plan parameters {sorted(unknown)}; known: {sorted(DEFAULTS[self.backend])}")
        object.__setattr__(self, "params", tuple(sorted((k, _freeze(v)) for k, v in items.items())))

    @classmethod
    def default(cls, backend: str) -> "Plan":
        """Every parameter stored, at its default (the kernel closest to the straightforward one)."""
        if backend not in BACKENDS:
            raise ValueError(f"unknown backend {backend!r}; use one of {BACKENDS}")
        return cls(backend, tuple(DEFAULTS[backend].items()))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Plan":
        """Inverse of as_dict()."""
        return cls(data["backend"], tuple((k, _freeze(v)) for k, v in dict(data.get("params", {})).items()))

    def get(self, key: str, default: Any = None) -> Any:
        for name, value in self.params:
            if name == key:
                return value
        return default

    def value(self, key: str) -> Any:
        """The stored value or the backend's default."""
        return self.get(key, DEFAULTS[self.backend][key])

    def with_(self, **changes: Any) -> "Plan":
        merged = dict(self.params)
        merged.update({k: _freeze(v) for k, v in changes.items()})
        return Plan(self.backend, tuple(merged.items()))

    def resolved(self) -> dict[str, Any]:
        """All parameters: defaults overridden by the stored ones."""
        return {**DEFAULTS[self.backend], **dict(self.params)}

    def as_dict(self) -> dict[str, Any]:
        """JSON-serialisable: {"backend": ..., "params": {key: value}} (tuples as lists)."""
        return {"backend": self.backend, "params": {k: _thaw(v) for k, v in self.params}}

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), sort_keys=True, separators=(",", ":"))

    def differences(self, other: "Plan") -> list[str]:
        """Names of parameters whose resolved values differ."""
        a, b = self.resolved(), other.resolved()
        return sorted(k for k in a if a[k] != b[k])


def default_plan(backend: str) -> Plan:
    return Plan.default(backend)


# ---------------------------------------------------------------- validation and normalisation


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def validate(plan: Plan) -> dict[str, Any]:
    """Resolved parameters, or ValueError naming the bad one."""
    p = plan.resolved()

    def bad(key: str, allowed: str) -> ValueError:
        return ValueError(f"plan parameter {key}={p[key]!r} is invalid: {allowed}")

    for key in ("unroll_classes",) + (("simd", "restrict") if plan.backend == "cpu" else ("smem_tile", "ldg")):
        if not isinstance(p[key], bool):
            raise bad(key, "a bool")
    if plan.backend == "cpu":
        if p["threads"] is not None and not (_is_int(p["threads"]) and p["threads"] >= 1):
            raise bad("threads", "None or a positive int")
        if p["schedule"] not in SCHEDULES:
            raise bad("schedule", f"one of {SCHEDULES}")
        if p["collapse"] not in (1, 2) or not _is_int(p["collapse"]):
            raise bad("collapse", "1 or 2")
        if p["loop_order"] not in LOOP_ORDERS:
            raise bad("loop_order", f"one of {LOOP_ORDERS}")
        for key in ("block_z", "block_y", "block_x"):
            if not (_is_int(p[key]) and 0 <= p[key] <= 1 << 20):
                raise bad(key, "an int >= 0 (0 = auto)")
        if p["temporal"] not in CPU_TEMPORAL:
            raise bad("temporal", f"one of {CPU_TEMPORAL}")
    else:
        block = p["block"]
        if not (isinstance(block, tuple) and len(block) == 3 and all(_is_int(v) and v >= 1 for v in block)):
            raise bad("block", "three positive ints")
        if block[0] * block[1] * block[2] > 1024 or block[2] > 64 or block[0] > 1024 or block[1] > 1024:
            raise bad("block", "at most 1024 threads (bz <= 64)")
        if not (_is_int(p["z_march"]) and 0 <= p["z_march"] <= 4096):
            raise bad("z_march", "an int >= 0")
        if p["vector_x"] not in VECTOR_WIDTHS or not _is_int(p["vector_x"]):
            raise bad("vector_x", f"one of {VECTOR_WIDTHS}")
        if p["f16_acc"] != "f32":
            raise bad("f16_acc", '"f32" (f16 storage always accumulates in float)')
        if p["temporal"] not in CUDA_TEMPORAL:
            raise bad("temporal", f"one of {CUDA_TEMPORAL}")
    return p


def effective(case: Case, plan: Plan) -> dict[str, Any]:
    """The validated parameters with those that do not apply to `case` reset to their defaults
    (and auto values made explicit where the rendering depends on them)."""
    p = validate(plan)
    s = case.stencil
    temporal = s.time_steps > 1
    if plan.backend == "cpu":
        if not temporal:
            p["temporal"] = "sweeps"
        if p["temporal"] == "blocked":
            p["loop_order"] = "zyx"  # blocked has its own tile loops
            p["block_z"] = p["block_z"] or AUTO_BLOCK_Z
            p["block_y"] = p["block_y"] or AUTO_BLOCK_3D["y"]
        elif p["loop_order"] == "zyx":
            p["block_z"] = p["block_y"] = p["block_x"] = 0
        else:
            auto = AUTO_BLOCK_3D if s.dims == 3 else AUTO_BLOCK_2D
            p["block_z"] = 0
            p["block_y"] = p["block_y"] or auto["y"]
            p["block_x"] = p["block_x"] or auto["x"]
        if s.dims == 2 and p["loop_order"] == "zyx":
            p["collapse"] = CPU_DEFAULTS["collapse"]  # one parallel loop: nothing to collapse
        return p
    if case.precision != "f16":
        p["f16_acc"] = "f32"
    if not temporal:
        p["temporal"] = "composed"
    if temporal and p["temporal"] == "composed":
        for key in ("z_march", "smem_tile", "vector_x", "unroll_classes"):
            p[key] = CUDA_DEFAULTS[key]
    if temporal and p["temporal"] == "march":
        p["z_march"] = p["z_march"] or AUTO_MARCH
    if s.dims == 2:
        p["z_march"] = 0
    return p


def _plan_comment(case: Case, backend: str, p: dict[str, Any]) -> str:
    text = json.dumps({k: _thaw(v) for k, v in sorted(p.items())}, sort_keys=True, separators=(",", ":"))
    s = case.stencil
    return "\n".join(
        [
            f"/* Forged {backend.upper()} kernel for {case.type}/{case.precision} (any shape; nz, ny, nx at run time),",
            " * generated by forge.kernelgen from the effective plan",
            f" * {text}",
            f" * y[p] = {'a[p] * ' if s.variable_coefficient else ''}sum_o coef[class(o)] * u[p + o] over {len(s.offsets)} offsets"
            + (f", applied {s.time_steps} times" if s.time_steps > 1 else "")
            + f"; written region: the grid minus a halo of {s.halo} on every axis. */",
        ]
    )


# ---------------------------------------------------------------- public entry


def render(case: Case, backend: str | None = None, plan: Plan | None = None) -> Kernel:
    """The kernel of `plan` for `case` (source + launch JSON). `backend` defaults to the plan's;
    with no plan, the backend's default plan. ValueError on an invalid plan."""
    if plan is None:
        if backend is None:
            raise ValueError("render needs a backend or a plan")
        plan = Plan.default(backend)
    if backend is not None and backend != plan.backend:
        raise ValueError(f"plan is for {plan.backend!r}, not {backend!r}")
    p = effective(case, plan)
    if plan.backend == "cpu":
        launch = {} if p["threads"] is None else {"threads": int(p["threads"])}
        return Kernel(source=_c_source(case, p), launch=launch)
    source, launch = _cuda_source(case, p)
    return Kernel(source=source, launch=launch)


def offsets3(case: Case) -> list[tuple[int, int, int]]:
    """The stencil's offsets as (dz, dy, dx) (2D: dz = 0)."""
    return [tuple(o) if len(o) == 3 else (0, *o) for o in case.stencil.offsets]  # type: ignore[misc]


def _offset_text(offset: tuple[int, int, int], sz: str, sy: str) -> str:
    """` + dz*sz + dy*sy + dx` (empty for the centre)."""
    text = ""
    for step, stride in zip(offset, (sz, sy, "")):
        if step == 0:
            continue
        sign = "-" if step < 0 else "+"
        m = abs(step)
        term = str(m) if stride == "" else (stride if m == 1 else f"{m} * {stride}")
        text += f" {sign} {term}"
    return text


def _grouped(terms: list[tuple[Any, Any]]) -> list[tuple[Any, list[Any]]]:
    """[(key, [items...]), ...] keyed by first appearance of each key, items in order."""
    order: list[Any] = []
    groups: dict[Any, list[Any]] = {}
    for item, key in terms:
        if key not in groups:
            order.append(key)
            groups[key] = []
        groups[key].append(item)
    return [(k, groups[k]) for k in order]


# ---------------------------------------------------------------- C (CPU)


def _c_source(case: Case, p: dict[str, Any]) -> str:
    s = case.stencil
    restrict = "restrict " if p["restrict"] else ""
    out = [
        _plan_comment(case, "cpu", p),
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
    for n, (k, offs) in enumerate(_grouped(terms)):
        expr = " + ".join(load(o) for o in offs)
        lines.append(f"{indent}{'acc_t acc = ' if n == 0 else 'acc += '}c{k} * ({expr});")
    return lines


def _c_point_lines(case, p, src, src_elem, dst, dst_elem, indent, src_index="i", dst_index="i", strides=("sz", "sy")):
    def load(o):
        ref = f"{src}[{src_index}{_offset_text(o, *strides)}]"
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


# ---------------------------------------------------------------- CUDA


_ZERO = {"f16": "__float2half(0.0f)", "f32": "0.0f", "f64": "0.0"}


def _cuda_prelude(case: Case, p: dict[str, Any]) -> list[str]:
    f16 = case.precision == "f16"
    raw = "__ldg(&(p)[k])" if p["ldg"] else "(p)[k]"
    return [
        _plan_comment(case, "cuda", p),
        "#include <cuda_fp16.h>" if f16 else None,
        "",
        f"typedef {cuda_type(case.precision)} elem_t;",
        f"typedef {acc_type(case.precision)} acc_t;",
        f"#define LDE(p, k) ({raw})",
        "#define TOACC(v) __half2float(v)" if f16 else "#define TOACC(v) ((acc_t)(v))",
        "#define LOAD(p, k) TOACC(LDE(p, k))",
        "#define STORE(v) __float2half(v)" if f16 else "#define STORE(v) ((elem_t)(v))",
        "",
    ]


_SIGNATURE = [
    'extern "C" __global__ void stencil(const elem_t* __restrict__ u, const elem_t* __restrict__ a,',
    "                                   elem_t* __restrict__ y, const double* __restrict__ coef,",
    "                                   int nz, int ny, int nx)",
]


def _cuda_source(case: Case, p: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    s = case.stencil
    if s.time_steps > 1 and p["temporal"] == "composed":
        return _cuda_composed_loops(case, p)
    return _CudaGeneral(case, p).source()


def _cuda_composed_loops(case: Case, p: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """codegen's composed-weights kernel (run-time loops over the octahedron), with the plan's
    block and loads."""
    s = case.stencil
    bx, by, bz = p["block"]
    out = [
        *_cuda_prelude(case, p),
        *codegen.cuda_composed_tables(case),
        *_SIGNATURE,
        "{",
        *codegen.cuda_composed_weights(),
        "    const int x = blockIdx.x * blockDim.x + threadIdx.x;",
        "    const int j = blockIdx.y * blockDim.y + threadIdx.y;",
        "    const int z = blockIdx.z * blockDim.z + threadIdx.z;",
        f"    const int h = {s.halo};",
        "    if (x < h || x >= nx - h || j < h || j >= ny - h || z < h || z >= nz - h) return;",
        "    const int sy = nx;",
        "    const int sz = nx * ny;",
        "    const int i = (z * ny + j) * nx + x;",
        *codegen.cuda_composed_sum(),
        "    y[i] = STORE(acc);",
        "}",
    ]
    source = "\n".join(line for line in out if line is not None) + "\n"
    return source, {"block": [bx, by, bz], "tile": [bx, by, bz], "shared_bytes": 0}


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


class _CudaGeneral:
    """The general CUDA kernel: V x-lanes per thread, one plane or an L-plane z-march per thread,
    neighbours from global memory (scalar or vector loads) or a shared-memory tile."""

    def __init__(self, case: Case, p: dict[str, Any]):
        self.case, self.p = case, p
        s = case.stencil
        self.prec = case.precision
        self.dims = s.dims
        self.V = int(p["vector_x"])
        self.L = int(p["z_march"]) if s.dims == 3 else 0
        self.smem = bool(p["smem_tile"])
        self.bx, self.by, self.bz = (int(v) for v in p["block"])
        self.composed = s.time_steps > 1
        if self.composed:
            t = s.time_steps
            self.R = t
            side = t + 1
            self.terms = []
            for o in octahedron(t):
                a = tuple(abs(v) for v in o)
                key = tuple(sorted(a))
                index = (a[0] * side + a[1]) * side + a[2]
                self.terms.append((o, key, f"w[{index}]"))
            rep: dict[Any, str] = {}
            for _, key, expr in self.terms:
                rep.setdefault(key, expr)
            self.coef_of_class = rep
        else:
            self.R = s.radius
            self.terms = [(o, k, f"c{k}") for o, k in zip(offsets3(case), s.class_index)]
            self.coef_of_class = {k: f"c{k}" for k in range(len(s.classes))}
        self.H = s.halo
        self.SX = self.bx * self.V + 2 * self.R
        self.SY = self.by + 2 * self.R
        if self.L:
            self.SZ = self.bz  # one plane per z-layer of the block at a time
        else:
            self.SZ = self.bz + 2 * self.R if self.dims == 3 else 1
        self.itemsize = case.dtype.itemsize

    # -- helpers

    def lanes(self) -> range:
        return range(self.V)

    def shared_bytes(self) -> int:
        return self.SX * self.SY * self.SZ * self.itemsize if self.smem else 0

    def launch(self) -> dict[str, Any]:
        tile_z = self.bz * self.L if self.L else self.bz
        return {"block": [self.bx, self.by, self.bz], "tile": [self.bx * self.V, self.by, tile_z], "shared_bytes": self.shared_bytes()}

    def sum_lines(self, terms, val, target: str, indent: str, declare: bool) -> list[str]:
        """target_l (+)= sum of coef * val(offset, l) over `terms` [(offset, class_key, coef)] for every lane."""
        out = []
        for l in self.lanes():
            name = f"{target}{l}"
            if not terms:
                if declare:
                    out.append(f"{indent}acc_t {name} = 0;")
                continue
            if self.p["unroll_classes"]:
                groups = _grouped([((o, c), key) for o, key, c in terms])
                parts = []
                for key, items in groups:
                    loads = " + ".join(val(o, l) for o, _ in items)
                    coef = self.coef_of_class[key]
                    parts.append(f"{coef} * ({loads})")
                first, rest = parts[0], parts[1:]
                out.append(f"{indent}{'acc_t ' + name + ' = ' if declare else name + ' += '}{first};")
                out += [f"{indent}{name} += {part};" for part in rest]
            else:
                if declare:
                    out.append(f"{indent}acc_t {name} = 0;")
                out += [f"{indent}{name} += {c} * {val(o, l)};" for o, _, c in terms]
        return out

    # -- value sources

    def scalar_val(self, base: str, sz: str = "sz"):
        """Global scalar loads around lane index `{base}{l}`."""
        return lambda o, l: f"LOAD(u, {base}{l}{_offset_text(o, sz, 'sy')})"

    def smem_val(self, layer: str):
        """Shared tile read; `layer` = the tile plane of offset dz = 0 for this thread."""
        sx, sy = self.SX, self.SY
        R = self.R

        def val(o, l):
            dz, dy, dx = o
            plane = f"({layer}{' + ' + str(dz) if dz > 0 else (' - ' + str(-dz) if dz < 0 else '')})"
            return f"TOACC(tile[({plane} * {sy} + (ty + {R + dy})) * {sx} + (tx * {self.V} + {l + R + dx})])"

        return val

    def vector_rows(self, rows: dict[tuple[int, int], tuple[int, int]], rowbase: Callable[[int, int], str], indent: str):
        """Emit V-wide loads of every row window; return (lines, val) where val reads the registers.

        rows: (dz, dy) -> (min dx, max dx). Vectors start at x0 + V*k (k from floor(min/V) to
        floor((V-1+max)/V)); each is loaded only when it lies inside the row ([0, nx), nx % V == 0),
        else its registers stay 0 (they then feed only lanes outside the region)."""
        V = self.V
        raw_type, per = _VEC_RAW[(self.prec, V)]
        per_load = V // per
        ldg = self.p["ldg"]
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
                    for e, expr in enumerate(_decode(self.prec, f"r{tag}_{q}", raw_type)):
                        lines.append(f"{indent}    {elems[q * per_load + e]} = {expr};")
                lines.append(f"{indent}}}")
            names[(dz, dy)] = (k0, regs)

        def val(o, l):
            dz, dy, dx = o
            k0, regs = names[(dz, dy)]
            return regs[l + dx - V * k0]

        return lines, val

    @staticmethod
    def row_windows(offsets) -> dict[tuple[int, int], tuple[int, int]]:
        rows: dict[tuple[int, int], tuple[int, int]] = {}
        for dz, dy, dx in offsets:
            lo, hi = rows.get((dz, dy), (dx, dx))
            rows[(dz, dy)] = (min(lo, dx), max(hi, dx))
        return rows

    # -- the kernel

    def header_lines(self) -> list[str]:
        out = [*_cuda_prelude(self.case, self.p)]
        if self.composed:
            out += codegen.cuda_composed_tables(self.case)
        out += [
            f"#define BX {self.bx}",
            f"#define BY {self.by}",
            f"#define BZ {self.bz}",
            f"#define V {self.V}",
            f"#define R {self.R}",
            f"#define H {self.H}",
            "",
        ]
        return out

    def prologue(self) -> list[str]:
        out = []
        if self.composed:
            out += codegen.cuda_composed_weights()
        else:
            out += [f"    const acc_t c{k} = (acc_t)coef[{k}];" for k in range(len(self.case.stencil.classes))]
        if self.smem:
            out += [
                "    extern __shared__ __align__(16) unsigned char smem_raw[];",
                "    elem_t* tile = reinterpret_cast<elem_t*>(smem_raw);",
            ]
        out += [
            "    const int tx = threadIdx.x, ty = threadIdx.y, tz = threadIdx.z;",
            "    (void)tx; (void)ty; (void)tz; (void)a;",
            "    const int x0 = (blockIdx.x * BX + tx) * V;  /* first x of this thread's lanes */",
            "    const int yy = blockIdx.y * BY + ty;",
            "    const int sy = nx;",
            "    const int sz = nx * ny;",
            "    (void)sz; (void)sy;",
        ]
        # lane x positions: real (for the store test) and clamped into the region (for loads)
        for l in self.lanes():
            out.append(f"    const int xr{l} = x0 + {l};")
            out.append(f"    const int xc{l} = min(max(xr{l}, H), nx - H - 1);")
            out.append(f"    const bool in{l} = xr{l} >= H && xr{l} < nx - H;")
            out.append(f"    (void)xc{l}; (void)in{l};")
        return out

    def store_lines(self, zexpr: str, accs: str, indent: str) -> list[str]:
        out = []
        for l in self.lanes():
            index = f"({zexpr} * ny + yy) * nx + xr{l}"
            value = f"{accs}{l} * LOAD(a, {index})" if self.case.stencil.variable_coefficient else f"{accs}{l}"
            out.append(f"{indent}if (in{l}) y[{index}] = STORE({value});")
        return out

    def fill_lines(self, plane_of_layer: Callable[[str], str], indent: str) -> list[str]:
        """Cooperative fill of the shared tile: SZ layers of SY x SX, zero outside the grid."""
        sx, sy, sz = self.SX, self.SY, self.SZ
        return [
            f"{indent}for (int e = (tz * BY + ty) * BX + tx; e < {sx * sy * sz}; e += BX * BY * BZ) {{",
            f"{indent}    const int lx = e % {sx}, ly = (e / {sx}) % {sy}, lz = e / {sx * sy};",
            f"{indent}    const int gx = blockIdx.x * (BX * V) - R + lx, gy = blockIdx.y * BY - R + ly, gz = {plane_of_layer('lz')};",
            f"{indent}    elem_t v = {_ZERO[self.prec]};",
            f"{indent}    if (gx >= 0 && gx < nx && gy >= 0 && gy < ny && gz >= 0 && gz < nz) v = LDE(u, (gz * ny + gy) * nx + gx);",
            f"{indent}    tile[e] = v;",
            f"{indent}}}",
        ]

    def source(self) -> tuple[str, dict[str, Any]]:
        body = self.body_march() if self.L else self.body_single()
        out = [*self.header_lines(), *_SIGNATURE, "{", *self.prologue(), *body, "}"]
        return "\n".join(line for line in out if line is not None) + "\n", self.launch()

    def any_lane_line(self) -> str:
        return "(x0 + V - 1 >= H && x0 < nx - H)"

    def body_single(self) -> list[str]:
        """One output plane per thread (2D: z = 0)."""
        z = "0" if self.dims == 2 else "blockIdx.z * BZ + tz"
        zok = "(blockIdx.z == 0 && tz == 0)" if self.dims == 2 else "(zz >= H && zz < nz - H)"
        out = [
            f"    const int zz = {z};",
            f"    const bool active = yy >= H && yy < ny - H && {zok} && {self.any_lane_line()};",
        ]
        terms = self.terms
        if self.smem:
            gz0 = "0" if self.dims == 2 else "blockIdx.z * BZ - R"
            out += self.fill_lines(lambda lz: f"{gz0} + {lz}" if self.dims == 3 else "0", "    ")
            out += ["    __syncthreads();", "    if (!active) return;"]
            layer = "(tz + R)" if self.dims == 3 else "0"
            out += self.sum_lines(terms, self.smem_val(layer), "acc", "    ", declare=True)
            out += self.store_lines("zz", "acc", "    ")
            return out
        out.append("    if (!active) return;")
        out += [f"    const int b{l} = (zz * ny + yy) * nx + xc{l};" for l in self.lanes()]
        if self.V == 1:
            out += self.sum_lines(terms, self.scalar_val("b"), "acc", "    ", declare=True)
            out += self.store_lines("zz", "acc", "    ")
            return out
        out += [f"    acc_t {', '.join(f'acc{l} = 0' for l in self.lanes())};", *self.vector_guard()]
        rows = self.row_windows([o for o, _, _ in terms])
        load_lines, vval = self.vector_rows(rows, lambda dz, dy: f"((zz + {dz}) * ny + (yy + {dy})) * nx", "        ")
        out += load_lines
        out += self.sum_lines(terms, vval, "acc", "        ", declare=False)
        out += ["    } else {"]
        out += self.sum_lines(terms, self.scalar_val("b"), "acc", "        ", declare=False)
        out += ["    }"]
        out += self.store_lines("zz", "acc", "    ")
        return out

    def vector_guard(self) -> list[str]:
        align = self.V * self.itemsize
        return [f"    if (nx % V == 0 && ((unsigned long long)u & {align - 1}ull) == 0) {{  /* aligned rows: vector loads */"]

    def body_march(self) -> list[str]:
        """Each thread walks L output planes zf..zf+L-1: input plane p = zf - R + s (s = 0..L+2R-1)
        adds its contribution for |dz| = d (partial p_d) to the queue entry q_m of output
        p - R + m, d = |R - m|; q_0 is then complete (output p - R) and the queue shifts."""
        R, L = self.R, self.L
        # The partial of distance d sums the offsets with dz = +d; those with dz = -d have the same
        # (dy, dx) set and coefficients (classes depend on |dz|), so one partial serves both.
        by_d: dict[int, list] = {d: [] for d in range(R + 1)}
        for o, key, c in self.terms:
            if o[0] >= 0:
                by_d[o[0]].append(((0, o[1], o[2]), key, c))  # plane-relative offsets
        out = [
            f"    const int zf = blockIdx.z * (BZ * {L}) + tz * {L};  /* first output plane of this thread */",
            f"    const bool active = yy >= H && yy < ny - H && {self.any_lane_line()};",
        ]
        if not self.smem:
            out.append("    if (!active) return;")
        out += [f"    acc_t {', '.join(f'q{m}_{l} = 0' for l in self.lanes())};" for m in range(2 * R + 1)]
        out += [
            f"    for (int s = 0; s < {L + 2 * R}; ++s) {{",
            "        const int p = zf - R + s;",
        ]
        I = "        "  # noqa: E741
        if self.smem:
            out += [f"{I}__syncthreads();"]
            out += self.fill_lines(lambda lz: f"blockIdx.z * (BZ * {L}) + {lz} * {L} - R + s", I)
            out += [f"{I}__syncthreads();"]
            val = self.smem_val("tz")
            for d in range(R + 1):
                out += self.sum_lines(by_d[d], val, f"p{d}_", I, declare=True)
        else:
            out += [f"{I}acc_t {', '.join(f'p{d}_{l} = 0' for d in range(R + 1) for l in self.lanes())};"]
            out += [f"{I}if (p >= 0 && p < nz) {{"]
            J = I + "    "
            out += [f"{J}const int b{l} = (p * ny + yy) * nx + xc{l};" for l in self.lanes()]
            if self.V == 1:
                for d in range(R + 1):
                    out += self.sum_lines(by_d[d], self.scalar_val("b"), f"p{d}_", J, declare=False)
            else:
                out += ["    " + line for line in self.vector_guard()]
                K = J + "    "
                rows = self.row_windows([(0, o[1], o[2]) for o, _, _ in self.terms])
                load_lines, vval = self.vector_rows(rows, lambda dz, dy: f"(p * ny + (yy + {dy})) * nx", K)
                out += load_lines
                for d in range(R + 1):
                    out += self.sum_lines(by_d[d], vval, f"p{d}_", K, declare=False)
                out += [f"{J}}} else {{"]
                for d in range(R + 1):
                    out += self.sum_lines(by_d[d], self.scalar_val("b"), f"p{d}_", K, declare=False)
                out += [f"{J}}}"]
            out += [f"{I}}}"]
        for m in range(2 * R + 1):
            d = abs(R - m)
            out += [f"{I}q{m}_{l} += p{d}_{l};" for l in self.lanes()]
        out += [
            f"{I}const int zo = p - R;  /* output completed by this plane */",
            f"{I}if (active && s >= 2 * R && zo >= H && zo < nz - H) {{",
            *self.store_lines("zo", "q0_", I + "    "),
            f"{I}}}",
        ]
        for m in range(2 * R):
            out += [f"{I}q{m}_{l} = q{m + 1}_{l};" for l in self.lanes()]
        out += [f"{I}q{2 * R}_{l} = 0;" for l in self.lanes()]
        out.append("    }")
        return out
