"""Run harness work beside candidate code in a child process with a time limit.

A kernel that segfaults, hangs or corrupts the CUDA context costs one verdict: the child
dies or is killed, the parent reports why, and the worker carries on.

Children are forked from a forkserver that has already imported the heavy, fork-safe modules
(numpy, the harness, and where installed cupy, torch, pystencils/sympy): a fresh process per
child as before, but without paying ~10 s of imports each time (torch 5.6 s and pystencils
4.3 s on the device machine, docs/benchmarks/gate_profile_h200.json). Nothing in the server
touches CUDA, so every child still creates its own context. A child gets the parent's
environment and working directory as they are at the call, not as they were when the server
started.
"""
from __future__ import annotations

import importlib.util
import multiprocessing
import os
import signal
import traceback
from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class Isolated:
    ok: bool
    value: Any = None
    error: str = ""  # an exception's message, a signal name, or "timed out after N s"
    kind: str = ""  # "" | "exception" | "crashed" | "timeout"


PRELOAD = ("numpy", "measurement.harness.protocol", "measurement.harness.session_info", "cupy", "torch",
           "pystencils", "sympy")
_context = None


def _forkserver():
    global _context
    if _context is None:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload([name for name in PRELOAD if importlib.util.find_spec(name) is not None])
        _context = context
    return _context


def _child(connection, function: Callable, args: tuple, environment: dict[str, str], directory: str) -> None:
    os.environ.clear()
    os.environ.update(environment)
    os.chdir(directory)
    try:
        connection.send(("ok", function(*args)))
    except BaseException as exc:  # report everything: the child is disposable
        connection.send(("exception", (type(exc).__name__, str(exc), traceback.format_exc(limit=6))))
    finally:
        connection.close()


def run_isolated(function: Callable, args: tuple, timeout: float) -> Isolated:
    """Call `function(*args)` in a fresh process forked from the forkserver (never from this
    process: CUDA does not survive a fork, and the parent may hold threads)."""
    context = _forkserver()
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=_child, args=(sender, function, args, dict(os.environ), os.getcwd()), daemon=True)
    process.start()
    sender.close()
    try:
        if receiver.poll(timeout):
            try:
                status, value = receiver.recv()
            except EOFError:
                status, value = "crashed", None
        else:
            status, value = "timeout", None
    finally:
        if status == "timeout" or process.is_alive():
            process.join(1 if status != "timeout" else 0)
            if process.is_alive():
                process.kill()
        process.join()
        receiver.close()
    if status == "ok":
        return Isolated(True, value)
    if status == "exception":
        name, message, trace = value
        return Isolated(False, error=f"{name}: {message}", kind="exception", value=(name, message, trace))
    if status == "timeout":
        return Isolated(False, error=f"timed out after {timeout:g} s", kind="timeout")
    code = process.exitcode
    reason = f"killed by {signal.Signals(-code).name}" if code is not None and code < 0 else f"exited with status {code}"
    return Isolated(False, error=f"harness child {reason}", kind="crashed", value=code)
