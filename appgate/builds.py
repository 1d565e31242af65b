"""Building an application's variants: each from its own fresh copy of the source, never in the
source folder, and what the verdict needs to believe the two binaries (their hashes, the app's
own toolchain, the baseline's match with its upstream commit). Free of Django.

Why each build starts from a fresh copy at the same path (issue 17): a HeCBench program built
with its own Makefile let the candidate reuse the baseline's object files, `-DFORGED` was lost,
both binaries were identical and the verdict said "admitted 0.987x". Here every build gets an
empty folder holding a copy of the source without compiled objects (a stale `.o` would be just as
up to date for make in the copy), builds there, and its binary is moved out before the next
build wipes the folder. Both variants build at the same path because compilers embed the paths
they are given: identical inputs then give identical binaries, and identical binaries of a
build-time switch mean "the switch changed nothing", a rejection (`identical_binaries`).
"""
from __future__ import annotations

import functools
import hashlib
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from measurement.harness import sandbox

from . import diffs
from .confined import confined, environment, inherited_environment, substitute
from .manifest import LoadedManifest

TAIL = 2000
# Leading bytes of compiled objects that a fresh copy leaves out: ELF (objects, libraries,
# executables) and ar archives (static libraries).
COMPILED = (b"\x7fELF", b"!<arch>\n")


@dataclass
class BuildResult:
    variant: str
    ok: bool
    command: list[str]
    seconds: float
    output_tail: str
    binary: Path | None = None
    binary_hash: str | None = None
    build_args: str = ""  # the datasets' compile-time arguments this binary was built with


def _compiled(path: str) -> bool:
    try:
        with open(path, "rb") as handle:
            return handle.read(8).startswith(COMPILED)
    except OSError:
        return False


def fresh_source(source_dir: Path, target: Path, patch: dict[str, str] | None = None, probe: str | None = None) -> Path:
    """A copy of `source_dir` at `target` (made anew) without compiled objects or .git, with a
    candidate patch's files written over it and then the manifest's probe applied (ValueError
    when it does not fit), readable by the sandbox's uid whatever the original's modes."""
    if target.exists():
        shutil.rmtree(target)

    def left_out(folder: str, names: list[str]) -> set[str]:  # and the copy itself, if made inside
        return {n for n in names if n == ".git" or _compiled(f"{folder}/{n}") or Path(folder, n).resolve() == target.resolve()}

    shutil.copytree(source_dir, target, symlinks=True, ignore=left_out)
    for relative, text in (patch or {}).items():
        diffs.write_source(target / relative, text)
    if probe:
        written = {relative: diffs.read_source(target / relative) for relative in diffs.parse(probe)}
        for relative, text in diffs.apply(written, probe, unique=True).items():
            diffs.write_source(target / relative, text)
    sandbox.hand_over(target)
    return target


def probe_hash(loaded: LoadedManifest) -> str | None:
    """The sha256 of the probe every build of the application applies (None: it has none)."""
    probe = loaded.manifest.correctness.probe
    return hashlib.sha256(probe.encode()).hexdigest() if probe else None


def switch_value(loaded: LoadedManifest, variant: str) -> str:
    switch = loaded.manifest.switch
    return (switch.candidate if variant == "candidate" else switch.baseline) if switch.kind != "env" else ""


def build_arguments(loaded: LoadedManifest) -> list[str]:
    """The distinct compile-time arguments of the datasets, in dataset order: one build of each
    variant per entry ("" for datasets without any)."""
    return list(dict.fromkeys(d.build_args for d in loaded.manifest.datasets))


def build(loaded: LoadedManifest, variant: str, scratch: Path, *, patch: dict[str, str] | None = None,
          build_args: str = "") -> BuildResult:
    """Build one variant (with a candidate patch's files, and a dataset's compile-time
    arguments) in `scratch/build`, the only place the build may write; the binary is moved to a
    folder of its own in `scratch`."""
    m = loaded.manifest
    folder = scratch / "build"
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    source, binary = folder / "src", folder / m.name
    values = {"out": str(binary), "src": str(source), "workdir": str(folder), "switch": switch_value(loaded, variant),
              "build_args": build_args}
    command = substitute(m.build.command, values)
    try:
        fresh_source(loaded.source_dir, source, patch, m.correctness.probe)
    except ValueError as error:  # the candidate changed the lines the probe needs
        return BuildResult(variant, False, command, 0.0, f"the probe (correctness.probe) does not apply to the {variant}'s "
                           f"source: {error}", build_args=build_args)
    started = time.perf_counter()
    try:
        done, _ = confined(command, source, environment(loaded, variant, folder), m.build.timeout_s, folder, [])
    except subprocess.TimeoutExpired as error:
        return BuildResult(variant, False, command, time.perf_counter() - started,
                           f"build timed out after {error.timeout:g} s", build_args=build_args)
    except OSError as error:
        return BuildResult(variant, False, command, time.perf_counter() - started, f"cannot run the build: {error}",
                           build_args=build_args)
    seconds = time.perf_counter() - started
    output = (done.stdout + done.stderr)[-TAIL:]
    if done.returncode != 0 or not binary.is_file():
        why = f"exit status {done.returncode}" if done.returncode != 0 else f"no binary at {{out}} ({binary})"
        return BuildResult(variant, False, command, seconds, f"{why}\n{output}", build_args=build_args)
    kept = scratch / (f"bin-{variant}" + (f"-{hashlib.sha256(build_args.encode()).hexdigest()[:8]}" if build_args else "")) / m.name
    if kept.parent.exists():
        shutil.rmtree(kept.parent)
    kept.parent.mkdir(parents=True)
    shutil.move(binary, kept)
    return BuildResult(variant, True, command, seconds, output, kept, hashlib.sha256(kept.read_bytes()).hexdigest(),
                       build_args)


