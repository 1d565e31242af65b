"""Run harness work beside candidate code in a sandboxed child process with a time limit.

A kernel that segfaults, hangs or corrupts the CUDA context costs one verdict: the child dies or
is killed, the parent reports why, and the worker carries on. A kernel that attacks costs one
verdict too: the child is confined (measurement.harness.sandbox: no secrets in its view or
environment, no network, another uid, rlimits) and everything it started dies with it.

Children are forked by a server that has already imported the heavy, fork-safe modules (numpy,
the harness, and where installed cupy, torch, pystencils/sympy): a fresh process per child,
without paying ~10 s of imports each time (torch 5.6 s and pystencils 4.3 s on the device
machine, docs/benchmarks/gate_profile_h200_spawn.json). Nothing in the server touches CUDA, so
every child still creates its own context. The server is a plain subprocess, not a
multiprocessing child, so a daemonic process (a Celery prefork worker) can use it too. A child
gets the allow-listed part of the caller's environment at the call; its working directory is
its private scratch.
"""
from __future__ import annotations

import json
import os
import pickle
import select
import signal
import socket
import time
from dataclasses import dataclass
from typing import Any, Callable

from measurement.harness import sandbox
from measurement.harness.framing import RESULT_LIMIT, load_result, read_frame, split_frame
from measurement.harness.sandbox import SandboxUnavailable  # noqa: F401  (callers catch it from here)

KILL_WAIT_S = 30  # for the namespace of a child past its time limit to be gone


@dataclass(frozen=True)
class Isolated:
    ok: bool
    value: Any = None
    error: str = ""  # an exception's message, a signal name, or "timed out after N s"
    kind: str = ""  # "" | "exception" | "crashed" | "timeout"


def describe() -> dict:
    """How children are isolated here, recorded with every measurement (services.measure);
    SandboxUnavailable when there is no sandbox (the server's self-test runs first)."""
    sandbox.server()
    return sandbox.describe()


def _answer(connection: socket.socket, timeout: float) -> tuple[dict, bytes] | None:
    """The intermediate's header and the child's raw answer; None at the time limit."""
    ready, _, _ = select.select([connection], [], [], timeout)
    if not ready:
        return None
    fd = connection.fileno()
    header = read_frame(fd, 1 << 16)
    body = read_frame(fd, RESULT_LIMIT + 64) if header is not None else None
    if header is None or body is None:
        return {"exit": None, "lost": True}, b""
    return json.loads(header), body


def run_isolated(function: Callable, args: tuple, timeout: float) -> Isolated:
    """Call `function(*args)` in a fresh sandboxed child (never in this process: CUDA does not
    survive a fork, the parent may hold threads, and the candidate must not reach the parent).
    SandboxUnavailable when there is no sandbox and no explicit opt-out."""
    call = pickle.dumps((function, args), protocol=5)
    # Harness functions take the backend's name first: only a CUDA child gets the GPU devices.
    gpu = bool(args) and args[0] == "cuda"
    header = {"environment": sandbox.child_environment(), "cpu_seconds": timeout * (os.cpu_count() or 1) + 30, "gpu": gpu}
    started = time.monotonic()
    connection = sandbox.server().submit(header, call)
    try:
        answer = _answer(connection, max(0.0, timeout - (time.monotonic() - started)))
        if answer is None:  # the end of our side tells the server to kill the child's namespace;
            connection.shutdown(socket.SHUT_WR)  # its answer comes once everything in it is dead
            select.select([connection], [], [], KILL_WAIT_S)
    finally:
        connection.close()
    if answer is None:
        return Isolated(False, error=f"timed out after {timeout:g} s", kind="timeout")
    info, raw = answer
    payload = split_frame(raw)
    if payload is not None and not info.get("overflow"):
        try:
            status, value = load_result(payload)
        except Exception as exc:  # what a broken or hostile child sent: not a result
            return Isolated(False, error=f"harness child sent an unreadable answer ({type(exc).__name__}: {exc})",
                            kind="crashed", value=info.get("exit"))
        if status == "ok":
            return Isolated(True, value)
        name, message, trace = value
        return Isolated(False, error=f"{name}: {message}", kind="exception", value=(name, message, trace))
    code = info.get("exit")
    if info.get("lost"):
        reason = "was lost with the sandbox server"
    elif info.get("overflow"):
        reason = f"sent more than {RESULT_LIMIT} bytes"
    elif code is not None and code < 0:
        reason = f"killed by {signal.Signals(-code).name}"
    else:
        reason = f"exited with status {code}"
    return Isolated(False, error=f"harness child {reason}", kind="crashed", value=code)
