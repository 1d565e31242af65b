"""The plans of the forge's kernel generator: their parameters, validation and normalisation.

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
from typing import Any

from measurement.harness import codegen
from measurement.harness.cases import Case

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

def plan_comment(case: Case, backend: str, p: dict[str, Any]) -> str:
    """The header every source opens with: the effective plan, so a source says how it was made."""
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


