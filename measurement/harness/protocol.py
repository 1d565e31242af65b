"""Child-process side of a measurement: correctness runs and the canonical timing protocol.

These functions run inside `run_isolated` next to candidate code; they return raw data
(outputs, samples) and leave every judgement to the parent (measurement.harness.judge).

No state survives between timed launches: before every launch (warm-up and timed, untimed,
before the flush) the output is filled with a finite decoy value drawn for that launch, and
after every timed launch the output is read at LAUNCH_SAMPLE_POINTS points of the region (the
last launch of the last pass at all `sample_count` points). A kernel that trusts what the
output already holds (skips work where it finds a number, as the stale-output cheat of
issue 14 did) leaves the decoy there, and a kernel that keeps state of its own (a launch
counter) and skips work on some launches leaves it in the launches it skipped: either way
that launch's sample is wrong and the judge rejects the variant (`timed_output_mismatch`).
The decoys and the points come from `sample_seed`, which the parent draws and no kernel is
given. The fill is one memset-like pass (on the GPU a device-side fill), the read-back a
gather of a few thousand values.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from measurement.backends import get_backend
from measurement.backends.base import CompileError, SourceTooLarge, Variant, check_source, ensure_fits

from .cases import parse_case
from .oracle import make_inputs, sample_points

# Points read back after every timed launch (plus the region's corners); the last launch of
# the last pass is read at all TimingSpec.sample_count points. A kernel that skips a tenth of
# the region leaves a wrong value among 2048 random points with probability 1 - 0.9^2048.
LAUNCH_SAMPLE_POINTS = 2048


@dataclass(frozen=True)
class CheckSpec:
    label: str
    shape: tuple[int, ...]
    seed: int
    coefficients: tuple[float, ...]
    coefficient_set: str  # "case" | "fresh" | "trivial-looking"
    guard: str | None = None


@dataclass
class CheckRun:
    label: str
    output: np.ndarray
    inputs_unchanged: bool
    u_after: np.ndarray | None  # only when the run changed its input
    seconds: float


@dataclass(frozen=True)
class TimingSpec:
    passes: int = 7
    launches: int = 5
    warmup: int = 2
    flush: bool = True
    interleave: bool = True
    seed: int = 0
    sample_seed: int = 1
    sample_count: int = 20000


@dataclass
class TimingRun:
    order: list[list[str]]  # the variant order of each pass
    samples: dict[str, list[list[float]]]  # variant -> pass -> launch seconds
    output_samples: dict[str, list[float]]  # variant -> output at the sample points (last pass)
    # variant -> pass -> (launches x points) output at the first points of sample_points after
    # each timed launch, in the case's dtype; a pipelined variant has one row per pass
    launch_outputs: dict[str, list[np.ndarray]]
    launch_fills: dict[str, list[list[float]]]  # variant -> pass -> the decoy filled before each launch
    inputs_unchanged: bool
    copy_bandwidth: float
    launch_overhead: float  # the fastest of >= 9 launches of an empty kernel, seconds
    environment_before: dict[str, Any] = field(default_factory=dict)
    environment_after: dict[str, Any] = field(default_factory=dict)
    wall_seconds: float = 0.0
    left_out: dict[str, str] = field(default_factory=dict)  # variant -> why it was not timed (leave_out_failing)


def prepare_variant(backend, case, variant: Variant):
    """backend.prepare, after refusing a source above the limit before it reaches a compiler."""
    if variant.kernel is not None:
        try:
            check_source(variant.kernel.source)
        except SourceTooLarge as error:
            raise CompileError(str(error)) from None
    return backend.prepare(case, variant)


def check_variant(backend_name: str, case_id: str, variant: Variant, checks: list[CheckSpec]) -> list[CheckRun]:
    backend = get_backend(backend_name)
    case = parse_case(case_id)
    return run_checks(backend, case, prepare_variant(backend, case, variant), checks)


def run_checks(backend, case, prepared, checks: list[CheckSpec]) -> list[CheckRun]:
    """The check runs of a prepared variant: check_variant's, or one of several that a child
    checks with one preparation each (measurement.harness.session_info)."""
    runs = []
    for spec in checks:
        shaped = case.with_shape(spec.shape)
        buffers = backend.allocate(shaped, make_inputs(shaped, spec.seed), spec.guard)
        buffers.poison_output()
        started = time.perf_counter()
        prepared.run(buffers, backend.coefficients(np.asarray(spec.coefficients)))
        backend.synchronize()
        seconds = time.perf_counter() - started
        unchanged = buffers.inputs_unchanged()
        runs.append(
            CheckRun(spec.label, buffers.output(), unchanged, None if unchanged else buffers.input_array("u"), seconds)
        )
    return runs


def rotated(names: list[str], pass_index: int, interleave: bool) -> list[str]:
    if not interleave or not names:
        return list(names)
    shift = pass_index % len(names)
    return names[shift:] + names[:shift]


def pipelined_launches(backend, prepared, buffers, coef, launches: int) -> list[float]:
    """The careless way, for the protocol ablation only: k launches back to back, no flush or
    synchronisation between them, one clock around the batch; each sample = batch time / k."""
    backend.synchronize()
    start = time.perf_counter_ns()
    for _ in range(launches):
        prepared.run(buffers, coef)
    backend.synchronize()
    return [(time.perf_counter_ns() - start) * 1e-9 / launches] * launches


class LaunchWatch:
    """The untimed work around each launch of one variant in one pass: the decoy fill before,
    the read-back after (the time_launches hooks)."""

    def __init__(self, buffers, read, rng: np.random.Generator, launches: int):
        self.buffers, self.read = buffers, read
        # Finite, of the outputs' magnitude, a new value each launch: it looks like a result.
        self.fills = [float(v) for v in rng.uniform(0.5, 1.5, launches) * rng.choice((-1.0, 1.0), launches)]
        self.outputs: list[np.ndarray] = []

    def before(self, launch: int) -> None:
        self.buffers.fill_output(self.fills[launch])

    def after(self, launch: int) -> None:
        self.outputs.append(self.read())


def time_variants(backend_name: str, case_id: str, variants: list[Variant], coefficients: tuple[float, ...], spec: TimingSpec,
                  pipelined: tuple[str, ...] = (), leave_out_failing: bool = False) -> TimingRun:
    """Every variant in every pass, in rotated order, k launches each; raw samples returned.

    Every launch starts from a freshly filled output and every timed launch's output is read
    back (the module docstring says why). `pipelined` names variants timed by
    pipelined_launches instead (one fill before and one read-back after the batch): only the
    protocol ablation asks for it (asymmetric timing), never a measurement that admits anything.

    With `leave_out_failing`, a variant whose preparation or warm-up (at least one launch, each
    variant synchronised on its own) raises is left out of the passes, its error in
    TimingRun.left_out, instead of failing the run: a tuning run (measurement.tuning) times a
    library's schedules together, and the checks ran smaller shapes than the case's, at which a
    schedule can still fail (diamond_ts8's sliding windows did not launch on the H200). A
    failure during the passes fails the run either way."""
    started = time.perf_counter()
    backend = get_backend(backend_name)
    case = parse_case(case_id)
    ensure_fits(backend, case)
    environment_before = backend.environment()
    copy_bandwidth = backend.copy_bandwidth(case.points * case.dtype.itemsize)
    prepared, left_out = {}, {}
    for variant in variants:
        try:
            prepared[variant.name] = prepare_variant(backend, case, variant)
        except Exception as exc:
            if not leave_out_failing:
                raise
            left_out[variant.name] = f"{type(exc).__name__}: {exc}"
    buffers = backend.allocate(case, make_inputs(case, spec.seed))
    coef = backend.coefficients(np.asarray(coefficients))
    names = list(prepared)
    empty = backend.prepare(case, Variant("empty", backend.empty(case)))
    overhead = sorted(backend.time_launches(empty, buffers, coef, max(9, spec.launches), spec.flush))
    # The fastest empty launch, not the median: the impossible-speed check subtracts it, and an
    # estimate inflated by noise once rejected an honest CPU kernel (box2d_1/512x512/f32, in
    # docs/benchmarks/forge_cpu_levers.jsonl) as faster than the copy floor.
    launch_overhead = overhead[0]
    points = sample_points(case, spec.sample_count, spec.sample_seed)  # the region's corners, then random points
    index = tuple(points.T)
    corners = len(points) - spec.sample_count
    read_some = buffers.sampler(points[: corners + LAUNCH_SAMPLE_POINTS])
    rng = np.random.default_rng(np.random.SeedSequence(spec.sample_seed).spawn(1)[0])
    warmup = max(spec.warmup, 1) if leave_out_failing else spec.warmup
    if warmup:
        for name in names:
            warm = LaunchWatch(buffers, read_some, rng, warmup)
            try:
                for launch in range(warmup):
                    warm.before(launch)
                    prepared[name].run(buffers, coef)
                if leave_out_failing:
                    backend.synchronize()  # an asynchronous launch failure shows here, for this variant
            except Exception as exc:
                if not leave_out_failing:
                    raise
                left_out[name] = f"{type(exc).__name__}: {exc}"
        names = [name for name in names if name not in left_out]
        backend.synchronize()
    samples: dict[str, list[list[float]]] = {name: [] for name in names}
    output_samples: dict[str, list[float]] = {}
    launch_outputs: dict[str, list[np.ndarray]] = {name: [] for name in names}
    launch_fills: dict[str, list[list[float]]] = {name: [] for name in names}
    order = []
    for pass_index in range(spec.passes):
        sequence = rotated(names, pass_index, spec.interleave)
        order.append(sequence)
        for name in sequence:
            watch = LaunchWatch(buffers, read_some, rng, 1 if name in pipelined else spec.launches)
            if name in pipelined:
                watch.before(0)
                samples[name].append(pipelined_launches(backend, prepared[name], buffers, coef, spec.launches))
                watch.after(0)
            else:
                samples[name].append(backend.time_launches(prepared[name], buffers, coef, spec.launches, spec.flush,
                                                           before=watch.before, after=watch.after))
            launch_outputs[name].append(np.stack(watch.outputs))
            launch_fills[name].append(watch.fills)
            if pass_index == spec.passes - 1:
                output_samples[name] = buffers.output()[index].astype(np.float64).tolist()
    return TimingRun(
        order=order,
        samples=samples,
        output_samples=output_samples,
        launch_outputs=launch_outputs,
        launch_fills=launch_fills,
        inputs_unchanged=buffers.inputs_unchanged(),
        copy_bandwidth=copy_bandwidth,
        launch_overhead=launch_overhead,
        environment_before=environment_before,
        environment_after=backend.environment(),
        wall_seconds=time.perf_counter() - started,
        left_out=left_out,
    )
