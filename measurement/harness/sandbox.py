"""The sandbox every piece of candidate code runs in (issue 14), seen from the service's side.

Two ways in, both built on bubblewrap (`bwrap`, Debian package bubblewrap):

* harness children (checks, timings, candidate compilation): `server()` starts one preloading
  server per process inside bwrap (measurement.harness.sandbox_server), which confines every
  child further (own pid and mount namespaces, private /proc and /tmp, uid 65534, rlimits);
* whole programs (the application gate's builds and runs): `command()` wraps an argument list
  in a one-shot bwrap, prlimit and setpriv.

The view is the same for both: the root file system read-only; the var dir (signing key,
SQLite ledger, witness), the service user's home, /tmp, /var/tmp and /run (where PostgreSQL's
and other local sockets live) replaced by empty tmpfs; the interpreter, the virtual
environment and the repository bound back read-only where they lie under a hidden folder; the
build cache bound in (read-only for children); no network (own network namespace, loopback
only); own IPC, UTS and cgroup namespaces; a new session (no terminal to inject into). The
environment is an allow-list (`child_environment`): nothing of the service's configuration.

As root the children get a real other host uid (65534), so root's 0600 files stay closed to
them even where the view shows them. Not as root, the fallback is a user namespace mapping the
service's own uid, with every capability dropped: the view is then the only barrier.

Without a working bwrap nothing is measured: `SandboxUnavailable` names the fix. The explicit
development opt-out, FORGESTENCIL_UNSAFE_NO_SANDBOX=1 (`--unsafe-no-sandbox` on the gate and
measure commands), runs the same server without bwrap, and `describe()` says so in every
measurement's evidence.
"""
from __future__ import annotations

import glob
import json
import os
import re
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from functools import cache
from pathlib import Path

from measurement.harness import buildcache
from measurement.harness.framing import read_frame, write_frame

SANDBOX_UID = 65534  # nobody/nogroup on Debian
UNSAFE_ENV = "FORGESTENCIL_UNSAFE_NO_SANDBOX"
MEMORY_ENV = "FORGESTENCIL_SANDBOX_MEMORY"
BWRAP_ENV = "FORGESTENCIL_BWRAP"  # a bwrap binary carried to a machine that lacks the package
CACHE_IN_VIEW = "/run/forgestencil-build-cache"  # where children see the build cache (read-only)
CUPY_CACHE_IN_VIEW = "/run/forgestencil-cupy-cache"  # CuPy's kernel cache: CUDA children only
START_TIMEOUT_S = 300
FIX = ("install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; ./dev and .ci/run do it when run as "
       "root), or, for development only, set FORGESTENCIL_UNSAFE_NO_SANDBOX=1 / pass --unsafe-no-sandbox "
       "(recorded on every verdict)")
PRELOAD = ("numpy", "measurement.harness.protocol", "measurement.harness.session_info", "measurement.backends.cpu",
           "cupy", "torch", "pystencils", "sympy")
ENV_NAMES = {"PATH", "LANG", "LANGUAGE", "TZ", "LD_LIBRARY_PATH", "FORGESTENCIL_CC", "FORGESTENCIL_CUDA_BASELINES",
             "FORGESTENCIL_CPU_BASELINES"}
ENV_PREFIXES = ("LC_", "OMP_", "GOMP_", "KMP_", "MKL_", "OPENBLAS_", "CUDA_", "NVIDIA_", "CUPY_")
PASS_ENV = "FORGESTENCIL_SANDBOX_PASS_ENV"  # comma-separated names an operator (or a test) passes in on purpose
NEVER_PASSED = re.compile(r"KEY|SECRET|TOKEN|PASSW|CREDENTIAL|DATABASE|BROKER|URL|^FORGESTENCIL_|^LEDGER_|^CELERY_|^DJANGO",
                          re.IGNORECASE)
REPO = Path(__file__).resolve().parents[2]


class SandboxUnavailable(RuntimeError):
    """No sandbox here: measuring would run candidate code with the service's rights."""


def unsafe() -> bool:
    return os.environ.get(UNSAFE_ENV, "") not in ("", "0")


@cache
def _bwrap_version(path: str) -> str:
    try:
        return subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""


def bwrap() -> str:
    """The bwrap binary, or SandboxUnavailable naming the fix."""
    path = os.environ.get(BWRAP_ENV) or shutil.which("bwrap")
    if not path or not _bwrap_version(path):
        raise SandboxUnavailable(f"bubblewrap (bwrap) is not installed or does not run here: {FIX}")
    return path


