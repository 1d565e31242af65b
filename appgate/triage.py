"""`manage.py appgate triage`: the App Agent's M1 (appgate.agent.triage) on many manifests, and a
report of each application's state and reason code with the counts per state and per reason
(docs/appgate.md#triage). A manifest that does not load is reported, not triaged.

At scale (issue 18: about 200 programs in few device calls of at most 10 minutes each):
- the baselines build in parallel, `jobs` at a time in threads (each build is a compiler process,
  in the sandbox like every build), each in a folder of its own, also where this machine cannot
  run them (a CUDA program on a CPU machine: the build is still tried, the state says so);
- the runs go `run_jobs` at a time (default one: one GPU, shared with nothing but the builds on
  the CPU), in threads that write nothing; with more, programs run side by side on the GPU (the
  evidence says `concurrent_runs`: a triage's times, never a gate's, which times one program
  alone) and profiles still go one at a time (one set of counters). Every ledger write is in
  this thread: the agent records each state (AppRegistered, AppStateChanged,
  AppMilestoneReached), the report only repeats it;
- the report is saved after every program (`save`), and the programs of a resumed report are
  skipped, so a call cut short loses at most the program it was running;
- a deadline stops new work in time: no build starts whose time limit (capped at the time left)
  is cut by it without being left for the next call, and no program's runs start unless all of
  them (and its profile) fit in the time left at their limits.
"""
from __future__ import annotations

import collections
import functools
import shutil
import threading
import time
import uuid
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from ledger.leases import SCRATCH_ROOT
from ledger.selectors import stream_events

from . import builds
from .agent import MIN_BASELINE_SECONDS, Profiler, capped_runs, measure_m1, triage
from .builds import BuildResult
from .manifest import LoadedManifest, ManifestError, load_manifest
from .services import AppGateError, machine

MIN_BUILD_S = 30.0  # no build starts with less time than this (or its own limit) left before the deadline


def manifest_paths(given: list[str]) -> list[Path]:
    """The manifests named, a folder standing for the *.yaml files in it."""
    paths: list[Path] = []
    for item in map(Path, given):
        paths += sorted(item.glob("*.yaml")) if item.is_dir() else [item]
    return paths


@dataclass(frozen=True)
class Limits:
    """How a triage spends its call: parallel builds, each build's and run's time limit (capped
    below the manifest's), the profile's hook, and the deadline (a time.monotonic() value)."""

    jobs: int = 1
    run_jobs: int = 1
    build_timeout_s: float | None = None
    run_timeout_s: float | None = None
    profile: Profiler | None = None
    profile_timeout_s: float = 0.0
    deadline: float | None = None

    def left(self) -> float:
        return float("inf") if self.deadline is None else self.deadline - time.monotonic()


def key(manifest: str | Path) -> str:
    """A program's key in a report: its manifest's file name (an import writes the manifests
    anew on each machine, in another folder; the name is the application's)."""
    return Path(manifest).name


