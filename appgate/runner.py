"""Building and running an application's two variants: the gate's hands, free of Django.

Every command is an argument list (no shell), run with a time limit in the sandbox of
measurement.harness.sandbox (another uid, no network, the allow-listed environment, writing only
its own folder of the scratch); a timeout or a crash is an outcome, never a hang. Correctness is
the program's own verdict (`builtin`) or a comparison of the two variants' outputs
(`same_program_output_diff`, `cross_variant_stdout`), checked on every run, timed runs included.
"""
from __future__ import annotations

import hashlib
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from measurement.harness import buildcache, sandbox

from . import patterns
from .manifest import LoadedManifest

VARIANTS = ("baseline", "candidate")
NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf)", re.IGNORECASE)
TAIL = 2000


@dataclass
class BuildResult:
    variant: str
    ok: bool
    command: list[str]
    seconds: float
    output_tail: str
    binary: Path | None = None
    binary_hash: str | None = None


@dataclass
class RunResult:
    ok: bool  # exited 0 within the limit
    returncode: int | None  # None: killed at the time limit
    wall_seconds: float
    stdout: str
    output_text: str | None = None  # the output file of same_program_output_diff
    problem: str = ""


@dataclass
class DatasetMeasurement:
    dataset: str
    correct: dict[str, bool]
    detail: dict[str, str]
    samples: dict[str, list[float]] = field(default_factory=dict)
    hotspot: dict[str, list[float]] = field(default_factory=dict)
    order: list[list[str]] = field(default_factory=list)


def substitute(template: str, values: dict[str, str]) -> list[str]:
    """Split like a shell, then fill placeholders; a placeholder alone in its argument may expand
    to several arguments ({args}, a multi-flag {switch}) or to none (an empty switch)."""
    out: list[str] = []
    for token in shlex.split(template):
        whole = re.fullmatch(r"\{(\w+)\}", token)
        if whole:
            out += shlex.split(values.get(whole.group(1), ""))
        else:
            out.append(re.sub(r"\{(\w+)\}", lambda m: values.get(m.group(1), m.group(0)), token))
    return out


def _environment(loaded: LoadedManifest, variant: str, home: Path) -> dict[str, str]:
    """The sandbox's allow-listed environment (nothing of the service's: no DATABASE_URL, broker,
    keys) with HOME and TMPDIR in the command's own folder, and the manifest's switch variable."""
    env = {k: v for k, v in sandbox.child_environment().items() if k != buildcache.CACHE_ENV}
    env.update(HOME=str(home), TMPDIR=str(home))
    switch = loaded.manifest.switch
    if switch.kind == "env":
        env[switch.name] = switch.candidate if variant == "candidate" else switch.baseline
    return env


def _switch_value(loaded: LoadedManifest, variant: str) -> str:
    switch = loaded.manifest.switch
    return (switch.candidate if variant == "candidate" else switch.baseline) if switch.kind != "env" else ""


def patched_source(loaded: LoadedManifest, files: dict[str, str], scratch: Path) -> Path:
    """A copy of the source folder with a candidate patch's files written over it: the baseline
    keeps building from the original."""
    tree = scratch / "candidate-source"
    shutil.copytree(loaded.source_dir, tree, symlinks=True)
    for relative, text in files.items():
        (tree / relative).write_text(text)
    return tree


# Inside the sandbox, between its start and the program: runs the program and writes its wall
# time to a pipe, so that a run timed by the wall clock does not count the sandbox's start
# (bwrap, prlimit, setpriv, this interpreter: 10-30 ms, against runs of a few ms in the tests).
# A signal becomes 128 + N, as bwrap reports it. Not dumpable: the program (same uid) cannot
# reach the timer's pipe through /proc, and it inherits no descriptor but stdin/out/err.
WALL_TIMER = """import ctypes, os, subprocess, sys, time
ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0
fd, argv = int(sys.argv[1]), sys.argv[2:]
began = time.perf_counter()
code = subprocess.call(argv)
os.write(fd, repr(time.perf_counter() - began).encode())
sys.exit(128 - code if code < 0 else code)
"""