def separate_uid() -> bool:
    """Root can hand children a real other uid; anyone else only a user namespace of their own."""
    return os.geteuid() == 0


def child_environment(source: dict[str, str] | None = None) -> dict[str, str]:
    """The allow-listed part of `source` (default: this process's environment): threads and
    devices settings, the compiler, and the names listed in FORGESTENCIL_SANDBOX_PASS_ENV (never
    one that looks like a secret or the service's configuration); never DATABASE_URL, the
    broker, SECRET_KEY, signing keys or any path of the service's. HOME and TMPDIR are the
    child's scratch."""
    source = os.environ if source is None else source
    passed = {name.strip() for name in source.get(PASS_ENV, "").split(",") if name.strip() and not NEVER_PASSED.search(name)}
    kept = {k: v for k, v in source.items() if k in ENV_NAMES | passed or k.startswith(ENV_PREFIXES)}
    kept.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    cache_path = str(buildcache.cache_dir()) if unsafe() else CACHE_IN_VIEW
    cupy = {"CUPY_CACHE_DIR": CUPY_CACHE_IN_VIEW} if gpu_devices() and not unsafe() else {}
    return {**kept, "HOME": "/tmp", "TMPDIR": "/tmp", buildcache.CACHE_ENV: cache_path, **cupy}


def var_dirs() -> list[str]:
    """The configured var dir and the default one (repo/var): both hold what candidates must not see."""
    found = [os.environ.get("FORGESTENCIL_VAR_DIR", ""), str(REPO / "var")]
    return sorted({os.path.realpath(p) for p in found if p and os.path.isdir(p)})


def hidden_roots() -> list[str]:
    home = os.path.realpath(os.path.expanduser("~"))
    roots = ["/tmp", "/var/tmp", "/run"] + ([home] if home != "/" else [])
    return [p for p in roots if os.path.isdir(p) and not os.path.islink(p)]


