"""The hotspot share of a CUDA program that prints none (an imported suite's programs declare
`hotspot: none`): one more run of the baseline under a profiler, through appgate.runner (the
sandbox, the dataset's inputs, a time limit) like every run, and the top kernels' share of the
GPU kernel time. Free of Django.

nsys where it is on PATH (its CUDA trace times every launch), else ncu (which replays each
launch: only the first LAUNCHES are measured, said in the result), else none: the share is then
unknown and the result says why, never a guess. The share is of the kernel time, not of the
program's own clock: most HeCBench programs print an average per iteration, so a kernel's total
time over the run has no common measure with it (docs/appgate.md#triage).

With ncu the same run also gives each launch's speed of light: the larger of its memory and its
compute (SM) throughput as a fraction of the GPU's peak (ncu's "GPU Speed Of Light" section). Its
time-weighted mean over the measured launches is the baseline's quality in the application table,
how close upstream's kernels already run to what the GPU can do; nsys measures no throughput.
"""
from __future__ import annotations

import csv
import dataclasses
import io
import shutil
import subprocess
from pathlib import Path
from typing import Callable

from . import runner
from .confined import confined, inherited_environment
from .manifest import LoadedManifest

TOOLS = ("nsys", "ncu")
# ncu's "Memory Throughput" and "Compute (SM) Throughput", % of peak sustained over the launch
SPEED_OF_LIGHT = ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
                  "sm__throughput.avg.pct_of_peak_sustained_elapsed")
LAUNCHES = 200  # ncu: launches measured (each is replayed; thousands would take minutes)
TOP = 3  # kernels named in the result
OVERHEAD_S = 30.0  # added to a run's time limit for the profiled run: the profiler's start and its report
REPORT = "forgestencil-profile"
COMMANDS = {
    "nsys": f"{{tool}} profile --trace=cuda --sample=none --cpuctxsw=none --force-overwrite=true "
            f"--output={{workdir}}/{REPORT} ",
    "ncu": f"{{tool}} --csv --metrics gpu__time_duration.sum,{','.join(SPEED_OF_LIGHT)} --launch-count {{launches}} "
           "--target-processes all ",
}
UNITS = {"nsecond": 1e-9, "ns": 1e-9, "usecond": 1e-6, "us": 1e-6, "msecond": 1e-3, "ms": 1e-3, "second": 1.0, "s": 1.0}


def available() -> str | None:
    """The first profiler of TOOLS on the PATH the programs see, or None."""
    return next((tool for tool in TOOLS if on_path(tool)), None)


def on_path(tool: str) -> bool:
    """Whether `tool` is on the PATH the programs see, where `measure` finds it."""
    return shutil.which(tool, path=inherited_environment().get("PATH")) is not None


def unmeasured(why: str, tool: str | None = None) -> dict:
    return {"tool": tool, "share": None, "top": [], "kernel_seconds": None, "problem": why}


def profiler(tool: str | None, timeout_s: float) -> Callable[..., dict]:
    """The App Agent's `profile` hook (appgate.agent.Profiler) for `tool` (None: none here); the
    tools profile GPU kernels, so only CUDA programs are measured."""
    def profile(loaded: LoadedManifest, binary: Path, dataset, scratch: Path) -> dict:
        if tool is None:
            return unmeasured(f"no profiler ({', '.join(TOOLS)}) on this machine: the hotspot share is unknown")
        if loaded.manifest.architecture != "cuda":
            return unmeasured(f"{tool} profiles GPU kernels; this is a {loaded.manifest.architecture} program", tool)
        return measure(loaded, binary, dataset, scratch, tool=tool, timeout_s=timeout_s)
    return profile


def measure(loaded: LoadedManifest, binary: Path, dataset, scratch: Path, *, tool: str, timeout_s: float,
            launches: int = LAUNCHES) -> dict:
    """One run of the baseline on `dataset` under `tool`: the top kernels, their GPU time and
    share of all kernels' time (`share`: the top one's), or why nothing was measured."""
    program = shutil.which(tool, path=inherited_environment().get("PATH")) or tool
    m = loaded.manifest
    command = COMMANDS[tool].replace("{tool}", program).replace("{launches}", str(launches))
    run = m.run.model_copy(update={"command": command + m.run.command, "timeout_s": timeout_s})
    profiled = dataclasses.replace(loaded, manifest=m.model_copy(update={"run": run}))
    ran = runner.run(profiled, "baseline", binary, dataset, scratch)
    if not ran.ok:
        return unmeasured(f"the profiled run failed: {ran.problem or 'exit status ' + str(ran.returncode)}; "
                          f"{(ran.errors or ran.stdout)[-200:]}", tool)
    if tool == "nsys":
        kernels, problem = _nsys_kernels(program, scratch / f"run-baseline-{dataset.name}", timeout_s)
    else:
        kernels, problem = ncu_kernels(ran.stdout), ""
    if not kernels:
        return unmeasured(problem or f"{tool} measured no kernel", tool)
    total = sum(seconds for seconds, _ in kernels.values())
    ranked = sorted(kernels.items(), key=lambda item: -item[1][0])
    light = ncu_speed_of_light(ran.stdout) if tool == "ncu" else {}
    top = [{"name": name[:160], "seconds": seconds, "launches": launches, "share": seconds / total if total else None,
            **({"speed_of_light": light[name][1] if name in light else None} if tool == "ncu" else {})}
           for name, (seconds, launches) in ranked[:TOP]]
    result = {"tool": tool, "share": top[0]["share"], "top": top, "kernel_seconds": total, "kernels": len(kernels),
              "problem": ""}
    if tool == "ncu":
        result["launches_measured"] = f"the first {launches} launches at most"
        result["speed_of_light"] = overall_speed_of_light(light)
    return result


