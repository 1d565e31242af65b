"""Which device a worker measures on, and the rule that one device runs one measurement at a time.

A GPU host runs one Celery worker per GPU (docs/workers.md, "One worker per device"): each is
started with FORGESTENCIL_DEVICE_INDEX=<i> on the `gpu` queue with `--concurrency 1`. When the
worker starts (config/celery.py, `worker_init`, before its pool forks), `pin_device` makes the
device the only one its harness children see (CUDA_VISIBLE_DEVICES, which the sandbox passes
on), refuses a concurrency above 1 (two timings on one GPU disturb each other), and takes an
exclusive lock on the device for the worker's life, so a second worker started for the same
device on this host refuses to start instead of sharing it. Every measurement records the
worker's device in its description (`description()`, measurement.services.measure), so the
evidence says which GPU timed it.

Generic code: it names environment variables and files, never a device library.
"""
from __future__ import annotations

import fcntl
import os
import socket
import tempfile
from pathlib import Path
from typing import IO

DEVICE_ENV = "FORGESTENCIL_DEVICE_INDEX"
VISIBLE_ENV = "CUDA_VISIBLE_DEVICES"
# One lock file per device and machine user: flock is held by the open file, so the lock ends
# with the worker process however it ends (a SIGKILL included).
LOCK_ROOT = Path(tempfile.gettempdir()) / f"forgestencil-devices-{os.getuid()}"

_held: IO | None = None  # the pinned worker's lock file, open for the process's life


class DeviceRefused(SystemExit):
    """A worker that must not start: Celery logs and swallows a signal handler's Exception, so
    this is a SystemExit, which stops the worker with the message."""


def device_index() -> int | None:
    """FORGESTENCIL_DEVICE_INDEX as an int; None when unset (a CPU worker, or a one-GPU host)."""
    value = os.environ.get(DEVICE_ENV, "").strip()
    if not value:
        return None
    if not value.isdigit():
        raise DeviceRefused(f"{DEVICE_ENV} must be a device index (0, 1, ...), not {value!r}")
    return int(value)


def pin_device(concurrency: int) -> int | None:
    """Make this worker process the only one measuring on its device (module docstring); the
    index, or None when the worker names no device (nothing is done then)."""
    global _held
    index = device_index()
    if index is None:
        return None
    if concurrency != 1:
        raise DeviceRefused(f"a worker pinned to device {index} runs one measurement at a time: start it with "
                            f"--concurrency 1, not {concurrency}")
    visible = os.environ.get(VISIBLE_ENV)
    if visible not in (None, str(index)):
        raise DeviceRefused(f"{DEVICE_ENV}={index} but {VISIBLE_ENV}={visible}: set one of them")
    LOCK_ROOT.mkdir(mode=0o700, exist_ok=True)
    handle = (LOCK_ROOT / f"device-{index}.lock").open("a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "another process"
        handle.close()
        raise DeviceRefused(f"device {index} already has a worker on this host ({holder}): one worker per device") from None
    handle.truncate(0)
    handle.write(f"pid {os.getpid()}\n")
    handle.flush()
    _held = handle
    os.environ[VISIBLE_ENV] = str(index)  # before the pool forks: every pool process and harness child inherits it
    return index


def description() -> dict[str, object]:
    """The worker part of every measurement's description: the host, the device index it was
    pinned to (None: not pinned) and the devices its children could see."""
    return {"host": socket.gethostname(), "device_index": device_index(), VISIBLE_ENV: os.environ.get(VISIBLE_ENV)}
