"""The CUDA backend's bounds beyond the library baselines (measurement.backends.cuda):

* the composed bound of a temporal case on the device: its NaN-filled scratch grids and the
  buffers of each launch (measurement.backends.composed says how T launches write y);
* the historical baseline `straightforward_f16_scalar`: the scalar straightforward kernel of a
  single-step f16 case, replaced as "straightforward" by the vectorised one
  (measurement.harness.codegen_f16) and still timed, so every measurement shows what the old
  bound was and how far the new one moved it.

Nothing here imports Django, nor cupy at its top (cuda_device.cupy imports it on first use).
"""
from __future__ import annotations

from typing import Any

from measurement.harness import codegen
from measurement.harness.cases import Case
from measurement.harness.codegen_f16 import vectorised

from .base import Kernel, Prepared, Variant
from .composed import compose
from .cuda_memory import CudaBuffers, padded_nan

F16_SCALAR = "straightforward_f16_scalar"


def historical_baselines(case: Case) -> list[str]:
    """The historical baselines of a case: the scalar f16 kernel where `straightforward` is now the vectorised one."""
    return [F16_SCALAR] if vectorised(case) else []


def historical_kernel(case: Case, name: str) -> Kernel:
    if name != F16_SCALAR or not vectorised(case):
        raise ValueError(f"no historical baseline {name!r} for {case.id}; there are: {historical_baselines(case)}")
    return Kernel(codegen.straightforward_cuda_scalar(case), {key: list(value) for key, value in codegen.DEFAULT_CUDA_LAUNCH.items()})


def nan_pair(case: Case) -> tuple[Any, Any]:
    """Two NaN-filled device grids of the case's shape and type, each inside NaN padding as wide as
    the harness's arrays have (cuda_memory.padded_nan). Kernels are admitted reading there: the
    16-byte neighbour loads of the rows-a-thread star_1 kernels reach 16 bytes past each end of the
    array. Without it the composed bound faulted where its own case ran (session 40: an illegal
    address at diamond_ts4/512^3)."""
    return padded_nan(case)[1], padded_nan(case)[1]


def step_buffers(buffers: CudaBuffers, src, dst) -> CudaBuffers:
    """Buffers of one launch: input u = `src`, output y = `dst` (None: the problem's own). No
    padding or pristine copies: the problem's own buffers check the inputs and y's padding."""
    views = {"u": buffers.views["u"] if src is None else src, "y": buffers.views["y"] if dst is None else dst}
    return CudaBuffers(buffers.case, 0, {}, views, {})


def composed_on_cuda(case: Case, variant: Variant, single: Prepared) -> Prepared:
    """A kernel variant as prepared on the device: launched variant.steps times (composed.compose)."""
    return compose(case, variant, single, nan_pair, step_buffers)
