"""The preloading server inside the sandbox: one confined process per harness child.

Started once per parent process by measurement.harness.sandbox (inside bubblewrap, or bare in
the development opt-out), it imports the heavy modules once (numpy, the harness, and where
installed cupy, torch, pystencils: ~10 s on the device machine), then forks for every request:

    server (root of the sandbox; our code only)
      └ intermediate, one per request: relays the result, answers build requests
          └ helper: unshare(CLONE_NEWPID), then fork
              └ the harness child = pid 1 of a new pid namespace, in new mount, network, IPC and
                UTS namespaces: a private /proc and /tmp, the build cache remounted read-only,
                rlimits, every capability dropped, uid/gid 65534, no_new_privs, a scrubbed
                environment; then the call

When the harness child (pid 1) exits, the kernel kills every process left in its namespace, so
a double-forked daemon or a spinning grandchild dies with the check that started it. A timeout
(the parent shuts its side of the request) is a SIGKILL to pid 1, with the same effect, and the
parent hears back once all is dead. A build request
gets a confined child of its own (same confinement, own namespaces): the candidate cannot see
or trace the compiler that fills the cache. In the development opt-out (not `sandboxed`) there
are no namespaces and no uid change; the child leads a session of its own, killed after it.
"""
from __future__ import annotations

import ctypes
import importlib
import importlib.util
import json
import os
import pickle
import resource
import select
import signal
import socket
import sys
import traceback

from measurement.harness.framing import read_frame, write_frame

CLONE_NEWNS, CLONE_NEWPID = 0x00020000, 0x20000000
CLONE_NEWNET, CLONE_NEWIPC, CLONE_NEWUTS = 0x40000000, 0x08000000, 0x04000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_RDONLY = 2, 4, 8, 1
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 1, 24, 38
RESULT_LIMIT = 1 << 31  # bytes a harness child may send back
REQUEST_LIMIT = 1 << 31
BUILD_REQUEST_LIMIT = 16 << 20

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]


def _checked(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _mount(source: str | None, target: str, kind: str | None, flags: int, data: str | None = None) -> None:
    encode = lambda text: text.encode() if text is not None else None  # noqa: E731
    _checked(_libc.mount(encode(source), encode(target), encode(kind), flags, encode(data)), f"mount {target}")


def _prctl(option: int, value: int) -> None:
    _checked(_libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0), f"prctl({option})")


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _drop_privileges(options: dict) -> None:
    """Bounding set emptied, then (as root) uid/gid 65534 without groups, else every capability
    cleared (the non-root fallback: one uid in a user namespace); no_new_privs either way."""
    last = int(open("/proc/sys/kernel/cap_last_cap").read())
    for capability in range(last + 1):
        _libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0)  # EINVAL for caps this kernel lacks
    if options["separate_uid"]:
        uid = options["uid"]
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    else:
        data = (_CapData * 2)()
        _checked(_libc.capset(ctypes.byref(_CapHeader(0x20080522, 0)), data), "capset")
    _prctl(PR_SET_NO_NEW_PRIVS, 1)
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # cleared by the uid change above, so set after it


def _set_limits(limits: dict, cpu_seconds: float, gpu: bool) -> None:
    memory = resource.RLIMIT_DATA if gpu else resource.RLIMIT_AS  # the CUDA driver reserves address space
    settings = [(memory, limits["memory"]), (resource.RLIMIT_CPU, int(cpu_seconds) + 1),
                (resource.RLIMIT_NPROC, limits["processes"]), (resource.RLIMIT_FSIZE, limits["file_size"]),
                (resource.RLIMIT_CORE, 0)]
    for which, value in settings:
        resource.setrlimit(which, (value, value))