def _confined(command: list[str], cwd: Path, env: dict[str, str], timeout: float, writable: Path,
              readable: list[Path]) -> tuple[subprocess.CompletedProcess, float | None]:
    """One build or run in the sandbox (measurement.harness.sandbox.command): it writes only to
    `writable` (its own folder: a candidate cannot touch the baseline's binary or outputs),
    reads `readable` besides the read-only system, has no network, runs as another uid with
    rlimits, and everything it started is killed when it ends or times out. Also the program's
    own wall time, measured inside the sandbox (None without one: the caller's clock is it)."""
    sandbox.hand_over(writable)
    if sandbox.unsafe():
        return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout), None
    reader, writer = os.pipe()
    try:
        argv = sandbox.command([sys.executable, "-c", WALL_TIMER, str(writer), *command], timeout, str(cwd),
                               writable=[str(writable)], readable=[str(p) for p in readable])
        done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, pass_fds=(writer,))
        os.close(writer)
        writer = -1
        measured = os.read(reader, 64)
    finally:
        os.close(reader)
        if writer >= 0:
            os.close(writer)
    try:
        seconds = float(measured)
    except ValueError:  # the program never ran (the timer could not start it)
        return done, None
    return done, seconds if 0 <= seconds <= timeout else None


def _sandbox_copy(source_dir: Path, target: Path) -> Path:
    """A copy of a source folder that the sandbox's uid can read, whatever the original's modes
    (a manifest's folder may be private to the service user), made anew at `target`."""
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(source_dir, target, symlinks=True)
    sandbox.hand_over(target)
    return target


def build(loaded: LoadedManifest, variant: str, scratch: Path, source_dir: Path | None = None) -> BuildResult:
    """Build one variant from a copy of `source_dir` (default: the manifest's source folder) in a
    folder of its own in `scratch`, the only place the build may write."""
    m = loaded.manifest
    folder = scratch / f"build-{variant}"
    folder.mkdir(parents=True, exist_ok=True)
    source_dir = _sandbox_copy(source_dir or loaded.source_dir, folder / "src")
    binary = folder / f"{m.name}-{variant}"
    values = {"out": str(binary), "src": str(source_dir), "workdir": str(folder), "switch": _switch_value(loaded, variant)}
    command = substitute(m.build.command, values)
    started = time.perf_counter()
    try:
        done, _ = _confined(command, source_dir, _environment(loaded, variant, folder), m.build.timeout_s, folder, [])
    except subprocess.TimeoutExpired as error:
        return BuildResult(variant, False, command, time.perf_counter() - started, f"build timed out after {error.timeout:g} s")
    except OSError as error:
        return BuildResult(variant, False, command, time.perf_counter() - started, f"cannot run the build: {error}")
    seconds = time.perf_counter() - started
    output = (done.stdout + done.stderr)[-TAIL:]
    if done.returncode != 0 or not binary.is_file():
        why = f"exit status {done.returncode}" if done.returncode != 0 else f"no binary at {binary}"
        return BuildResult(variant, False, command, seconds, f"{why}\n{output}")
    return BuildResult(variant, True, command, seconds, output, binary, hashlib.sha256(binary.read_bytes()).hexdigest())


def run(loaded: LoadedManifest, variant: str, binary: Path, dataset, scratch: Path) -> RunResult:
    m = loaded.manifest
    workdir = scratch / f"run-{variant}-{dataset.name}"
    workdir.mkdir(parents=True, exist_ok=True)
    source = scratch / f"source-{hashlib.sha256(str(loaded.source_dir).encode()).hexdigest()[:12]}"
    if not source.exists():  # one copy per source folder and scratch, for every run
        _sandbox_copy(loaded.source_dir, source)
    values = {"out": str(binary), "src": str(source), "workdir": str(workdir), "args": dataset.args,
              "switch": _switch_value(loaded, variant)}
    command = substitute(m.run.command, values)
    output_file = workdir / m.correctness.output_file if m.correctness.mode == "same_program_output_diff" else None
    if output_file is not None and output_file.exists():
        output_file.unlink()  # never judge a stale output
    started = time.perf_counter()
    try:
        done, inside = _confined(command, workdir, _environment(loaded, variant, workdir), m.run.timeout_s, workdir,
                                 [binary, source])
    except subprocess.TimeoutExpired as error:
        return RunResult(False, None, time.perf_counter() - started, "", problem=f"timed out after {error.timeout:g} s")
    wall = inside if inside is not None else time.perf_counter() - started
    result = RunResult(done.returncode == 0, done.returncode, wall, done.stdout)
    if done.returncode != 0:
        code = done.returncode  # a signal: negative from a bare process, 128 + N through bwrap
        signal_number = -code if code < 0 else (code - 128 if code > 128 and not sandbox.unsafe() else 0)
        result.problem = f"exit status {done.returncode}" + (f" (signal {signal_number})" if signal_number else "")
    if output_file is not None:
        result.output_text = output_file.read_text(errors="replace") if output_file.is_file() else None
    return result