def identical(loaded: LoadedManifest, baseline: BuildResult, candidate: BuildResult, patched: bool) -> str:
    """Why the candidate is no candidate ("" when it is one): its binary is the baseline's,
    although the switch acts at build time (a build flag) or its source differs (a patch). An env
    or command-line switch acts at run time: one binary for both is expected there."""
    if baseline.binary_hash != candidate.binary_hash or not (patched or loaded.manifest.switch.kind == "build_flag"):
        return ""
    what = "the patch" if patched else f"the switch {loaded.manifest.switch.candidate!r}"
    args = f" (build arguments {baseline.build_args!r})" if baseline.build_args else ""
    return (f"{what} changed nothing: the baseline and candidate binaries are identical{args}, "
            f"sha256 {baseline.binary_hash}")


def git_blob_hash(data: bytes) -> str:
    """The id git gives a file's bytes (`git hash-object --no-filters`)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def git_read(folder: Path, *args: str) -> str | None:
    """A read-only git query with the checkout's hooks and fsmonitor off (the checkout is
    outside code); None when git or the answer is missing."""
    try:
        done = subprocess.run(["git", "-c", "safe.directory=*", "-c", "core.fsmonitor=", "-c", "core.hooksPath=/dev/null",
                               "-C", str(folder), *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def upstream(loaded: LoadedManifest) -> dict | None:
    """Where the source folder is a git checkout: its HEAD commit and, per baseline file, the
    blob of that path in the commit against the blob of the file as it is; `differs` names the
    files that are not byte-identical to upstream. None when the folder is not in a checkout."""
    top = git_read(loaded.source_dir, "rev-parse", "--show-toplevel")
    commit = git_read(loaded.source_dir, "rev-parse", "HEAD") if top else None
    if not top or not commit:
        return None
    files, differs = {}, []
    for name in sorted(loaded.manifest.source.baseline_files):
        relative = (loaded.source_dir / name).resolve().relative_to(Path(top).resolve()).as_posix()
        here = git_blob_hash((loaded.source_dir / name).read_bytes())
        committed = git_read(Path(top), "rev-parse", "--verify", "--quiet", f"{commit}:{relative}")
        files[name] = {"path": relative, "upstream_blob": committed, "blob": here}
        if committed != here:
            differs.append(name)
    return {"repository": top, "commit": commit, "files": files, "differs": differs}


def toolchain(loaded: LoadedManifest) -> dict:
    """The application's own compilers and build command (not the operator backend's): the
    version line of the build command's program, of cc and c++ (what a Makefile calls), of nvcc
    for CUDA apps, and of the compilers the manifest's env names (CC, CXX, NVCC)."""
    m = loaded.manifest
    names = [substitute(m.build.command, {})[0], "cc", "c++", *(["nvcc"] if m.architecture == "cuda" else []),
             *(m.env[k] for k in ("CC", "CXX", "NVCC") if k in m.env)]
    return {"build_command": m.build.command, "versions": _versions(tuple(dict.fromkeys(names)), loaded.source_dir)}


def _versions(names: tuple[str, ...], source_dir: Path) -> dict[str, str]:
    path = inherited_environment().get("PATH")
    found = {}
    for name in names:
        program = shutil.which(name, path=path) if "/" not in name else None
        if program is None or Path(program).resolve().is_relative_to(source_dir.resolve()):
            continue  # a script of the application's own is not run outside the sandbox
        found[name] = _version_line(program)
    return found


@functools.lru_cache(maxsize=32)
def _version_line(program: str) -> str:
    try:
        done = subprocess.run([program, "--version"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"({error})"
    lines = [line.strip() for line in (done.stdout or done.stderr).splitlines() if line.strip()]
    return f"{program}: {next((line for line in lines if 'release' in line.lower()), lines[0] if lines else '?')}"
