"""Building and running an application's two variants: the gate's hands, free of Django.

Every command is an argument list (no shell), run with a time limit in the sandbox of
measurement.harness.sandbox (another uid, no network, the allow-listed environment, writing only
its own folder of the scratch); a timeout or a crash is an outcome, never a hang. Correctness
(appgate.checks: the program's own check and a comparison of the two variants' declared
outputs) is judged on every run, timed runs included.
"""
from __future__ import annotations

import hashlib
import shlex
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from measurement.harness import sandbox

from .checks import (  # noqa: F401  (the judging of runs lives in appgate.checks; re-exported for callers)
    RunResult, _matched_seconds, agreement, clock_step, hotspot_of, judge_run, output_files, own_verdict, seconds_of,
)
from .builds import BuildResult, build, fresh_source, switch_value  # noqa: F401  (builds: appgate.builds; re-exported)
from .confined import confined, environment, substitute
from .manifest import LoadedManifest, file_hash

VARIANTS = ("baseline", "candidate")
TAIL = 2000


@dataclass
class DatasetMeasurement:
    dataset: str
    correct: dict[str, bool]
    detail: dict[str, str]
    samples: dict[str, list[float]] = field(default_factory=dict)
    hotspot: dict[str, list[float]] = field(default_factory=dict)
    # each timed run's wall time (the sandbox's timer): evidence beside the printed clock, which
    # the candidate's own program prints (docs/security.md)
    wall: dict[str, list[float]] = field(default_factory=dict)
    order: list[list[str]] = field(default_factory=list)
    # Each variant's printed clock's step in seconds (checks.clock_step): the finest seen over its
    # timed runs, since %g and cout drop trailing zeros ("0.00216" for 0.002160, a step of 1e-5
    # where the clock resolves 1e-6).
    clock_step: dict[str, float] = field(default_factory=dict)


def run(loaded: LoadedManifest, variant: str, binary: Path, dataset, scratch: Path) -> RunResult:
    """One run of `variant` on `dataset` in its own folder of `scratch`, with the dataset's input
    files placed there; {src} is a read-only copy of the source folder, {workdir} the folder."""
    m = loaded.manifest
    workdir = scratch / f"run-{variant}-{dataset.name}"
    workdir.mkdir(parents=True, exist_ok=True)
    source = scratch / f"source-{hashlib.sha256(str(loaded.source_dir).encode()).hexdigest()[:12]}"
    if not source.exists():  # one copy per source folder and scratch, for every run
        fresh_source(loaded.source_dir, source)
    place_inputs(loaded, dataset, workdir)
    values = {"out": str(binary), "src": str(source), "workdir": str(workdir), "switch": switch_value(loaded, variant)}
    values["args"] = " ".join(shlex.quote(a) for a in substitute(dataset.args, values))
    command = substitute(m.run.command, values)
    compared = {name: workdir / name for name in output_files(loaded)}
    for path in compared.values():
        path.unlink(missing_ok=True)  # never judge a stale output
    started = time.perf_counter()
    try:
        done, inside = confined(command, workdir, environment(loaded, variant, workdir), m.run.timeout_s, workdir,
                                [binary, source])
    except subprocess.TimeoutExpired as error:
        return RunResult(False, None, time.perf_counter() - started, "", problem=f"timed out after {error.timeout:g} s")
    wall = inside if inside is not None else time.perf_counter() - started
    result = RunResult(done.returncode == 0, done.returncode, wall, done.stdout, errors=(done.stderr or "")[-TAIL:])
    if done.returncode != 0:
        code = done.returncode  # a signal: negative from a bare process, 128 + N through bwrap
        signal_number = -code if code < 0 else (code - 128 if code > 128 and not sandbox.unsafe() else 0)
        result.problem = f"exit status {done.returncode}" + (f" (signal {signal_number})" if signal_number else "")
    result.outputs = {name: path.read_bytes() if path.is_file() else None for name, path in compared.items()}
    return result


def input_hashes(loaded: LoadedManifest, dataset) -> dict[str, str]:
    """The sha256 of each input file of `dataset`, as the runs get them."""
    return {name: file_hash(loaded.source_dir / name) for name in dataset.inputs}


def place_inputs(loaded: LoadedManifest, dataset, workdir: Path) -> None:
    """Copy the dataset's input files into the run folder, at their paths in the source folder,
    anew before every run: a run may write its folder, and no run reads what an earlier one left."""
    for name in dataset.inputs:
        placed = workdir / name
        if placed.is_dir() and not placed.is_symlink():
            shutil.rmtree(placed)
        placed.unlink(missing_ok=True)
        placed.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(loaded.source_dir / name, placed)


def check_dataset(loaded: LoadedManifest, binaries: dict[str, Path], dataset, scratch: Path) -> DatasetMeasurement:
    """One run of each variant: both must be correct before any timing starts."""
    runs = {v: run(loaded, v, binaries[v], dataset, scratch) for v in VARIANTS}
    measurement = DatasetMeasurement(dataset.name, {}, {})
    for v in VARIANTS:
        measurement.correct[v], measurement.detail[v] = own_verdict(loaded, runs[v])
    if all(measurement.correct.values()):
        agree, why = agreement(loaded, runs["baseline"], runs["candidate"])
        measurement.correct["candidate"] = agree
        measurement.detail["candidate"] += f"; {why}"
    return measurement


def time_dataset(loaded: LoadedManifest, binaries: dict[str, Path], dataset, scratch: Path, passes: int,
                 interleave: bool = True, warmup: int = 1) -> DatasetMeasurement:
    """`passes` passes; in each, every variant runs once, in rotated order; every timed run is
    judged too. Warm-up runs first (untimed)."""
    measurement = DatasetMeasurement(dataset.name, {v: True for v in VARIANTS}, {v: "" for v in VARIANTS},
                                     {v: [] for v in VARIANTS}, {v: [] for v in VARIANTS})
    for _ in range(warmup):
        for v in VARIANTS:
            run(loaded, v, binaries[v], dataset, scratch)
    if interleave:  # both variants in each pass, in rotated order
        schedule = [list(VARIANTS[p % 2:] + VARIANTS[:p % 2]) for p in range(passes)]
    else:  # all of one variant, then all of the other (the protocol ablation's arm)
        schedule = [[v] for v in VARIANTS for _ in range(passes)]
    for order in schedule:
        results = {}
        for v in order:
            results[v] = run(loaded, v, binaries[v], dataset, scratch)
            ok, why = own_verdict(loaded, results[v])
            seconds = seconds_of(loaded, results[v])
            if not ok or seconds is None:
                measurement.correct[v] = False
                measurement.detail[v] = f"a timed run: {why}"
                continue
            measurement.samples[v].append(seconds)
            measurement.wall.setdefault(v, []).append(results[v].wall_seconds)
            step = clock_step(loaded, results[v])
            if step is not None:
                measurement.clock_step[v] = min(step, measurement.clock_step.get(v, step))
            hot = hotspot_of(loaded, results[v])
            if hot is not None:
                measurement.hotspot[v].append(hot)
        if len(results) == 2 and all(r.ok for r in results.values()):
            agree, why = agreement(loaded, results["baseline"], results["candidate"])
            if not agree:
                measurement.correct["candidate"] = False
                measurement.detail["candidate"] = f"a timed run: {why}"
        measurement.order.append(order)
    return measurement
