"""Host memory of the CPU backend (measurement.backends.cpu): arrays in anonymous mmap'd memory,
so that a PROT_NONE guard page can sit right after (`guard="end"`) or right before
(`guard="start"`) each array, and a problem's buffers (base.Buffers) made of them.

Nothing here imports Django: this module runs inside harness child processes.
"""
from __future__ import annotations

import ctypes
import mmap
import os
from dataclasses import dataclass

import numpy as np

from measurement.harness import codegen
from measurement.harness.cases import Case

from .base import fill_output_poison
from .cpu_compile import Harness

PAGE = mmap.PAGESIZE
PROT_NONE = 0


_libc = ctypes.CDLL(None, use_errno=True)
_libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_libc.mprotect.restype = ctypes.c_int


def _round_up(n: int, to: int) -> int:
    return -(-n // to) * to


class GuardedArray:
    """A C-contiguous array in its own anonymous mapping, optionally next to a PROT_NONE page."""

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype, guard: str | None):
        if guard not in (None, "end", "start"):
            raise ValueError(f"guard must be None, 'end' or 'start', not {guard!r}")
        dtype = np.dtype(dtype)
        self.nbytes = int(np.prod(shape)) * dtype.itemsize
        body = _round_up(max(self.nbytes, 1), PAGE)
        # Unguarded arrays get an accessible page of slack on both sides, so a small
        # out-of-bounds access survives there and only the guarded runs fault: that
        # difference is how the judge tells out_of_bounds from any other crash.
        size = body + (PAGE if guard else 2 * PAGE)
        self._map = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        raw = np.frombuffer(self._map, dtype=np.uint8)
        base = raw.ctypes.data
        if guard == "end":  # the array's last byte is the last byte before the guard page
            body_at, offset, guard_at = 0, body - self.nbytes, base + body
        elif guard == "start":  # the array's first byte is the first byte after the guard page
            body_at, offset, guard_at = PAGE, PAGE, base
        else:
            body_at, offset, guard_at = PAGE, PAGE, None
        Harness.lib().harness_touch(base + body_at, body)
        if guard_at is not None and _libc.mprotect(guard_at, PAGE, PROT_NONE) != 0:
            raise OSError(ctypes.get_errno(), f"mprotect of the guard page failed: {os.strerror(ctypes.get_errno())}")
        self.array = raw[offset : offset + self.nbytes].view(dtype).reshape(shape)
        self.address = base + offset
        self.guard = guard


@dataclass
class CpuBuffers:
    """Inputs and output of one problem in guarded host memory (see base.Buffers)."""

    case: Case
    guard: str | None
    arrays: dict[str, GuardedArray]
    pristine: dict[str, np.ndarray]

    @property
    def extents(self) -> tuple[int, int, int]:
        return codegen.grid_extents(self.case)

    def array(self, name: str) -> np.ndarray:
        """The live array (no copy): for backends and baselines, not for callers that keep it."""
        return self.arrays[name].array

    def pointer(self, name: str) -> int | None:
        return self.arrays[name].address if name in self.arrays else None

    def poison_output(self) -> None:
        fill_output_poison(self.arrays["y"].array)

    def fill_output(self, value: float) -> None:
        self.arrays["y"].array.fill(value)

    def sampler(self, points: np.ndarray):
        index, y = tuple(points.T), self.arrays["y"].array
        return lambda: y[index]

    def output(self) -> np.ndarray:
        return self.arrays["y"].array.copy()

    def inputs_unchanged(self) -> bool:
        return all(
            np.array_equal(self.arrays[name].array.view(np.uint8), original.view(np.uint8))
            for name, original in self.pristine.items()
        )

    def input_array(self, name: str) -> np.ndarray:
        """A copy of the input's current contents."""
        return self.arrays[name].array.copy()


def nan_pair(case: Case) -> tuple[GuardedArray, GuardedArray]:
    """Two NaN-filled arrays of the case's shape and type: a composed bound's scratch grids
    (measurement.backends.composed), page-aligned like every array a kernel is given."""
    pair = (GuardedArray(case.shape, case.dtype, None), GuardedArray(case.shape, case.dtype, None))
    for scratch in pair:
        scratch.array.fill(np.nan)
    return pair


def step_buffers(buffers: CpuBuffers, src: GuardedArray | None, dst: GuardedArray | None) -> CpuBuffers:
    """Buffers of one launch of a composed bound: input u = `src`, output y = `dst` (None: the
    problem's own). No pristine copies: the problem's own buffers check its inputs."""
    arrays = {"u": src or buffers.arrays["u"], "y": dst or buffers.arrays["y"]}
    return CpuBuffers(buffers.case, None, arrays, {})
