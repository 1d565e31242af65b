"""Arrays of the CUDA backend (measurement.backends.cuda): each input and the output sits inside a
larger device buffer whose padding (one plane plus PAD_ROWS rows on each side in 3D, PAD_ROWS
rows in 2D) is NaN. A read past an array's ends yields a computed NaN in the output, which the
judge tells from the output's own poison (a NaN of another bit pattern) and rejects as
out_of_bounds; a write past the output's ends is found when the output is read back (`output()`
raises OutOfBoundsWrite, a runtime error); a write past an input's ends counts as modifying the
input (the comparison covers the padding too). CudaBackend.allocate fills these buffers.

Nothing here imports Django, nor cupy at its top (cuda_device.cupy imports it on first use).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from measurement.harness import codegen
from measurement.harness.cases import Case

from .base import fill_output_poison
from .cuda_device import cupy

PAD_ROWS = 8


class OutOfBoundsWrite(RuntimeError):
    """The kernel wrote into the NaN padding around its output array."""


def pad_elements(case: Case) -> int:
    """NaN padding on each side of an array: one plane + PAD_ROWS rows (3D) or PAD_ROWS rows
    (2D), rounded up to 256 bytes so every array starts 256-byte aligned."""
    nz, ny, nx = codegen.grid_extents(case)
    pad = (ny * nx if case.stencil.dims == 3 else 0) + PAD_ROWS * nx
    align = 256 // case.dtype.itemsize
    return max(align, -(-pad // align) * align)


def padded_nan(case: Case) -> tuple[Any, Any]:
    """(the whole buffer, the array of case.shape inside it): NaN everywhere, pad_elements of
    padding on each side, the array 256-byte aligned (CuPy's allocations are)."""
    pad, n = pad_elements(case), case.points
    full = cupy.full(n + 2 * pad, np.nan, dtype=case.dtype)
    return full, full[pad : pad + n].reshape(case.shape)


_BITS = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def _same_bits(a, b) -> bool:
    bits = _BITS[a.dtype.itemsize]
    return bool(cupy.array_equal(a.view(bits), b.view(bits)))


@dataclass
class CudaBuffers:
    """Inputs and output of one problem in NaN-padded device buffers (see base.Buffers)."""

    case: Case
    pad: int
    padded: dict[str, Any]  # name -> 1D device buffer: pad | array | pad
    views: dict[str, Any]  # name -> the array inside (C-contiguous, case.shape)
    pristine: dict[str, Any]  # input name -> device copy of its padded buffer
    cache: dict[str, Any] = field(default_factory=dict)  # per-problem scratch of the baselines

    @property
    def extents(self) -> tuple[int, int, int]:
        return codegen.grid_extents(self.case)

    def array(self, name: str):
        """The live device array (no copy)."""
        return self.views[name]

    def has(self, name: str) -> bool:
        return name in self.views

    def poison_output(self) -> None:
        fill_output_poison(self.padded["y"])

    def fill_output(self, value: float) -> None:
        """A device-side fill of the array; the padding keeps its NaN (so a write there still shows)."""
        self.views["y"].fill(value)

    def sampler(self, points: np.ndarray):
        flat = cupy.asarray(np.ravel_multi_index(tuple(points.T), self.case.shape))
        y = self.views["y"].reshape(-1)  # a view: the array is C-contiguous
        return lambda: cupy.asnumpy(y[flat])

    def output(self) -> np.ndarray:
        full = self.padded["y"]
        spilled = int(cupy.count_nonzero(~cupy.isnan(full[: self.pad])))
        spilled += int(cupy.count_nonzero(~cupy.isnan(full[-self.pad :])))
        if spilled:
            raise OutOfBoundsWrite(
                f"the kernel wrote {spilled} elements outside the output array (into its NaN padding)")
        return cupy.asnumpy(self.views["y"])

    def inputs_unchanged(self) -> bool:
        return all(_same_bits(self.padded[name], original) for name, original in self.pristine.items())

    def input_array(self, name: str) -> np.ndarray:
        """A host copy of the input's current contents."""
        return cupy.asnumpy(self.views[name])
