"""The content-addressed build cache: compiled kernels and harness libraries, verified on load.

An artefact is stored under the hash of everything that determines it (the recipe's compiler
and flags, the compiler's version, the machine key, the harness version, the source) next to a
record of its own sha256. Every load reads the file once, hashes those bytes and loads a sealed
in-memory copy of them through /proc/self/fd, so a library swapped in the cache (issue 14: a
swapped baseline library moved the public bound and was recorded) is refused and rebuilt
instead of trusted by its name, it cannot be swapped between the check and the load, and a
write into the cache file after the load cannot change the code that runs.

Who writes it: inside the sandbox no candidate can (the cache is mounted read-only and owned by
the service user); a harness child that needs an artefact the cache lacks asks the sandbox's
broker (measurement.harness.sandbox_server), which compiles in a confined child of its own and
stores the result. Outside the sandbox (development opt-out, the parent process, tests) the
process compiles and stores itself.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Callable

from measurement.backends.base import CompileError
from measurement.harness.framing import read_frame, write_frame

CACHE_ENV = "FORGESTENCIL_BUILD_CACHE"
COMPILE_TIMEOUT_S = 300


def cache_dir() -> Path:
    """FORGESTENCIL_BUILD_CACHE, else a folder in the service user's cache: never a world-writable
    temporary folder, where any local user (or an unsandboxed kernel) could plant a library."""
    root = os.environ.get(CACHE_ENV)
    if not root:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(base, "forgestencil", "build")
    path = Path(root)
    if not path.is_dir():
        path.mkdir(parents=True, exist_ok=True)
        path.chmod(0o755)  # readable by the sandbox's uid, writable by the service only
    return path


@dataclass(frozen=True)
class Recipe:
    """How to turn one source file into one shared library."""

    name: str  # "c" | "pystencils": the broker looks a recipe up by this name
    command: tuple[str, ...]  # the compiler and its flags, before "-o OUT SRC"
    suffix: str  # of the source file: ".c", ".cpp"
    after: tuple[str, ...] = ()  # after the source file, e.g. "-lm"
    # whether the harness version is part of the key: False only where the source text holds all
    # the code the artefact is built from (the tests' CUDA emulation, whose prelude and driver are
    # in its text), so a change to the harness does not compile it all again
    harness_keyed: bool = True

    def argv(self, source_file: str, output_file: str) -> list[str]:
        return [*self.command, "-o", output_file, source_file, *self.after]

    def key(self, source: str) -> str:
        identity = [self.name, *self.command, "|", *self.after, compiler_version(self.command[0]), machine_key(),
                    harness_version() if self.harness_keyed else "", source]
        return hashlib.sha256("\0".join(identity).encode()).hexdigest()[:40]


_recipes: dict[str, Callable[[], Recipe]] = {}


def register(name: str, factory: Callable[[], Recipe]) -> None:
    """Make a recipe known by name (backends register theirs at import), so that a request that
    names it can be built by the broker, which never takes a command line from a child."""
    _recipes[name] = factory


def recipe(name: str) -> Recipe:
    if name not in _recipes:
        raise CompileError(f"no build recipe named {name!r}")
    return _recipes[name]()


def warm() -> None:
    """Compute what every key needs (compiler versions, machine key, harness version) once: the
    sandbox's server does, before it forks, so that no child runs `cc --version` again."""
    for name in list(_recipes):
        try:
            recipe(name).key("")
        except Exception:  # a recipe whose tool is missing here fails later, where it is used
            continue


@cache
def compiler_version(compiler: str) -> str:
    """First line of `COMPILER --version` (part of every key and of the backend's description)."""
    try:
        done = subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=30)
        text = done.stdout or done.stderr
        return text.splitlines()[0].strip() if text else ""
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"unavailable ({error})"