def _nsys_kernels(program: str, workdir: Path, timeout_s: float) -> tuple[dict[str, tuple[float, int]], str]:
    """The kernel summary of the run's report (nsys stats; its report is named cuda_gpu_kern_sum
    since nsys 2023.4, gpukernsum before), read in the sandbox as the run was."""
    report = workdir / f"{REPORT}.nsys-rep"
    if not report.is_file():
        return {}, f"nsys wrote no report ({report.name})"
    said = ""
    for name in ("cuda_gpu_kern_sum", "gpukernsum"):
        command = [program, "stats", "--report", name, "--format", "csv", "--output", "-", "--force-export=true",
                   str(report)]
        env = {**inherited_environment(), "HOME": str(workdir), "TMPDIR": str(workdir)}
        try:
            done, _ = confined(command, workdir, env, timeout_s, workdir, [])
        except subprocess.TimeoutExpired:
            return {}, f"nsys stats timed out after {timeout_s:g} s"
        kernels = nsys_kernels(done.stdout)
        if kernels:
            return kernels, ""
        said = (done.stderr or done.stdout)[-200:]
    return {}, f"nsys stats gave no kernel summary: {said}"


def nsys_kernels(text: str) -> dict[str, tuple[float, int]]:
    """Per kernel name, (total GPU seconds, launches) from `nsys stats --format csv`'s kernel
    summary (the lines from its header on; nsys prints other lines before it)."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if "Total Time" in line and "Name" in line), None)
    if start is None:
        return {}
    kernels: dict[str, tuple[float, int]] = {}
    for row in csv.DictReader(io.StringIO("\n".join(lines[start:]))):
        try:
            seconds, launches = float(row["Total Time (ns)"]) * 1e-9, int(float(row["Instances"]))
        except (KeyError, TypeError, ValueError):
            continue
        old = kernels.get(row["Name"], (0.0, 0))
        kernels[row["Name"]] = (old[0] + seconds, old[1] + launches)
    return kernels


def ncu_speed_of_light(text: str) -> dict[str, tuple[float, float]]:
    """Per kernel name, (the GPU seconds of its launches that have both throughput metrics, their
    time-weighted mean of max(memory, compute throughput) / 100) from `ncu --csv`; launches
    without both metrics or a time are left out, never guessed."""
    launches: dict[tuple[str, str], dict[str, float]] = {}
    names: dict[tuple[str, str], str] = {}
    for row in _ncu_rows(text):
        launch = (row.get("Process ID", ""), row.get("ID", ""))  # IDs may restart in each profiled process
        try:
            value = float(row["Metric Value"].replace(",", ""))
            if row["Metric Name"] == "gpu__time_duration.sum":
                value *= UNITS[row["Metric Unit"]]
        except (KeyError, ValueError, AttributeError):
            continue
        launches.setdefault(launch, {})[row["Metric Name"]] = value
        names[launch] = row["Kernel Name"]
    weighted: dict[str, tuple[float, float]] = {}
    for launch, metrics in launches.items():
        if "gpu__time_duration.sum" not in metrics or any(name not in metrics for name in SPEED_OF_LIGHT):
            continue
        seconds = metrics["gpu__time_duration.sum"]
        fraction = max(metrics[name] for name in SPEED_OF_LIGHT) / 100
        total, light = weighted.get(names[launch], (0.0, 0.0))
        weighted[names[launch]] = (total + seconds, light + seconds * fraction)
    return {name: (total, light / total) for name, (total, light) in weighted.items() if total > 0}


def overall_speed_of_light(light: dict[str, tuple[float, float]]) -> float | None:
    """The time-weighted mean over every launch that has it (None: none has)."""
    total = sum(seconds for seconds, _ in light.values())
    return sum(seconds * fraction for seconds, fraction in light.values()) / total if total else None


def _ncu_rows(text: str) -> list[dict[str, str]]:
    """The CSV rows of `ncu --csv`'s output (the program's own lines and ncu's ==PROF== lines left out)."""
    return list(csv.DictReader(io.StringIO("\n".join(line for line in text.splitlines() if line.startswith('"')))))


def ncu_kernels(text: str) -> dict[str, tuple[float, int]]:
    """Per kernel name, (total GPU seconds, launches) from `ncu --csv`'s gpu__time_duration rows
    (the CSV lines of its output: the program's own lines and ncu's ==PROF== lines left out)."""
    kernels: dict[str, tuple[float, int]] = {}
    for row in _ncu_rows(text):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        try:
            seconds = float(row["Metric Value"].replace(",", "")) * UNITS[row["Metric Unit"]]
        except (KeyError, ValueError, AttributeError):
            continue
        old = kernels.get(row["Kernel Name"], (0.0, 0))
        kernels[row["Kernel Name"]] = (old[0] + seconds, old[1] + 1)
    return kernels
