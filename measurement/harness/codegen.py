"""Source of the *straightforward* kernel of any case, in C (CPU) and CUDA C++ (CUDA).

Straightforward means the obvious kernel a careful person writes first: one output point per
loop iteration (C, OpenMP over z,y in 3D and over y in 2D) or per thread (CUDA), every
neighbour loaded from memory, the coefficients taken from `coef[class_index]`, accumulation
in double for f64 and in float for f32 and f16 (f16 is half storage: `_Float16` in C,
`__half` in CUDA, converted to float on load and back on store). Both follow the kernel ABI
in measurement.backends.base; loops cover the written region only (halo on every axis).

The generators live in codegen_c (C), codegen_cuda (CUDA) and codegen_f16 (the CUDA kernel of
single-step f16 cases), on the shared helpers of codegen_base; this module re-exports their
public names, so callers import them from here. Single-step f16 cases get a kernel of their own
in both languages, moving their halves in vectors: the obvious scalar kernels measured the
compiler's weakness with halves, not f16 stencils, and stay historical baselines
(`straightforward_f16_scalar`); each module's docstring says why.

Nothing here imports Django.
"""
from __future__ import annotations

from .codegen_base import (ACC_TYPES, C_TYPES, CUDA_TYPES, acc_type, c_type, coefficient_locals, cuda_type,
                           grid_extents, header, index_expr, sum_lines)
from .codegen_c import empty_c, straightforward_c, straightforward_c_f16, straightforward_c_scalar, vectorised_c
from .codegen_cuda import (DEFAULT_CUDA_LAUNCH, composed_star1_polynomials, composed_star1_weights, cuda_composed_sum,
                           cuda_composed_tables, cuda_composed_weights, cuda_launch_geometry, empty_cuda, octahedron,
                           straightforward_cuda, straightforward_cuda_launch, straightforward_cuda_scalar)

__all__ = [
    "ACC_TYPES", "CUDA_TYPES", "C_TYPES", "DEFAULT_CUDA_LAUNCH", "acc_type", "c_type", "coefficient_locals",
    "composed_star1_polynomials", "composed_star1_weights", "cuda_composed_sum", "cuda_composed_tables",
    "cuda_composed_weights", "cuda_launch_geometry", "cuda_type", "empty_c", "empty_cuda", "grid_extents", "header",
    "index_expr", "octahedron", "straightforward_c", "straightforward_c_f16", "straightforward_c_scalar",
    "straightforward_cuda", "straightforward_cuda_launch", "straightforward_cuda_scalar", "sum_lines", "vectorised_c",
]
