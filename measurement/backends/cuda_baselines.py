"""The CUDA backend's library baselines: cupyx.scipy.ndimage, pystencils (Target.CUDA) and
PyTorch conv (cuDNN). Each is imported on its first run, never at the top of this module.

* "cupyx.ndimage": correlate with the stencil's weight array; T applications for diamond; f16
  read and stored as f16, computed in f32 as cupyx does.
* "pystencils": pystencils 2.0 with Target.CUDA, compiled by CuPy; f16 computed in f32.
* "torch.conv": cuDNN conv2d/conv3d, TF32 off; f16 stays f16.

Nothing here imports Django.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from measurement.harness.cases import Case

from .base import library_identity
from .cuda_device import cupy

if TYPE_CHECKING:
    from .cuda_memory import CudaBuffers


_host_coefficients: dict[int, tuple[Any, np.ndarray]] = {}


def host_coefficients(coef) -> np.ndarray:
    """The host values of a coefficient array made by device_coefficients (no device sync)."""
    entry = _host_coefficients.get(id(coef))
    if entry is not None and entry[0] is coef:
        return entry[1]
    return cupy.asnumpy(coef) if isinstance(coef, cupy.ndarray) else np.asarray(coef, dtype=np.float64)


def device_coefficients(coef: np.ndarray):
    """The coefficient array as kernels receive it (float64 on the device); its host values are
    remembered, so baselines read them without a device synchronisation."""
    host = np.ascontiguousarray(np.array(coef, dtype=np.float64, copy=True))
    device = cupy.asarray(host)
    _host_coefficients[id(device)] = (device, host)
    return device


def weight_array(case: Case, coef: np.ndarray, dtype) -> np.ndarray:
    """The (2r+1)^d correlation weights of one stencil application (as the CPU scipy baseline)."""
    s = case.stencil
    weights = np.zeros((2 * s.radius + 1,) * s.dims, dtype=np.float64)
    for offset, k in zip(s.offsets, s.class_index):
        weights[tuple(o + s.radius for o in offset)] = coef[k]
    return weights.astype(dtype)


class _PerCoefficients:
    """A small cache keyed by the coefficient object (kept alive, so ids are never reused)."""

    def __init__(self):
        self._items: list[tuple[Any, Any]] = []

    def get(self, coef, make):
        for key, value in self._items:
            if key is coef:
                return value
        value = make(host_coefficients(coef))
        self._items = self._items[-7:] + [(coef, value)]
        return value


class CupyxBaseline:
    """cupyx.scipy.ndimage.correlate with the stencil's weight array into a scratch grid, then
    the written region copied (times `a` for varcoef) into y. T applications for diamond.
    f16 input is read as f16 and accumulated in f32 (cupyx promotes the weights to f32)."""

    def __init__(self, case: Case):
        self.case = case
        self.precision = case.precision
        self._weights = _PerCoefficients()
        self._upcast = False  # set if this cupyx cannot read f16 directly

    @property
    def identity(self) -> dict[str, Any]:
        # the cupy distribution's name names its CUDA (cupy-cuda12x, -cuda13x): read the module's version
        return {"library": "cupyx.scipy.ndimage", "version": cupy.__version__,
                "computes_in": "f32" if self.case.precision == "f16" else self.precision}

    def _work(self, case: Case):
        if case.precision == "f16" and (self._upcast or case.stencil.time_steps > 1 or case.stencil.variable_coefficient):
            return np.dtype(np.float32)  # one rounding to f16, at the final store
        return case.dtype

    def run(self, buffers: "CudaBuffers", coef) -> None:
        try:
            self._run(buffers, coef)
        except Exception:
            if buffers.case.precision != "f16" or self._upcast:
                raise
            self._upcast = True
            self._run(buffers, coef)

    def _run(self, buffers: "CudaBuffers", coef) -> None:
        from cupyx.scipy import ndimage

        case = buffers.case
        s = case.stencil
        weight_dtype = np.float32 if case.precision == "f16" else case.dtype
        weights = self._weights.get(coef, lambda host: cupy.asarray(weight_array(case, host, weight_dtype)))
        work = self._work(case)
        values = buffers.array("u")
        if self._upcast and values.dtype != np.float32:
            values = values.astype(np.float32)
        for step in range(s.time_steps):
            key = ("cupyx", work.str, step % 2)
            if key not in buffers.cache:
                buffers.cache[key] = cupy.empty(case.shape, dtype=work)
            out = buffers.cache[key]
            ndimage.correlate(values, weights, output=out, mode="constant", cval=0.0)
            values = out
        region = case.region
        y = buffers.array("y")
        if s.variable_coefficient:
            cupy.multiply(values[region], buffers.array("a")[region], out=y[region])
        else:
            y[region] = values[region]


class PystencilsBaseline:
    """pystencils 2.0 kernels for Target.CUDA, compiled by CuPy. One kernel writes the region
    straight into y; diamond types ping-pong T-1 whole-grid steps through two scratch grids.
    f16 is computed in f32 (converted in, region converted out). Kernels are generated on the
    first run, so prepare() stays cheap and a failure is this baseline's runtime error."""

    def __init__(self, case: Case):
        self.case = case
        self.precision = "f32" if case.precision == "f16" else case.precision
        self._kernels: dict[int, Any] = {}
        self._named = _PerCoefficients()

    @property
    def identity(self) -> dict[str, Any]:
        return library_identity("pystencils", "pystencils", self.precision, target="CUDA")

    def _kernel(self, ghost_layers: int, final: bool):
        key = (ghost_layers, final)
        if key not in self._kernels:
            import pystencils as ps
            import sympy as sp

            s = self.case.stencil
            dtype = {"f32": "float32", "f64": "float64"}[self.precision]
            src, dst, a = ps.fields(f"src, dst, a: {dtype}[{s.dims}D]")
            coefficients = sp.symbols(f"c0:{len(s.classes)}")
            expression = sum(coefficients[k] * src[offset] for offset, k in zip(s.offsets, s.class_index))
            if s.variable_coefficient and final:
                expression = a.center * expression
            config = ps.CreateKernelConfig(target=ps.Target.CUDA, default_dtype=dtype, ghost_layers=ghost_layers)
            self._kernels[key] = ps.create_kernel(ps.Assignment(dst.center, expression), config).compile()
        return self._kernels[key]

    def run(self, buffers: "CudaBuffers", coef) -> None:
        case = buffers.case
        s = case.stencil
        work = np.dtype(self.precision.replace("f", "float"))
        named = self._named.get(coef, lambda host: {f"c{k}": float(c) for k, c in enumerate(host)})
        cache = buffers.cache

        def converted(name: str):
            array = buffers.array(name)
            if array.dtype == work:
                return array
            key = ("pystencils", name)
            if key not in cache:
                cache[key] = cupy.empty(case.shape, dtype=work)
            cache[key][...] = array
            return cache[key]

        def scratch(slot: int):
            key = ("pystencils", "scratch", slot)
            if key not in cache:
                cache[key] = cupy.zeros(case.shape, dtype=work)
            return cache[key]

        source = converted("u")
        for step in range(s.time_steps - 1):
            target = scratch(step % 2)
            self._kernel(s.radius, final=False)(src=source, dst=target, **named)
            source = target
        y = buffers.array("y")
        extra = {"a": converted("a")} if s.variable_coefficient else {}
        final = self._kernel(s.halo, final=True)  # writes exactly the case's region
        if y.dtype == work:
            final(src=source, dst=y, **named, **extra)
            return
        target = scratch(2)
        final(src=source, dst=target, **named, **extra)
        region = case.region
        y[region] = target[region]


