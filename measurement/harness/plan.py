"""What a measurement checks and how it times: check shapes, seeds, coefficient sets, protocol."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .cases import Case, draw_coefficients
from .protocol import CheckSpec, TimingSpec

CHECK_POINT_CAP = {"cpu": 2**21, "cuda": 2**22}
ODD_EXTENTS = {3: (37, 43, 71), 2: (301, 317)}  # not multiples of any common block size
HARNESS_DIRS = ("measurement/harness", "measurement/backends")


@dataclass(frozen=True)
class ProtocolSettings:
    passes: int = 7
    launches: int = 5
    warmup: int = 2
    flush: bool = True
    interleave: bool = True
    max_attempts: int = 3  # timing attempts while the spread exceeds the regression band
    check_timeout: float = 300.0
    timing_timeout: float = 900.0


DEFAULT_PROTOCOL = {"cpu": ProtocolSettings(), "cuda": ProtocolSettings(launches=10, warmup=3)}


def harness_version() -> str:
    """sha256 over the harness and backend sources: the code a candidate cannot touch."""
    root = Path(__file__).resolve().parents[2]
    digest = hashlib.sha256()
    for folder in HARNESS_DIRS:
        for path in sorted((root / folder).glob("*.py")):
            digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def reduced_shape(case: Case, cap: int) -> tuple[int, ...]:
    shape = list(case.shape)
    floor = 4 * case.stencil.halo + 8
    while np.prod(shape) > cap:
        axis = int(np.argmax(shape))
        if shape[axis] // 2 < floor:
            break
        shape[axis] //= 2
    return tuple(shape)


def odd_shape(case: Case) -> tuple[int, ...]:
    smallest = 2 * case.stencil.halo + 3
    return tuple(max(min(n, odd), smallest) | 1 for n, odd in zip(case.shape, ODD_EXTENTS[case.stencil.dims]))


def check_plan(case: Case, backend: str, seed: int) -> list[CheckSpec]:
    """Four runs on fresh inputs: two shapes (one odd), three coefficient sets, guard pages both ends.

    Only B uses the odd shape, so a kernel that fails there alone is `shape_specific`; A, C and D
    share a shape with different inputs, so a kernel that repeats an earlier result is caught.
    """
    rng = np.random.default_rng(seed)
    seeds = [int(s) for s in rng.integers(1, 2**52, size=5)]
    main = reduced_shape(case, CHECK_POINT_CAP[backend])
    odd = odd_shape(case)
    given = tuple(float(c) for c in case.coefficients())
    fresh = tuple(float(c) for c in draw_coefficients(case.stencil, seeds[4]))
    equal = np.ones(len(case.stencil.classes))
    counts = np.bincount(case.stencil.class_index, minlength=len(equal))
    trivial = tuple(float(c) for c in equal / float(np.dot(equal, counts)))
    return [
        CheckSpec("A: case coefficients", main, seeds[0], given, "case", guard="end"),
        CheckSpec("B: case coefficients, odd shape", odd, seeds[1], given, "case", guard="start"),
        CheckSpec("C: fresh coefficients", main, seeds[2], fresh, "fresh"),
        CheckSpec("D: equal coefficients", main, seeds[3], trivial, "trivial-looking"),
    ]


def timing_spec(settings: ProtocolSettings, seed: int) -> TimingSpec:
    rng = np.random.default_rng(seed)
    return TimingSpec(
        passes=settings.passes,
        launches=settings.launches,
        warmup=settings.warmup,
        flush=settings.flush,
        interleave=settings.interleave,
        seed=int(rng.integers(1, 2**52)),
        sample_seed=int(rng.integers(1, 2**52)),
    )