def seconds_of(loaded: LoadedManifest, result: RunResult) -> float | None:
    timing = loaded.manifest.timing
    if timing.source == "wall":
        return result.wall_seconds
    return _matched_seconds(timing.pattern, result.stdout)


def hotspot_of(loaded: LoadedManifest, result: RunResult) -> float | None:
    hotspot = loaded.manifest.hotspot
    return _matched_seconds(hotspot.pattern, result.stdout) if hotspot.source == "pattern" else None


def _matched_seconds(pattern: str | None, text: str) -> float | None:
    found = patterns.findall(pattern, text) if pattern else []
    if not found:
        return None
    try:
        value = float(found[-1])
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def own_verdict(loaded: LoadedManifest, result: RunResult) -> tuple[bool, str]:
    """The program's verdict on one run (builtin), or that the run produced what can be compared."""
    if not result.ok:
        return False, result.problem or "the run failed"
    c = loaded.manifest.correctness
    if c.mode == "builtin":
        if patterns.search(c.failure_pattern, result.stdout):
            return False, f"the program reported failure ({_line(c.failure_pattern, result.stdout)})"
        if not patterns.search(c.result_pattern, result.stdout):
            return False, "the program did not report its verification result"
        return True, _line(c.result_pattern, result.stdout)
    if c.mode == "same_program_output_diff" and result.output_text is None:
        return False, f"no output file {c.output_file}"
    if c.mode == "cross_variant_stdout" and not patterns.search(c.match_pattern, result.stdout):
        return False, "the output has nothing matching the comparison pattern"
    if loaded.manifest.timing.source == "pattern" and seconds_of(loaded, result) is None:
        return False, "the program did not report its time"
    return True, "ran"


def agreement(loaded: LoadedManifest, baseline: RunResult, candidate: RunResult) -> tuple[bool, str]:
    """For the comparing modes: do the candidate's results match the baseline's?"""
    c = loaded.manifest.correctness
    if c.mode == "builtin":
        return True, "the program's own verdict"
    if c.mode == "same_program_output_diff":
        a, b = _numbers(baseline.output_text or ""), _numbers(candidate.output_text or "")
    else:
        a, b = _matched_numbers(c.match_pattern, baseline.stdout), _matched_numbers(c.match_pattern, candidate.stdout)
    tolerance = c.tolerance
    if len(a) != len(b) or not a:
        return False, f"the outputs differ in length ({len(a)} vs {len(b)} numbers)"
    worst = max(abs(x - y) / max(abs(x), abs(y), 1e-300) if x != y else 0.0 for x, y in zip(a, b))
    if not math.isfinite(worst) or worst > tolerance:
        return False, f"largest relative difference {worst:.3g} > tolerance {tolerance:g}"
    return True, f"largest relative difference {worst:.3g} <= {tolerance:g}"


def _numbers(text: str) -> list[float]:
    return [float(x) for x in NUMBER.findall(text)]


def _matched_numbers(pattern: str, text: str) -> list[float]:
    """Every group of every match (the whole match when the pattern has no group), as numbers."""
    return [float(x) for m in patterns.findall(pattern, text) for x in ((m,) if isinstance(m, str) else m)]


def _line(pattern: str, text: str) -> str:
    for line in text.splitlines():
        if patterns.search(pattern, line):
            return line.strip()[:200]
    return ""


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
