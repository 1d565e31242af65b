"""Run harness work beside candidate code in a child process with a time limit.

A kernel that segfaults, hangs or corrupts the CUDA context costs one verdict: the child
dies or is killed, the parent reports why, and the worker carries on.
"""
from __future__ import annotations

import multiprocessing
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


def _child(connection, function: Callable, args: tuple) -> None:
    try:
        connection.send(("ok", function(*args)))
    except BaseException as exc:  # report everything: the child is disposable
        connection.send(("exception", (type(exc).__name__, str(exc), traceback.format_exc(limit=6))))
    finally:
        connection.close()


def run_isolated(function: Callable, args: tuple, timeout: float) -> Isolated:
    """Call `function(*args)` in a fresh spawned process (CUDA needs spawn, not fork)."""
    context = multiprocessing.get_context("spawn")
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=_child, args=(sender, function, args), daemon=True)
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
