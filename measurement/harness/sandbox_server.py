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

import importlib
import importlib.util
import json
import os
import pickle
import select
import signal
import socket
import sys
import traceback

from measurement.harness.confinement import (CLONE_NEWPID, PR_SET_PDEATHSIG, checked, confine, libc, prctl,
                                             skeleton)
from measurement.harness.framing import RESULT_LIMIT, read_frame, write_frame

REQUEST_LIMIT = 1 << 31
BUILD_REQUEST_LIMIT = 16 << 20


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
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            if options["sandboxed"]:
                checked(libc.unshare(CLONE_NEWPID), "unshare(CLONE_NEWPID)")
            child = os.fork()
            if child == 0:
                code = 0
                try:
                    keep = (result_w,) + ((broker_socket.fileno(),) if broker_socket is not None else ())
                    confine(options, environment, cpu_seconds, keep, gpu)
                    target(payload, result_w, broker_socket)
                except BaseException as error:
                    code = 70  # confinement or the target failed before it could answer
                    if target is _self_test:  # the probe's report says why (a harness call's answer is pickled)
                        write_frame(result_w, json.dumps({"error": f"the probe child failed: {error!r}"[:500]}).encode())
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
    made = {folder.split("/")[0] for folder in skeleton}
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
        skeleton.extend(os.path.relpath(root, "/tmp") for root, _, _ in os.walk("/tmp") if root != "/tmp")
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
