"""Backends: the only place that knows about a device (CPU via C/OpenMP, CUDA via CuPy).

`get_backend(name)` imports a backend module only when it is asked for, so a machine without
a GPU never imports cupy.
"""
from __future__ import annotations

import importlib

from .base import Backend

BACKENDS = {"cpu": "measurement.backends.cpu", "cuda": "measurement.backends.cuda"}


def get_backend(name: str) -> Backend:
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}; use one of {', '.join(BACKENDS)}")
    return importlib.import_module(BACKENDS[name]).create()