@cache
def machine_key() -> str:
    """CPU model and flags: a library built with -march=native is only reused on the same kind of CPU."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        text = ""
    wanted = [line for line in text.splitlines() if line.startswith(("model name", "flags"))][:2]
    return hashlib.sha256("\n".join(wanted).encode()).hexdigest()


@cache
def harness_version() -> str:
    from measurement.harness.plan import harness_version as version

    return version()


# ---------------------------------------------------------------- the store


def _paths(key: str) -> tuple[Path, Path]:
    directory = cache_dir()
    return directory / f"{key}.so", directory / f"{key}.json"


def recorded_digest(key: str) -> str | None:
    _, record = _paths(key)
    try:
        return json.loads(record.read_text())["sha256"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _verified_content(path: Path) -> bytes | None:
    """The bytes of the artefact at `path` if they match its record, else None (missing,
    unrecorded or swapped). Read once: what was hashed is what the caller gets."""
    expected = recorded_digest(Path(path).name.removesuffix(".so"))
    try:
        content = Path(path).read_bytes()
    except OSError:
        return None
    if expected is None or hashlib.sha256(content).hexdigest() != expected:
        return None
    return content


_held: dict[str, int] = {}


def loadable(path: Path) -> str:
    """A name to dlopen for the verified artefact at `path`: /proc/self/fd/N of a sealed
    in-memory copy of the bytes that were hashed, kept open for the life of the process (the
    dynamic loader recognises a library by that name, so a number must never be reused for
    another one). Loading the cache file itself would map its pages: a write into that file
    (an in-place swap, even a test's) would change the code of a library already loaded and
    crash the process at its next call or at exit. CompileError when the content does not
    match the record."""
    if str(path) not in _held:
        content = _verified_content(path)
        if content is None:
            raise CompileError(f"the cached artefact {Path(path).name} does not match its recorded digest")
        _held[str(path)] = _sealed_copy(content, Path(path).name)
    return f"/proc/self/fd/{_held[str(path)]}"


def _sealed_copy(content: bytes, name: str) -> int:
    """A memfd holding `content`, sealed against every change (no write, shrink or grow)."""
    fd = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    view = memoryview(content)
    while view:
        view = view[os.write(fd, view):]
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
    return fd


def verified(key: str) -> Path | None:
    """The cached artefact of `key` if its content matches the recorded digest."""
    library, _ = _paths(key)
    return library if _verified_content(library) is not None else None


def store(key: str, artefact: bytes, recipe_: Recipe) -> Path:
    """Write the artefact and its record atomically (readable by all, writable by the service)."""
    library, record = _paths(key)
    meta = {"key": key, "sha256": hashlib.sha256(artefact).hexdigest(), "recipe": recipe_.name,
            "command": list(recipe_.command), "compiler": compiler_version(recipe_.command[0]),
            "machine": machine_key(), "harness": harness_version(), "stored": time.time()}
    for path, data in ((library, artefact), (record, json.dumps(meta, indent=1).encode())):
        fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    return library


# ---------------------------------------------------------------- building


def compile_source(recipe_: Recipe, source: str, directory: str) -> tuple[bool, str, bytes]:
    """Run the recipe on `source` in `directory`: (ok, the compiler's message, the library)."""
    src = os.path.join(directory, f"kernel{recipe_.suffix}")
    out = os.path.join(directory, "kernel.so")
    Path(src).write_text(source)
    try:
        done = subprocess.run(recipe_.argv(src, out), capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S,
                              cwd=directory)
    except subprocess.TimeoutExpired:
        return False, f"compilation took longer than {COMPILE_TIMEOUT_S} s", b""
    except OSError as error:
        return False, f"could not run the compiler {recipe_.command[0]!r}: {error}", b""
    message = (done.stderr or done.stdout or "").replace(src, f"kernel{recipe_.suffix}").strip()
    if done.returncode != 0 or not os.path.isfile(out):
        return False, message or f"{recipe_.command[0]} exited with status {done.returncode}", b""
    return True, message, Path(out).read_bytes()


def compile_here(recipe_: Recipe, source: str) -> tuple[bool, str, bytes]:
    """Compile in this process's own temporary folder (no sandbox of its own)."""
    directory = tempfile.mkdtemp(prefix="forgestencil-build-")
    try:
        return compile_source(recipe_, source, directory)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


Builder = Callable[[Recipe, str], tuple[bool, str, bytes]]


def build(recipe_: Recipe, source: str, builder: Builder = compile_here) -> Path:
    """The verified artefact of `source`, compiled by `builder` and stored when the cache has no
    intact one; CompileError with the compiler's message when it does not compile."""
    key = recipe_.key(source)
    found = verified(key)
    if found is not None:
        return found
    ok, message, artefact = builder(recipe_, source)
    if not ok:
        raise CompileError(message)
    return store(key, artefact, recipe_)


class Broker:
    """A harness child's line to the sandbox's broker: it names a recipe and sends the source;
    the broker builds (in a confined child of its own), stores and answers with the path."""

    def __init__(self, fd: int):
        self.fd = fd

    def build(self, recipe_name: str, source: str) -> Path:
        write_frame(self.fd, json.dumps({"recipe": recipe_name, "source": source}).encode())
        answer = read_frame(self.fd, 1 << 20)
        if answer is None:
            raise CompileError("the sandbox's build broker did not answer")
        reply = json.loads(answer)
        if "error" in reply:
            raise CompileError(reply["error"])
        return Path(reply["path"])


broker: Broker | None = None  # set in a sandboxed harness child: it cannot write the cache itself


def obtain(recipe_: Recipe, source: str) -> Path:
    """The path of a verified artefact for `source` (built when missing or swapped)."""
    found = verified(recipe_.key(source))
    if found is not None:
        return found
    if broker is not None:
        return broker.build(recipe_.name, source)
    return build(recipe_, source)
