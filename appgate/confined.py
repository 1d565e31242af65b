"""Where an application's builds and runs execute: the sandbox of measurement.harness.sandbox,
with the environment the manifest declares and nothing else of the service's. Free of Django.

The environment of every build and run (`environment`) is the sandbox's minimal one (PATH, the
locale, LD_LIBRARY_PATH, the device selection), HOME and TMPDIR in the command's own folder, the
manifest's `env` and the switch's variable: no OMP_*, KMP_* or other thread settings of the
service's leak in. A manifest that gave 132x with the machine's default OpenMP threads gave 4.76x
with OMP_NUM_THREADS=1 (issue 17): what the run used must be what the manifest says and what the
verdict records (`recorded_environment`).
"""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from measurement.harness import sandbox

from .manifest import LoadedManifest

# The part of the sandbox's environment an application inherits: the machine, not its tuning.
INHERITED = ("PATH", "LANG", "LANGUAGE", "TZ", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES")


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


def inherited_environment() -> dict[str, str]:
    return {k: v for k, v in sandbox.child_environment().items() if k in INHERITED or k.startswith("LC_")}


def environment(loaded: LoadedManifest, variant: str, home: Path) -> dict[str, str]:
    """What a build or run of `variant` sees: the inherited machine variables, the manifest's
    `env`, the switch variable (an env switch), HOME and TMPDIR in its own folder."""
    env = {**inherited_environment(), **loaded.manifest.env, "HOME": str(home), "TMPDIR": str(home)}
    switch = loaded.manifest.switch
    if switch.kind == "env":
        env[switch.name] = switch.candidate if variant == "candidate" else switch.baseline
    return env


def recorded_environment(loaded: LoadedManifest) -> dict:
    """The environment as a verdict records it: the declared variables, the inherited ones, and
    the machine's cores and this process's affinity (what OpenMP's defaults follow when the
    manifest declares no thread count)."""
    return {"declared": dict(loaded.manifest.env), "inherited": inherited_environment(),
            "cpus": os.cpu_count(), "affinity": sorted(os.sched_getaffinity(0))}


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


def confined(command: list[str], cwd: Path, env: dict[str, str], timeout: float, writable: Path,
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
