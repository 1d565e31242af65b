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


def backend_environment(name: str) -> dict:
    """The backend's environment() as a child sees it (on CUDA: its own process among the GPU's)."""
    from measurement.backends import get_backend

    return {"pid": os.getpid(), "environment": get_backend(name).environment()}


def device_nodes(backend: str) -> dict:
    """What a child of `backend` finds at the NVIDIA device nodes (device numbers) and whether
    it can write CuPy's kernel cache: a CPU child must get /dev/null and an empty folder."""
    import glob

    nodes = {path: (os.major(os.stat(path).st_rdev), os.minor(os.stat(path).st_rdev)) for path in glob.glob("/dev/nvidia*")
             if not os.path.isdir(path)}
    cache = os.environ.get("CUPY_CACHE_DIR", "")
    return {"backend": backend, "nodes": nodes, "cupy_cache_writable": bool(cache) and os.access(cache, os.W_OK)}


def imported(module: str) -> str:
    """Import `module` in the child (a package on an import path of the service's) and return
    its VALUE: what a baseline needs of the service's import paths, the child must find."""
    import importlib

    return importlib.import_module(module).VALUE