def triage_all(paths: list[Path], actor: str, progress: Callable[[str], None] | None = None, *,
               limits: Limits = Limits(), resumed: dict | None = None,
               save: Callable[[dict], None] | None = None, retry: frozenset[str] = frozenset()) -> dict:
    """Triage every manifest of `paths` not already in `resumed` (a report of an earlier call),
    except that resumed rows whose code is in `retry` are triaged again (a run that passed an
    earlier call's shorter time limit: `timed_out` is a limit of the call, not of the program);
    the report (the resumed rows and the new) is handed to `save` after each program."""
    say = progress or (lambda message: None)
    rows: list[dict] = [row for row in (resumed or {}).get("apps", []) if row["code"] not in retry]
    done = {key(row["manifest"]) for row in rows}
    todo: collections.deque[tuple[Path, LoadedManifest]] = collections.deque()
    for path in paths:
        if key(path) in done:
            continue
        try:
            todo.append((path, load_manifest(path)))
        except ManifestError as error:
            rows.append(_row(path, None, "invalid_manifest", "; ".join(error.problems)))
    say(f"{len(todo)} to triage, {len(done)} already in the resumed report, {limits.jobs} parallel builds")
    left_out: list[str] = []
    work = SCRATCH_ROOT / f"triage-{uuid.uuid4().hex[:12]}"
    work.mkdir(parents=True, mode=0o755)
    started, total = time.monotonic(), len(todo)
    profile = _one_at_a_time(limits)

    def record(path: Path, loaded: LoadedManifest, folder: Path, row: dict | None) -> None:
        shutil.rmtree(folder, ignore_errors=True)
        if row is None:
            left_out.append(key(path))
            return
        rows.append(row)
        say(f"[{len(rows) - len(done)}/{total}, {time.monotonic() - started:.0f} s] {row['app']}: "
            f"{row['state']} ({row['code']})" + (f", built in {row['build_s']:.0f} s" if row.get("build_s") else ""))
        if save:
            save(report(rows, left_out + [key(p) for p, _ in todo]))

    try:
        with ThreadPoolExecutor(max_workers=limits.jobs) as build_pool, \
                ThreadPoolExecutor(max_workers=limits.run_jobs) as run_pool:
            building: dict[Future, tuple[Path, LoadedManifest, Path]] = {}
            running: dict[Future, tuple[Path, LoadedManifest, Path, dict[str, BuildResult]]] = {}
            while todo or building or running:
                while todo and len(building) < 2 * limits.jobs and limits.left() > MIN_BUILD_S:
                    path, loaded = todo.popleft()
                    folder = work / loaded.name
                    folder.mkdir(mode=0o755)
                    building[build_pool.submit(_build, loaded, folder, limits)] = (path, loaded, folder)
                if not building and not running:
                    break  # the deadline: nothing more starts
                finished, _ = wait([*building, *running], return_when=FIRST_COMPLETED)
                for future in [f for f in building if f in finished]:  # in the order they started
                    path, loaded, folder = building.pop(future)
                    failed, built, needs_runs = _built(path, loaded, future, limits)
                    if failed is not None or built is None:  # the build step raised / left for the next call
                        record(path, loaded, folder, failed)
                    elif not needs_runs:  # decided without a run: the build failed or this machine cannot run it
                        record(path, loaded, folder, _triaged(path, loaded, actor, say, limits, built))
                    else:
                        running[run_pool.submit(_measure, loaded, built, folder, limits, profile)] = \
                            (path, loaded, folder, built)
                for future in [f for f in running if f in finished]:
                    path, loaded, folder, built = running.pop(future)
                    try:
                        measured = future.result()
                    except Exception as error:  # noqa: BLE001  (one program's failure is its row, not the end of the call)
                        row = _row(path, loaded.name, "triage_error", f"M1's runs raised {type(error).__name__}: {error}")
                    else:
                        row = measured and _triaged(path, loaded, actor, say, limits, built, measured)
                    record(path, loaded, folder, row)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result = report(rows, left_out + [key(p) for p, _ in todo])
    if save:
        save(result)
    return result


class _PastDeadline(Exception):
    """A run or profile that no longer fits before the deadline: the program is left for the next call."""


def _build(loaded: LoadedManifest, folder: Path, limits: Limits) -> dict[str, BuildResult] | None:
    """In a worker thread (no ledger, no Django): the baseline's builds, one per distinct
    build_args, each limited to the manifest's time, the triage's cap and the time left; None
    when the deadline cut one short or left no time to start it (the next call builds it)."""
    built: dict[str, BuildResult] = {}
    for build_args in builds.build_arguments(loaded):
        wanted = min(loaded.manifest.build.timeout_s, limits.build_timeout_s or float("inf"))
        allowed = min(wanted, limits.left())
        if limits.left() < min(wanted, MIN_BUILD_S):
            return None
        build = loaded.manifest.build.model_copy(update={"timeout_s": allowed})
        capped = replace(loaded, manifest=loaded.manifest.model_copy(update={"build": build}))
        built[build_args] = builds.build(capped, "baseline", folder, build_args=build_args)
        if not built[build_args].ok:
            cut = allowed < wanted and built[build_args].output_tail.startswith("build timed out")
            return None if cut else built
    return built


def _built(path: Path, loaded: LoadedManifest, future: Future, limits: Limits
           ) -> tuple[dict | None, dict[str, BuildResult] | None, bool]:
    """After a program's build: (its row when the build step raised, the builds (None: left for
    the next call), whether M1 needs runs). A failed build, or a program this machine cannot
    run, is decided without a run; the others are left for the next call when their runs would
    not fit before the deadline."""
    try:
        built = future.result()
    except Exception as error:  # noqa: BLE001  (a bug in one build must not end the call: reported)
        return _row(path, loaded.name, "triage_error", f"the build step raised {type(error).__name__}: {error}"), None, False
    if built is None:
        return None, None, False
    if any(not b.ok for b in built.values()) or not runnable(loaded.manifest.architecture):
        return None, built, False
    return (None, built, True) if limits.left() >= _runs_s(loaded, limits) else (None, None, False)


