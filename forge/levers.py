"""The lever library: one structural change per forging round, and how to pick it.

A round of forging applies exactly ONE lever to the current plan (forge.kernelgen.Plan): a
lever sets exactly one plan parameter to one value (`Lever.param`, `Lever.value`), so the
effect of every round is attributable. Everything here is offline and deterministic.

* `LEVERS`: the library (CPU and CUDA levers, each with tags naming the optimisation family).
* `initial_plan(case, backend)`: where forging starts (the kernel closest to the straightforward).
* `applicable(case, plan)`: the levers that fit the case and change the rendered kernel (a lever
  whose change `effective()` normalises away, or which would render an invalid plan, is never
  proposed).
* `apply(lever, case, plan)`: the next plan (one parameter changed).
* `diagnose(case, fraction_of_copy, gflops, registers=None, occupancy=None)`: a short bottleneck
  diagnosis, "KIND: detail"; `rank(levers, diagnosis)`: levers ordered by how well their tags
  match the diagnosis kind (ties: library order).

CPU levers (param = value):
  threads_1 (threads=1; tiny grids: fork/join costs more than the work), threads_all (threads=None),
  schedule_static|dynamic|guided (schedule), collapse_1|collapse_2 (collapse),
  loop_tiled (loop_order="tiled": cache blocking, tiles march z), loop_zyx (loop_order="zyx"),
  block_y_4|8|32|64 and block_x_64|128|256|1024 (tile sizes; only where tiles exist: tiled loops
  or temporal blocking), block_z_4|16 (temporal blocking only), unroll_classes (True),
  simd (True), restrict (True), temporal_blocked (temporal="blocked", diamond T > 1),
  temporal_sweeps (temporal="sweeps").
CUDA levers:
  block_BXxBYxBZ for a fixed list of shapes (block; bz > 1 only for 3D), z_march_4|8|16|32
  (z_march; 3D, not under the composed-loop diamond), smem_tile (True; <= 48 KiB of shared
  memory), ldg (True), unroll_classes (True), vector_x2 (f32/f64) and half2_loads (f16)
  (vector_x=2), vector_x4 (vector_x=4), temporal_march (temporal="march", diamond 2 <= T <= 6),
  temporal_composed (temporal="composed").
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from measurement.harness.cases import Case

from .kernelgen import DEFAULTS, Plan, effective, render

TAGS = (
    "block_shape",
    "thread_coarsening",
    "z_march",
    "shared_memory",
    "vector_loads",
    "read_only_cache",
    "unroll",
    "f16_storage",
    "temporal_fusion",
    "loop_order",
    "cache_blocking",
    "omp_schedule",
    "vectorisation",
    "parallelism",
    "aliasing",
)

# Tag weights per diagnosis kind (see rank()). Vectorisation and unrolled classes lead where
# nothing is saturated: over the two CPU campaigns (docs/benchmarks/forge_cpu_levers_first.md and
# forge_cpu_levers.md) simd and restrict made 9 of the 12 admissions (unroll_classes, loop_tiled
# and collapse_1 one each), while threads_1 (13 rounds) and the dynamic and guided OpenMP
# schedules were never admitted.
# Diagnosis thresholds (see diagnose()).
MEMORY_BOUND_FRACTION = 0.6  # at or above: memory-bound
# Written-region points below which launch/fork-join cost dominates. Was 2^18 (64^3); the first
# CPU campaign (docs/benchmarks/forge_cpu_levers_first.md) measured threads_1 slower than the bound in
# all 12 rounds that chose it on 62^3-region cases, so fork/join does not dominate there: 2^15.
TINY_POINTS = 1 << 15
COMPUTE_INTENSITY = 4.0  # flop per compulsory byte at or above which a non-saturating kernel is compute-bound
LOW_OCCUPANCY = 0.25  # achieved/theoretical occupancy below which the kernel is occupancy-limited
HIGH_REGISTERS = 128  # registers per thread at or above which occupancy is limited
SMEM_LIMIT = 48 * 1024  # shared bytes per block levers stay within (no opt-in needed)
TEMPORAL_MARCH_MAX_T = 6  # unrolled composed stencils grow as T^3
# Plan parameters whose change rewrites the kernel's loop structure: such levers open a branch.
DISRUPTIVE_PARAMS = frozenset({"loop_order", "temporal", "smem_tile", "z_march"})


@dataclass(frozen=True)
class Lever:
    """One structural change: set plan parameter `param` to `value`."""

    name: str
    backend: str
    tags: tuple[str, ...]
    description: str
    param: str = ""
    value: Any = None

    def disruptive(self, plan: Plan) -> bool:
        """Rewrites the loop structure of `plan` (forged on a branch): a structural parameter
        leaves its default form. Retuning one already set (z_march 4 -> 8) is a tuning step."""
        return self.param in DISRUPTIVE_PARAMS and plan.value(self.param) == DEFAULTS[self.backend][self.param]

    def as_dict(self) -> dict[str, Any]:
        value = list(self.value) if isinstance(self.value, tuple) else self.value
        return {"name": self.name, "backend": self.backend, "tags": list(self.tags), "description": self.description,
                "param": self.param, "value": value}


def _cpu_levers() -> list[Lever]:
    L = []
    L.append(Lever("threads_1", "cpu", ("parallelism", "omp_schedule"), "Run on one OpenMP thread: on a tiny grid fork/join and barriers cost more than the work.", "threads", 1))
    L.append(Lever("threads_all", "cpu", ("parallelism",), "Run on all cores (threads = None).", "threads", None))
    for schedule in ("static", "dynamic", "guided"):
        L.append(Lever(f"schedule_{schedule}", "cpu", ("omp_schedule",), f"OpenMP schedule({schedule}) for the parallel loop.", "schedule", schedule))
    L.append(Lever("collapse_1", "cpu", ("omp_schedule", "parallelism"), "Parallelise the outer loop only (larger contiguous chunks per thread).", "collapse", 1))
    L.append(Lever("collapse_2", "cpu", ("omp_schedule", "parallelism"), "collapse(2) over the two outer loops (more, smaller chunks: balance).", "collapse", 2))
    L.append(Lever("loop_tiled", "cpu", ("loop_order", "cache_blocking"), "Cache blocking: parallel over (y, x) tiles, each tile marches z (3D) / its rows (2D) so reused planes stay in cache.", "loop_order", "tiled"))
    L.append(Lever("loop_zyx", "cpu", ("loop_order",), "Plain z, y, x loops over the region.", "loop_order", "zyx"))
    for n in (4, 8, 32, 64):
        L.append(Lever(f"block_y_{n}", "cpu", ("cache_blocking",), f"Tile extent {n} along y.", "block_y", n))
    for n in (64, 128, 256, 1024):
        L.append(Lever(f"block_x_{n}", "cpu", ("cache_blocking",), f"Tile extent {n} along x.", "block_x", n))
    for n in (4, 16):
        L.append(Lever(f"block_z_{n}", "cpu", ("cache_blocking", "temporal_fusion"), f"Temporal-blocking tile extent {n} along z.", "block_z", n))
    L.append(Lever("unroll_classes", "cpu", ("unroll",), "Write the sum per symmetry class: c_k * (u[..] + u[..] + ...), one multiply per class.", "unroll_classes", True))
    L.append(Lever("simd", "cpu", ("vectorisation",), "#pragma omp simd on the x loop.", "simd", True))
    L.append(Lever("restrict", "cpu", ("vectorisation", "aliasing"), "restrict-qualified pointers: no aliasing, freer vectorisation and scheduling.", "restrict", True))
    L.append(Lever("temporal_blocked", "cpu", ("temporal_fusion", "cache_blocking"), "Overlapped temporal blocking: all T steps per tile in a per-thread cache-sized scratch.", "temporal", "blocked"))
    L.append(Lever("temporal_sweeps", "cpu", ("temporal_fusion",), "T whole-grid sweeps through two scratch grids.", "temporal", "sweeps"))
    return L


CUDA_BLOCKS = ((32, 4, 1), (32, 8, 1), (32, 16, 1), (64, 4, 1), (64, 8, 1), (128, 2, 1), (128, 4, 1), (256, 1, 1), (16, 16, 1), (32, 4, 2), (32, 4, 4))


def _cuda_levers() -> list[Lever]:
    L = []
    for b in CUDA_BLOCKS:
        L.append(Lever(f"block_{b[0]}x{b[1]}x{b[2]}", "cuda", ("block_shape",), f"Thread block {b[0]} x {b[1]} x {b[2]}.", "block", b))
    for n in (4, 8, 16, 32):
        L.append(Lever(f"z_march_{n}", "cuda", ("z_march", "thread_coarsening"), f"2.5D marching: each thread walks {n} output planes with a register queue of z-neighbours.", "z_march", n))
    L.append(Lever("smem_tile", "cuda", ("shared_memory",), "Stage an x-y tile plus halo in shared memory; neighbours read from it.", "smem_tile", True))
    L.append(Lever("ldg", "cuda", ("read_only_cache",), "Global loads through the read-only cache (__ldg).", "ldg", True))
    L.append(Lever("unroll_classes", "cuda", ("unroll",), "Write the sum per symmetry class, one multiply per class.", "unroll_classes", True))
    L.append(Lever("vector_x2", "cuda", ("vector_loads", "thread_coarsening"), "Two x points per thread with 2-wide vector loads (scalar fallback on unaligned shapes).", "vector_x", 2))
    L.append(Lever("half2_loads", "cuda", ("vector_loads", "f16_storage"), "f16: two x points per thread with __half2-sized loads (float accumulation).", "vector_x", 2))
    L.append(Lever("vector_x4", "cuda", ("vector_loads", "thread_coarsening"), "Four x points per thread with 4-wide vector loads (scalar fallback on unaligned shapes).", "vector_x", 4))
    L.append(Lever("temporal_march", "cuda", ("temporal_fusion", "z_march"), "Composed T-step weights as an unrolled radius-T stencil, z-marching (each input plane read once per chunk).", "temporal", "march"))
    L.append(Lever("temporal_composed", "cuda", ("temporal_fusion",), "Composed T-step weights with run-time loops over the octahedron (codegen's kernel).", "temporal", "composed"))
    return L


LEVERS: tuple[Lever, ...] = tuple(_cpu_levers() + _cuda_levers())
_ORDER = {lever: n for n, lever in enumerate(LEVERS)}


def lever(name: str, backend: str) -> Lever:
    for candidate in LEVERS:
        if candidate.name == name and candidate.backend == backend:
            return candidate
    raise KeyError(f"no {backend} lever named {name!r}")


def initial_plan(case: Case, backend: str) -> Plan:
    """Round 0: every parameter at its default (the straightforward-like kernel)."""
    return Plan.default(backend)


def apply(lever: Lever, case: Case, plan: Plan) -> Plan:
    """The plan after `lever`: exactly one parameter changed (ValueError if the lever is for
    another backend or would change nothing)."""
    if lever.backend != plan.backend:
        raise ValueError(f"lever {lever.name} is a {lever.backend} lever; the plan is {plan.backend}")
    if plan.value(lever.param) == lever.value:
        raise ValueError(f"lever {lever.name} changes nothing: {lever.param} is already {lever.value!r}")
    return plan.with_(**{lever.param: lever.value})


def _fits(lever: Lever, case: Case, eff: dict[str, Any]) -> bool:
    """Case-specific sense (beyond 'changes the rendered kernel')."""
    s = case.stencil
    temporal = s.time_steps > 1
    region = [n - 2 * s.halo for n in case.shape]
    name = lever.name
    if lever.backend == "cpu":
        if name == "threads_1":
            return case.region_points < TINY_POINTS
        if name.startswith("block_y_"):
            return lever.value < region[-2]
        if name.startswith("block_x_"):
            return lever.value < region[-1]
        if name.startswith("block_z_"):
            return lever.value < region[0]
        if name.startswith("temporal_"):
            return temporal
        return True
    # CUDA
    if name.startswith("block_"):
        if s.dims == 2 and lever.value[2] != 1:
            return False
        return _smem_ok(case, eff, block=lever.value)
    if name.startswith("z_march_"):
        return s.dims == 3 and lever.value <= region[0]
    if name == "smem_tile":
        return _smem_ok(case, eff, smem=True)
    if name == "vector_x2":
        return case.precision != "f16" and _smem_ok(case, eff, vector=2)
    if name == "half2_loads":
        return case.precision == "f16" and _smem_ok(case, eff, vector=2)
    if name == "vector_x4":
        return _smem_ok(case, eff, vector=4)
    if name == "temporal_march":
        return 2 <= s.time_steps <= TEMPORAL_MARCH_MAX_T
    if name == "temporal_composed":
        return temporal
    return True


def _smem_ok(case: Case, eff: dict[str, Any], block=None, smem=None, vector=None) -> bool:
    """Shared bytes of the tile stay within SMEM_LIMIT (True when no tile is used)."""
    smem = eff["smem_tile"] if smem is None else smem
    if not smem:
        return True
    bx, by, bz = block or eff["block"]
    v = vector or eff["vector_x"]
    s = case.stencil
    r = s.halo if s.time_steps > 1 else s.radius
    layers = bz if (eff["z_march"] and s.dims == 3) else (bz + 2 * r if s.dims == 3 else 1)
    return (bx * v + 2 * r) * (by + 2 * r) * layers * case.dtype.itemsize <= SMEM_LIMIT


def applicable(case: Case, plan: Plan) -> list[Lever]:
    """Levers of the plan's backend that fit the case and change the rendered kernel (source or
    launch), in library order."""
    eff = effective(case, plan)
    current = render(case, plan.backend, plan)
    result = []
    for candidate in LEVERS:
        if candidate.backend != plan.backend or not _fits(candidate, case, eff):
            continue
        if eff.get(candidate.param) == candidate.value:
            continue
        try:
            nxt = apply(candidate, case, plan)
            kernel = render(case, plan.backend, nxt)
        except ValueError:
            continue
        if kernel == current:
            continue
        result.append(candidate)
    return result


# ---------------------------------------------------------------- diagnosis and ranking

KINDS = ("memory-bound", "compute-bound", "latency/launch-bound", "latency-bound", "occupancy-limited", "unknown")

WEIGHTS: dict[str, dict[str, int]] = {
    "memory-bound": {
        "temporal_fusion": 6, "z_march": 5, "cache_blocking": 5, "shared_memory": 4, "loop_order": 4,
        "f16_storage": 3, "vector_loads": 3, "read_only_cache": 2, "thread_coarsening": 2, "block_shape": 1,
        "vectorisation": 1,
    },
    "compute-bound": {
        "unroll": 5, "vectorisation": 5, "thread_coarsening": 2, "z_march": 1, "vector_loads": 2, "aliasing": 2,
        "block_shape": 1, "shared_memory": 1, "temporal_fusion": -1, "cache_blocking": -1,
    },
    "latency/launch-bound": {
        "block_shape": 4, "vectorisation": 4, "unroll": 3, "temporal_fusion": 3, "parallelism": 2, "read_only_cache": 1,
        "omp_schedule": 0, "thread_coarsening": -2, "z_march": -2, "cache_blocking": -1,
    },
    "latency-bound": {
        "vectorisation": 5, "read_only_cache": 4, "vector_loads": 4, "thread_coarsening": 4, "unroll": 4, "z_march": 3,
        "block_shape": 3, "aliasing": 1, "cache_blocking": 2, "shared_memory": 2, "loop_order": 2, "omp_schedule": 0,
    },
    "occupancy-limited": {
        "block_shape": 5, "read_only_cache": 2, "unroll": 1, "shared_memory": -2, "thread_coarsening": -1, "z_march": -1,
    },
    "unknown": {
        "vectorisation": 4, "z_march": 3, "temporal_fusion": 3, "unroll": 3, "vector_loads": 2, "shared_memory": 2,
        "read_only_cache": 2, "loop_order": 2, "cache_blocking": 1, "block_shape": 1, "omp_schedule": 1,
    },
}


def diagnosis_kind(diagnosis: str) -> str:
    """The KIND of a "KIND: detail" diagnosis ("unknown" if unrecognised)."""
    kind = diagnosis.split(":", 1)[0].strip()
    return kind if kind in WEIGHTS else "unknown"


def arithmetic_intensity(case: Case) -> float:
    """Flops per compulsory byte of one application."""
    return case.flops / case.compulsory_bytes


def diagnose(
    case: Case,
    fraction_of_copy: float | None,
    gflops: float | None,
    registers: int | None = None,
    occupancy: float | None = None,
) -> str:
    """A short bottleneck diagnosis, "KIND: detail". In order:

    1. fraction_of_copy >= MEMORY_BOUND_FRACTION: "memory-bound: x% of copy bandwidth".
    2. written region < TINY_POINTS points: "latency/launch-bound: tiny grid ...".
    3. occupancy < LOW_OCCUPANCY or registers >= HIGH_REGISTERS: "occupancy-limited: ...".
    4. no measurement at all: "unknown: no measurement".
    5. arithmetic intensity >= COMPUTE_INTENSITY flop/byte: "compute-bound: ...".
    6. otherwise (neither bandwidth nor arithmetic saturated): "latency-bound: ...".
    """
    pct = None if fraction_of_copy is None else 100.0 * fraction_of_copy
    if pct is not None and fraction_of_copy >= MEMORY_BOUND_FRACTION:
        return f"memory-bound: {pct:.0f}% of copy bandwidth"
    if case.region_points < TINY_POINTS:
        return f"latency/launch-bound: tiny grid of {case.region_points} points; fixed launch/fork-join cost dominates"
    if (occupancy is not None and occupancy < LOW_OCCUPANCY) or (registers is not None and registers >= HIGH_REGISTERS):
        parts = []
        if occupancy is not None:
            parts.append(f"occupancy {100.0 * occupancy:.0f}%")
        if registers is not None:
            parts.append(f"{registers} registers/thread")
        return f"occupancy-limited: {', '.join(parts)}"
    if fraction_of_copy is None and gflops is None:
        return "unknown: no measurement"
    intensity = arithmetic_intensity(case)
    measured = ", ".join(
        part for part in (f"{pct:.0f}% of copy bandwidth" if pct is not None else "", f"{gflops:.1f} GFLOP/s" if gflops is not None else "") if part
    )
    if intensity >= COMPUTE_INTENSITY:
        return f"compute-bound: {intensity:.1f} flop/byte, {measured}"
    return f"latency-bound: {measured} at {intensity:.1f} flop/byte (neither bandwidth nor arithmetic saturated)"


def score(lever: Lever, diagnosis: str) -> int:
    weights = WEIGHTS[diagnosis_kind(diagnosis)]
    return sum(weights.get(tag, 0) for tag in lever.tags)


def rank(levers: Iterable[Lever], diagnosis: str) -> list[Lever]:
    """Levers by descending match of their tags with the diagnosis kind; ties keep library order."""
    return sorted(levers, key=lambda lv: (-score(lv, diagnosis), _ORDER.get(lv, len(_ORDER)), lv.name))
