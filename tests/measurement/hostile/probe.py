"""Harness-side helpers the sandbox tests run inside a child (importable there: no Django)."""
from __future__ import annotations

import os


def status(field: str) -> str:
    """A line of /proc/self/status of the child, e.g. VmPeak, Uid, CapEff, NoNewPrivs."""
    return next((line.split(":", 1)[1].strip() for line in open("/proc/self/status") if line.startswith(field + ":")), "")


def after(function, *args) -> tuple:
    """Run `function(*args)` in the child, then report the child's peak virtual memory."""
    function(*args)
    return status("VmPeak"), status("VmHWM")


def identity() -> dict:
    """Who and where the child is: its uid, capabilities, environment, working directory."""
    return {"uid": os.getuid(), "gid": os.getgid(), "groups": os.getgroups(), "cap_eff": status("CapEff"),
            "no_new_privs": status("NoNewPrivs"), "environment": dict(os.environ), "cwd": os.getcwd(), "pid": os.getpid()}