def _confine(options: dict, environment: dict, cpu_seconds: float, keep: tuple[int, ...], gpu: bool) -> None:
    """Turn this freshly forked process into a harness child (see the module docstring). Only a
    CUDA child (`gpu`) keeps the NVIDIA devices and CuPy's kernel cache: a CPU child, which runs
    candidate host code, gets /dev/null in their place and an empty folder."""
    if options["sandboxed"]:
        # own network, IPC and host-name namespaces too: two children of one server (a GPU gate
        # checks the candidate and the prior best at once) share no loopback, socket or SysV IPC
        _checked(_libc.unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS), "unshare")
        _mount(None, "/", None, MS_REC | MS_PRIVATE)
        _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        owner = options["uid"] if options["separate_uid"] else os.getuid()
        # The interpreter, venv or repository may lie under /tmp (a checkout in a temporary
        # folder): held open across the private /tmp and bound back read-only, or lazy imports
        # (scipy.ndimage's filters, sympy's submodules) would find nothing in the child.
        held = [(os.open(path, os.O_PATH | os.O_DIRECTORY), path) for path in options["exposed_in_tmp"]]
        _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV,
               f"size={options['limits']['scratch']},mode=0700,uid={owner},gid={owner}")
        for fd, path in held:
            os.makedirs(path, exist_ok=True)
            _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
            _mount(None, path, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
            os.close(fd)
        cache = options["cache"]
        _mount(cache, cache, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
        if not gpu:
            for device in options["devices"]:
                if os.path.isdir(device):
                    _mount("tmpfs", device, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=0755")
                else:
                    _mount("/dev/null", device, None, MS_BIND)
            if options["cupy_cache"]:
                _mount("tmpfs", options["cupy_cache"], "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=0755")
    else:
        os.setsid()
    _set_limits(options["limits"], cpu_seconds, gpu)
    if options["sandboxed"]:
        _drop_privileges(options)
        for folder in _skeleton:
            os.makedirs(os.path.join("/tmp", folder), exist_ok=True)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    low = 3  # every other descriptor inherited from the server and the intermediate goes
    for fd in sorted(keep):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, 1 << 20)
    os.environ.clear()
    os.environ.update(environment)
    os.chdir(os.environ.get("TMPDIR", "/tmp"))


# Folders the preloaded modules made in the server's /tmp, its HOME (CuPy 14 makes its kernel
# cache folder at import and never again): made again, empty, in every child's own /tmp.
_skeleton: list[str] = []


class Confined:
    """A confined child seen from the intermediate: its pid (in our namespace) and its pipes."""

    def __init__(self, options: dict, target, payload: bytes, environment: dict, cpu_seconds: float, broker: bool,
                 gpu: bool = False):
        result_r, result_w = os.pipe()
        status_r, status_w = os.pipe()
        ours, theirs = socket.socketpair() if broker else (None, None)
        helper = os.fork()
        if helper == 0:
            os.close(result_r)
            os.close(status_r)
            if ours is not None:
                ours.close()
            self._helper(options, target, payload, environment, cpu_seconds, result_w, status_w, theirs, gpu)
        os.close(result_w)
        os.close(status_w)
        if theirs is not None:
            theirs.close()
        self.helper, self.result, self.status, self.broker = helper, result_r, status_r, ours
        self._status = b""
        while b"\n" not in self._status and (chunk := os.read(status_r, 64)):
            self._status += chunk
        first = self._status.split(b"\n")[0]
        self.pid = int(first) if first.isdigit() else 0

    @staticmethod
    def _helper(options, target, payload, environment, cpu_seconds, result_w, status_w, broker_socket, gpu) -> None:
        try:
            _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            if options["sandboxed"]:
                _checked(_libc.unshare(CLONE_NEWPID), "unshare(CLONE_NEWPID)")
            child = os.fork()
            if child == 0:
                code = 0
                try:
                    keep = (result_w,) + ((broker_socket.fileno(),) if broker_socket is not None else ())
                    _confine(options, environment, cpu_seconds, keep, gpu)
                    target(payload, result_w, broker_socket)
                except BaseException:
                    code = 70  # confinement or the target failed before it could answer
                finally:
                    os._exit(code)
            os.write(status_w, f"{child}\n".encode())
            _, status = os.waitpid(child, 0)
            if not options["sandboxed"]:  # no namespace to die with: kill the child's session
                try:
                    os.killpg(child, signal.SIGKILL)
                except OSError:
                    pass
            os.write(status_w, f"{os.waitstatus_to_exitcode(status)}\n".encode())
        finally:
            os._exit(0)

    def kill(self) -> None:
        if self.pid:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def finish(self) -> int | None:
        """Wait for the helper; the child's exit code (negative: the signal), None if unknown."""
        while chunk := os.read(self.status, 64):
            self._status += chunk
        os.waitpid(self.helper, 0)
        os.close(self.status)
        lines = self._status.split(b"\n")
        return int(lines[1]) if len(lines) > 1 and lines[1].lstrip(b"-").isdigit() else None


# ---------------------------------------------------------------- targets (run in confined children)


def _run_call(payload: bytes, result_fd: int, broker_socket) -> None:
    from measurement.harness import buildcache

    if broker_socket is not None:
        buildcache.broker = buildcache.Broker(broker_socket.fileno())
    try:
        function, args = pickle.loads(payload)
        answer = ("ok", function(*args))
    except BaseException as exc:  # report everything: the child is disposable
        answer = ("exception", (type(exc).__name__, str(exc), traceback.format_exc(limit=6)))
    try:
        data = pickle.dumps(answer, protocol=5)
    except Exception as exc:
        data = pickle.dumps(("exception", (type(exc).__name__, f"cannot send the result back: {exc}", "")))
    write_frame(result_fd, data)


def _compile(payload: bytes, result_fd: int, broker_socket) -> None:
    from measurement.harness import buildcache

    request = json.loads(payload)
    ok, message, artefact = buildcache.compile_source(buildcache.recipe(request["recipe"]), request["source"], os.getcwd())
    write_frame(result_fd, json.dumps({"ok": ok, "message": message}).encode())
    write_frame(result_fd, artefact)


# ---------------------------------------------------------------- the intermediate


def _build_in_confined_child(options: dict, environment: dict):
    """A buildcache builder: the compiler runs in a fresh confined child; we only store."""
    def builder(recipe_, source: str):
        payload = json.dumps({"recipe": recipe_.name, "source": source}).encode()
        child = Confined(options, _compile, payload, environment, 2 * 300, broker=False)
        header, artefact = read_frame(child.result, BUILD_REQUEST_LIMIT), read_frame(child.result, 1 << 30)
        os.close(child.result)
        code = child.finish()
        if header is None or artefact is None:
            return False, f"the compiler's sandbox ended without an answer (exit {code})", b""
        reply = json.loads(header)
        return bool(reply["ok"]), str(reply["message"]), artefact
    return builder


def _answer_build(options: dict, environment: dict, child: Confined) -> bool:
    """Serve one build request of the child; False when its line closed."""
    from measurement.harness import buildcache

    fd = child.broker.fileno()
    try:
        request = read_frame(fd, BUILD_REQUEST_LIMIT)
    except ValueError as error:
        write_frame(fd, json.dumps({"error": str(error)}).encode())
        return False
    if request is None:
        return False
    try:
        ask = json.loads(request)
        path = buildcache.build(buildcache.recipe(str(ask["recipe"])), str(ask["source"]),
                                _build_in_confined_child(options, environment))
        reply = {"path": str(path)}
    except Exception as error:  # CompileError, a malformed request: the child hears why
        reply = {"error": str(error)}
    write_frame(fd, json.dumps(reply).encode())
    return True


def serve_request(options: dict, connection: socket.socket) -> None:
    fd = connection.fileno()
    header = json.loads(read_frame(fd, 1 << 16) or b"{}")
    call = read_frame(fd, REQUEST_LIMIT) or b""
    environment = header["environment"]
    child = Confined(options, _run_call, call, environment, header["cpu_seconds"], broker=options["sandboxed"],
                     gpu=header["gpu"])
    result = bytearray()
    broker = child.broker.fileno() if child.broker else None
    watched = {child.result, child.status, fd} | ({broker} if broker is not None else set())
    overflow = False
    while child.status in watched:
        ready, _, _ = select.select(list(watched), [], [])
        if fd in ready:  # the parent gave up (timeout) or died: kill, then say so once all is dead
            child.kill()
            child.finish()
            try:
                write_frame(fd, json.dumps({"killed": True}).encode())
            except OSError:
                pass
            return
        if broker in ready and not _answer_build(options, environment, child):
            watched.discard(broker)
        if child.result in ready:
            chunk = os.read(child.result, 1 << 20)
            if not chunk:
                watched.discard(child.result)
            elif len(result) + len(chunk) > RESULT_LIMIT:
                overflow = True
                child.kill()
            else:
                result += chunk
        if child.status in ready:  # the child has exited (and in the sandbox, its namespace)
            watched.discard(child.status)
    os.set_blocking(child.result, False)
    try:  # what the child wrote just before it exited (a leftover writer cannot block us)
        while len(result) <= RESULT_LIMIT and (chunk := os.read(child.result, 1 << 20)):
            result += chunk
    except BlockingIOError:
        pass
    code = child.finish()
    os.close(child.result)
    write_frame(fd, json.dumps({"exit": code, "overflow": overflow}).encode())
    write_frame(fd, bytes(result))


# ---------------------------------------------------------------- the server


def _self_test(payload: bytes, result_fd: int, broker_socket) -> None:
    """What a harness child sees: the parent checks it before the first request is served."""
    probe = json.loads(payload)
    status = {line.split(":")[0]: line.split(":", 1)[1].strip() for line in open("/proc/self/status") if ":" in line}
    hidden = {}
    made = {folder.split("/")[0] for folder in _skeleton}
    for path in probe["hidden"]:
        try:
            hidden[path] = sorted(set(os.listdir(path)) - (made if path == "/tmp" else set()))
        except OSError:
            hidden[path] = []
    try:
        written = os.path.join(probe["cache"], f".write-probe-{os.getpid()}")
        open(written, "w").close()
        os.unlink(written)
        cache_writable = True
    except OSError:
        cache_writable = False
    report = {"uid": os.getuid(), "gid": os.getgid(), "cap_eff": status.get("CapEff"), "no_new_privs": status.get("NoNewPrivs"),
              "interfaces": [name for _, name in socket.if_nameindex()], "hidden": hidden,
              "cache_writable": cache_writable, "pid": os.getpid(), "environment": sorted(os.environ)}
    write_frame(result_fd, json.dumps(report).encode())


def main() -> None:
    options = json.loads(sys.argv[1])
    for name in options["preload"]:
        if importlib.util.find_spec(name) is not None:
            importlib.import_module(name)
    from measurement.harness import buildcache

    buildcache.warm()
    if options["sandboxed"]:  # bwrap's /tmp: only what the imports above made
        _skeleton.extend(os.path.relpath(root, "/tmp") for root, _, _ in os.walk("/tmp") if root != "/tmp")
    control = socket.socket(fileno=options["control_fd"])
    probe = Confined(options, _self_test, json.dumps(options["probe"]).encode(), options["probe"]["environment"], 10,
                     broker=False)
    report = read_frame(probe.result, 1 << 20)
    os.close(probe.result)
    code = probe.finish()
    write_frame(control.fileno(), report or json.dumps({"error": f"the probe child exited with {code}"}).encode())
    while True:
        ready, _, _ = select.select([control], [], [], 5)
        while True:  # reap finished intermediates
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                break
        if not ready:
            continue
        message, fds, _, _ = socket.recv_fds(control, 16, 1)
        if not message:  # the parent is gone: so are we (bwrap's namespace with us)
            return
        if os.fork() == 0:
            control.close()
            try:
                serve_request(options, socket.socket(fileno=fds[0]))
            finally:
                os._exit(0)
        os.close(fds[0])


if __name__ == "__main__":
    main()