def _under(path: str, roots: list[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def exposed() -> list[str]:
    """What the harness needs back inside a hidden root: the interpreter, the environment, the
    repo, and every import path (the GPU machine's project packages are installed under /tmp:
    without them pystencils was not found in the children and dropped from the baselines
    unnoticed). Never a hidden root itself: that would show all of it."""
    roots = hidden_roots()
    wanted = {os.path.realpath(p) for p in (sys.base_prefix, sys.prefix, str(REPO), *sys.path) if p}
    return sorted(p for p in wanted if os.path.isdir(p) and _under(p, roots) and p not in roots)


def gpu_devices() -> list[str]:
    return sorted(glob.glob("/dev/nvidia*") + glob.glob("/dev/dri"))


def cupy_cache_dir() -> Path:
    """CuPy's kernel cache for CUDA children, beside the build cache and owned by the sandbox's
    uid, which CuPy writes it as. Without it every CUDA child compiled CuPy's own kernels again
    (7.6-10.9 s a check child on the H200, against 0.6 s). Only CUDA children see it: their host
    code is the harness's (a candidate is device code); CPU children get an empty folder there."""
    path = buildcache.cache_dir().parent / "cupy-kernel-cache"
    path.mkdir(mode=0o700, exist_ok=True)
    if separate_uid() and path.stat().st_uid != SANDBOX_UID:
        os.chown(path, SANDBOX_UID, SANDBOX_UID)
    return path


def limits() -> dict:
    """rlimits of every child. Memory: FORGESTENCIL_SANDBOX_MEMORY (e.g. 8G), default half the
    RAM; an address-space limit, except for CUDA children (and programs on a machine with NVIDIA
    devices), whose driver reserves far more virtual memory than it uses: there the limit is on
    data (heap and private mappings)."""
    text = os.environ.get(MEMORY_ENV, "").strip().upper()
    if text:
        memory = int(float(text.rstrip("KMGT")) * 1024 ** ("KMGT".index(text[-1]) + 1 if text[-1] in "KMGT" else 0))
    else:
        memory = max(2 << 30, os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2)
    return {"memory": memory, "processes": max(256, 8 * (os.cpu_count() or 1)), "file_size": 1 << 30, "scratch": 1 << 30}


def _folders(paths: list[str], roots: list[str], made: set[str]) -> list[str]:
    """bwrap arguments that create the folders leading to `paths` inside the hidden `roots` as
    traversable (bwrap would copy their modes from outside, where they may be private)."""
    args = []
    for path in paths:
        for parent in reversed(Path(path).parents):
            name = str(parent)
            if _under(name, roots) and name not in roots and name not in made:
                made.add(name)
                args += ["--perms", "0755", "--dir", name]
    return args


def view_arguments(writable: list[str] = (), readable: list[str] = (), cache: bool = False) -> list[str]:
    """bwrap's mounts, in order: later mounts land on top of earlier ones. `cache`: the build
    cache at CACHE_IN_VIEW, writable (the server remounts it read-only for every child)."""
    args = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    roots, made = hidden_roots(), set()
    for root in roots:
        args += ["--tmpfs", root]
    args += _folders(exposed(), roots, made)
    for path in exposed():
        args += ["--ro-bind", path, path]
    for path in var_dirs():
        args += ["--tmpfs", path]
    args += _folders(list(readable) + list(writable), roots + var_dirs(), made)
    for path in readable:
        args += ["--ro-bind", path, path]
    for path in writable:
        args += ["--bind", path, path]
    if cache:
        args += ["--bind", str(buildcache.cache_dir()), CACHE_IN_VIEW]
    if cache and gpu_devices():
        args += ["--bind", str(cupy_cache_dir()), CUPY_CACHE_IN_VIEW]
    for device in gpu_devices():
        args += ["--dev-bind", device, device]
    args += ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try", "--new-session"]
    if not separate_uid():
        args += ["--unshare-user", "--uid", str(os.getuid()), "--gid", str(os.getgid()), "--cap-add", "ALL"]
    return args


def describe() -> dict:
    """The isolation every measurement and verdict records (its backend description carries it)."""
    if unsafe():
        return {"mode": "unsafe-no-sandbox", "why": f"{UNSAFE_ENV}=1 or --unsafe-no-sandbox (development only)",
                "what_runs": "children with the service's uid, files and network; environment allow-listed, rlimits set"}
    limit = limits()
    return {
        "mode": "bubblewrap",
        "bwrap": _bwrap_version(bwrap()),
        "uid": (f"separate host uid {SANDBOX_UID}" if separate_uid()
                else f"the service's uid {os.getuid()} in a user namespace, no capabilities (the service is not root)"),
        "network": "none (own network namespace)",
        "processes": "own pid namespace per child, killed when the child ends",
        "files": "read-only; var dir, home, /tmp, /var/tmp, /run hidden; private /tmp; build cache read-only",
        "environment": "allow-list (threads, devices, compiler)",
        "limits": {**limit, "memory_is": "address space (CUDA children: data segment)", "cpu_seconds": "timeout x cores"},
        "devices": f"{', '.join(gpu_devices())} for CUDA children only" if gpu_devices() else "none",
    }


# ---------------------------------------------------------------- the preloading server


class Server:
    """One sandbox server (a bwrap process and its control socket), owned by one process."""

    def __init__(self, config: tuple):
        self.config, self.owner, self.lock = config, os.getpid(), threading.Lock()
        sandboxed = not unsafe()
        ours, theirs = socket.socketpair()
        environment = child_environment()
        cache_path = environment[buildcache.CACHE_ENV]
        options = {"control_fd": theirs.fileno(), "sandboxed": sandboxed, "separate_uid": separate_uid(), "uid": SANDBOX_UID,
                   "cache": cache_path, "limits": limits(), "preload": list(PRELOAD), "devices": gpu_devices(),
                   "cupy_cache": environment.get("CUPY_CACHE_DIR"),
                   "exposed_in_tmp": [p for p in exposed() if _under(p, ["/tmp"])],
                   "probe": {"hidden": var_dirs() + hidden_roots(), "cache": cache_path, "environment": environment}}
        command = [sys.executable, "-m", "measurement.harness.sandbox_server", json.dumps(options)]
        if sandboxed:
            command = [bwrap(), *view_arguments(cache=True), "--chdir", "/tmp", "--", *command]
        paths = [str(REPO)] + [p for p in sys.path if p and os.path.isdir(p)]
        server_environment = {**environment, "PYTHONPATH": os.pathsep.join(dict.fromkeys(paths))}
        self.errors = tempfile.TemporaryFile()
        self.process = subprocess.Popen(command, pass_fds=(theirs.fileno(),), env=server_environment,
                                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.errors)
        theirs.close()
        self.control = ours
        ready, _, _ = select.select([ours], [], [], START_TIMEOUT_S)
        report = read_frame(ours.fileno(), 1 << 20) if ready else None
        if report is None:
            self.close()
            raise SandboxUnavailable(f"the sandbox did not start: {self._errors()}; {FIX}")
        self.report = json.loads(report)
        problems = self._problems(self.report, options) if sandboxed else []
        if problems:
            self.close()
            raise SandboxUnavailable(f"the sandbox failed its self-test ({'; '.join(problems)}); {FIX}")

    def _errors(self) -> str:
        self.errors.seek(0)
        return self.errors.read()[-2000:].decode(errors="replace").strip() or "no message"

    @staticmethod
    def _problems(report: dict, options: dict) -> list[str]:
        if "error" in report:
            return [report["error"]]
        problems = []
        if options["separate_uid"] and (report["uid"], report["gid"]) != (SANDBOX_UID, SANDBOX_UID):
            problems.append(f"the child runs as uid {report['uid']}, gid {report['gid']}")
        if report["cap_eff"] != "0000000000000000" or report["no_new_privs"] != "1":
            problems.append(f"capabilities {report['cap_eff']}, no_new_privs {report['no_new_privs']}")
        if report["interfaces"] != ["lo"]:
            problems.append(f"network interfaces {report['interfaces']}")
        bound = exposed() + [options["cache"]] + ([options["cupy_cache"]] if options.get("cupy_cache") else [])
        for path, names in report["hidden"].items():  # only what the view binds back may be there
            allowed = {Path(p).relative_to(path).parts[0] for p in bound if _under(p, [path]) and p != path}
            if set(names) - allowed:
                problems.append(f"{path} shows {sorted(set(names) - allowed)[:5]}")
        if report["cache_writable"]:
            problems.append("the build cache is writable")
        leaked = set(report["environment"]) - set(options["probe"]["environment"])
        if leaked:
            problems.append(f"environment {sorted(leaked)}")
        return problems

    def alive(self) -> bool:
        return self.process.poll() is None

    def submit(self, header: dict, call: bytes) -> socket.socket:
        """Hand the server one end of a fresh socket pair; the request and its answer use it."""
        ours, theirs = socket.socketpair()
        with self.lock:
            socket.send_fds(self.control, [b"r"], [theirs.fileno()])
        theirs.close()
        write_frame(ours.fileno(), json.dumps(header).encode())
        write_frame(ours.fileno(), call)
        return ours

    def close(self) -> None:
        self.control.close()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


_servers: dict[tuple, Server] = {}
_servers_lock = threading.Lock()


def server() -> Server:
    """This process's server for the current configuration (started, or restarted, on demand).
    A forked process (a Celery prefork worker) starts its own: a control socket is never shared."""
    config = (unsafe(), str(buildcache.cache_dir()), tuple(var_dirs()), tuple(exposed()), json.dumps(limits()),
              tuple(gpu_devices()))
    if not config[0]:
        bwrap()
    with _servers_lock:
        found = _servers.get(config)
        if found is None or found.owner != os.getpid() or not found.alive():
            found = _servers[config] = Server(config)
        return found


# ---------------------------------------------------------------- whole programs


def command(argv: list[str], timeout: float, cwd: str, writable: list[str] = (), readable: list[str] = ()) -> list[str]:
    """`argv` as a confined program: in a one-shot bwrap (bound to die with the calling thread,
    and everything it started with it when it ends), with the rlimits of a harness child, as
    uid 65534 (root) or without capabilities (otherwise); `writable` is all it may write."""
    if unsafe():
        return list(argv)
    missing = [tool for tool in ("prlimit", "setpriv") if not shutil.which(tool)]
    if missing:
        raise SandboxUnavailable(f"{' and '.join(missing)} (util-linux) not found: confined programs need them")
    limit = limits()
    memory = "--data" if gpu_devices() else "--as"
    cpu = int(timeout * (os.cpu_count() or 1)) + 60
    confined = [bwrap(), *view_arguments(writable=list(writable), readable=list(readable)), "--die-with-parent",
                "--chdir", cwd, "--",
                "prlimit", f"{memory}={limit['memory']}", f"--cpu={cpu}", f"--nproc={limit['processes']}",
                f"--fsize={limit['file_size']}", "--core=0", "--"]
    if separate_uid():
        confined += ["setpriv", f"--reuid={SANDBOX_UID}", f"--regid={SANDBOX_UID}", "--clear-groups", "--no-new-privs",
                     "--bounding-set=-all", "--inh-caps=-all", "--"]
    return confined + list(argv)


def hand_over(path: Path) -> None:
    """Give a scratch folder (and what is in it) to the sandbox's uid, so confined programs can
    write there and nowhere else; a no-op unless children get a uid of their own."""
    if unsafe() or not separate_uid():
        return
    for root, folders, files in os.walk(path):
        for name in [root, *(os.path.join(root, f) for f in folders + files)]:
            os.lchown(name, SANDBOX_UID, SANDBOX_UID)