class TorchConvBaseline:
    """torch.nn.functional.conv3d / conv2d (cuDNN, TF32 off, benchmark mode) without padding:
    each application shrinks the grid by the radius, so T applications leave exactly the
    written region, copied (times `a` for varcoef) into y. Arrays pass through DLPack (no copy)."""

    def __init__(self, case: Case):
        self.case = case
        self.precision = case.precision
        self._torch = None
        self._weights = _PerCoefficients()

    @property
    def identity(self) -> dict[str, Any]:
        return library_identity("torch.conv", "torch", self.precision, backend="cuDNN, TF32 off")

    def _setup(self):
        import torch

        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.benchmark = True
        self._torch = torch
        return torch

    def run(self, buffers: "CudaBuffers", coef) -> None:
        torch = self._torch or self._setup()
        case = buffers.case
        s = case.stencil
        if "torch" not in buffers.cache:
            buffers.cache["torch"] = {name: torch.from_dlpack(view) for name, view in buffers.views.items()}
        views = buffers.cache["torch"]
        weight = self._weights.get(
            coef, lambda host: torch.from_dlpack(cupy.asarray(weight_array(case, host, case.dtype)))[None, None].contiguous()
        )
        conv = torch.nn.functional.conv3d if s.dims == 3 else torch.nn.functional.conv2d
        x = views["u"][None, None]
        for _ in range(s.time_steps):
            x = conv(x, weight)
        out = x[0, 0]
        region = case.region
        y = views["y"][region]
        if s.variable_coefficient:
            torch.mul(out, views["a"][region], out=y)
        else:
            y.copy_(out)