def _runs_s(loaded: LoadedManifest, limits: Limits) -> float:
    """The time a program's runs may take at their limits, its profile included."""
    m = loaded.manifest
    run_s = min(m.run.timeout_s, limits.run_timeout_s or float("inf"))
    return run_s * len(m.datasets) + (limits.profile_timeout_s if limits.profile and m.architecture == "cuda" else 0.0)


def _one_at_a_time(limits: Limits) -> Profiler | None:
    """The triage's profile hook, serialised (one GPU's counters serve one profiler at a time;
    runs of other programs go on beside it) and refused when it no longer fits before the deadline."""
    if limits.profile is None:
        return None
    lock = threading.Lock()

    def profile(loaded, binary, dataset, scratch) -> dict:
        with lock:
            if limits.left() < limits.profile_timeout_s:
                raise _PastDeadline
            return limits.profile(loaded, binary, dataset, scratch)
    return profile


def _measure(loaded: LoadedManifest, built: dict[str, BuildResult], folder: Path, limits: Limits,
             profile: Profiler | None) -> tuple[dict, dict[str, BuildResult]] | None:
    """In a run worker (no ledger): M1's runs and profile (appgate.agent.measure_m1); None when
    the deadline came first. With run_jobs > 1 the baseline ran beside other programs' runs on
    the same GPU: its evidence says so (`concurrent_runs`), its times are a triage's, not a gate's."""
    capped = capped_runs(loaded, limits.run_timeout_s)
    if limits.left() < _runs_s(loaded, limits):
        return None
    try:
        baseline, built = measure_m1(capped, folder, MIN_BASELINE_SECONDS, built,
                                     profile if loaded.manifest.architecture == "cuda" else None)
    except _PastDeadline:
        return None
    if limits.run_jobs > 1:
        baseline["concurrent_runs"] = limits.run_jobs
    return baseline, built


def _triaged(path: Path, loaded: LoadedManifest, actor: str, say: Callable[[str], None], limits: Limits,
             built: dict[str, BuildResult], measured: tuple[dict, dict[str, BuildResult]] | None = None) -> dict:
    """The agent's M1 recorded (in this thread: every ledger write is), and the program's row."""
    m = loaded.manifest
    try:
        row = triage(path, actor, say, prebuilt=built, profile=limits.profile if m.architecture == "cuda" else None,
                     run_timeout_s=limits.run_timeout_s, measured=measured)
    except Exception as error:  # noqa: BLE001  (one program's failure is its row, not the end of the call)
        return _row(path, loaded.name, "triage_error", f"{type(error).__name__}: {error}")
    result = _row(path, row.name, row.state_code, row.state_reason, row.state)
    result["build_s"] = round(sum(b.seconds for b in built.values()), 1)
    if row.state in ("RESEARCH", "OUT_OF_SCOPE"):  # M1 recorded its evidence in this triage
        m1 = [e.data["evidence"] for e in stream_events(f"app/{row.name}")
              if e.type == "AppMilestoneReached" and e.data["milestone"] == "M1"][-1]
        result["datasets"] = {name: d["seconds"] for name, d in m1["datasets"].items()}
        result["hotspot_fraction"] = m1["hotspot_fraction"]
        if m1.get("profile"):
            result["profile"] = {k: m1["profile"].get(k) for k in ("tool", "share", "top", "kernel_seconds", "problem")}
    return result


@functools.lru_cache(maxsize=4)
def runnable(architecture: str) -> bool:
    """Whether this machine runs the architecture's applications (else M1 blocks them before
    any run: their runs need no time before the deadline)."""
    try:
        machine(architecture)
    except AppGateError:
        return False
    return True


def _row(path: Path, app: str | None, code: str, reason: str, state: str | None = None) -> dict:
    return {"manifest": str(path), "app": app, "state": state, "code": code, "reason": reason}


def report(rows: list[dict], left_out: list[str]) -> dict:
    """The triage's report: the counts, the programs left for another call, a row per program
    (in manifest order, so that two calls' reports diff line by line)."""
    rows = sorted(rows, key=lambda r: key(r["manifest"]))
    return {
        "triaged": len(rows),
        "by_state": dict(collections.Counter(str(r["state"]) for r in rows).most_common()),
        "by_reason": dict(collections.Counter(f"{r['state']}/{r['code']}" for r in rows).most_common()),
        "not_triaged": sorted(left_out),
        "apps": rows,
    }
