"""The float64 reference, independent of every kernel under test, and the error rule.

Inputs are drawn fresh for each check from a recorded seed (never zeros: magnitudes in
[0.5, 1.5) with random signs), stored in the case's precision; the reference is computed in
float64 from exactly those stored values.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .cases import Case

TOLERANCE = {"f16": 1e-2, "f32": 1e-4, "f64": 1e-4}
# An admitted kernel's error may exceed the straightforward same-precision kernel's error
# (the numerical floor) by at most this factor: catches arithmetic in a lower precision.
FLOOR_FACTOR = {"f16": 5.0, "f32": 100.0, "f64": 100.0}
INPUT_CHUNKS = 16
REFERENCE_BATCH_BYTES = 16 * 2**20  # float64 cubes gathered per batch by reference_at


def make_inputs(case: Case, seed: int) -> dict[str, np.ndarray]:
    """Fresh inputs for one run: magnitudes uniform in [0.5, 1.5), `u` with random signs.

    Drawn in INPUT_CHUNKS slabs along the first axis, each from its own child of the seed and
    filled on a thread pool, so the host is not the bottleneck of a large GPU case. The chunk
    count is fixed, so a recorded seed gives the same inputs anywhere.
    """
    arrays = {name: np.empty(case.shape, dtype=case.dtype) for name in case.input_names}
    streams = iter(np.random.SeedSequence(seed).spawn(len(arrays) * INPUT_CHUNKS))
    jobs = [
        (array[rows], np.random.default_rng(next(streams)), name == "u")
        for name, array in arrays.items()
        for rows in _slabs(array.shape[0])
    ]
    with ThreadPoolExecutor(max_workers=min(INPUT_CHUNKS, os.cpu_count() or 1)) as pool:
        list(pool.map(lambda job: _fill(*job), jobs))
    return arrays


def _slabs(extent: int) -> list[slice]:
    edges = np.linspace(0, extent, INPUT_CHUNKS + 1).astype(int)
    return [slice(low, high) for low, high in zip(edges[:-1], edges[1:])]


def _fill(slab: np.ndarray, rng: np.random.Generator, signed: bool) -> None:
    """Write magnitudes in [0.5, 1.5) (signed: either sign) into `slab`; never zero."""
    values = rng.random(size=slab.shape, dtype=np.float64 if slab.dtype == np.float64 else np.float32)
    if signed:
        values *= 2.0
        values -= 1.0  # [-1, 1): the sign is random, the magnitude uniform in [0, 1)
        values += np.copysign(0.5, values)  # 0.0 becomes +0.5
    else:
        values += 0.5
    slab[...] = values


def _apply_once(case: Case, u: np.ndarray, coefficients: np.ndarray, halo: int) -> np.ndarray:
    """One stencil application in float64 over the region `halo` cells inside the edges of `u`'s
    last `dims` axes (leading axes, if any, are a batch)."""
    stencil = case.stencil
    grid = u.shape[u.ndim - stencil.dims:]
    inner = tuple(slice(halo, n - halo) for n in grid)
    out = np.zeros(u.shape[: u.ndim - stencil.dims] + tuple(n - 2 * halo for n in grid), dtype=np.float64)
    for offset, k in zip(stencil.offsets, stencil.class_index):
        window = (Ellipsis, *(slice(s.start + o, s.stop + o) for s, o in zip(inner, offset)))
        out += coefficients[k] * u[window]
    return out


def reference(case: Case, inputs: dict[str, np.ndarray], coefficients: np.ndarray) -> np.ndarray:
    """Float64 result over the written region (shape = grid minus the halo on each side).

    Slabs along the first axis (each with its halo, all T steps) run on a thread pool: NumPy
    releases the GIL, and box_2's 125 offsets took 4 s a check shape single-threaded in the
    parent (docs/benchmarks/gate_profile_h200_spawn.json)."""
    stencil = case.stencil
    h = stencil.halo
    u = inputs["u"]
    coefficients = np.asarray(coefficients, dtype=np.float64)
    out = np.empty(tuple(n - 2 * h for n in u.shape), dtype=np.float64)
    edges = np.linspace(0, out.shape[0], min(os.cpu_count() or 1, out.shape[0]) + 1).astype(int)

    def slab(low: int, high: int) -> None:
        local = u[low : high + 2 * h].astype(np.float64)
        for _ in range(stencil.time_steps):
            local = _apply_once(case, local, coefficients, stencil.radius)
        out[low:high] = local

    with ThreadPoolExecutor(max_workers=len(edges) - 1) as pool:
        list(pool.map(lambda bounds: slab(*bounds), zip(edges[:-1], edges[1:])))
    if stencil.variable_coefficient:
        out *= inputs["a"].astype(np.float64)[case.region]
    return out


def reference_at(case: Case, inputs: dict[str, np.ndarray], coefficients: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Float64 reference at selected grid points (rows of `points` = index tuples in the region).

    Used to check the output of full-size timed runs without computing the whole grid.
    Temporal types (T > 1) are evaluated on the cube of radius halo around each point.
    """
    stencil = case.stencil
    h = stencil.halo
    coefficients = np.asarray(coefficients, dtype=np.float64)
    u = inputs["u"]
    values = np.empty(len(points), dtype=np.float64)
    if stencil.time_steps == 1:
        total = np.zeros(len(points), dtype=np.float64)
        for offset, k in zip(stencil.offsets, stencil.class_index):
            index = tuple(points[:, axis] + offset[axis] for axis in range(stencil.dims))
            total += coefficients[k] * u[index].astype(np.float64)
        values = total
    else:  # the cube of radius h around each point, batches of points on a thread pool
        cube = np.stack(np.meshgrid(*[np.arange(-h, h + 1)] * stencil.dims, indexing="ij"), axis=-1).reshape(-1, stencil.dims)
        batch = max(1, REFERENCE_BATCH_BYTES // (8 * len(cube)))

        def evaluate(first: int) -> None:
            chosen = points[first : first + batch]
            index = chosen[:, None, :] + cube[None, :, :]
            local = u[tuple(index[..., axis] for axis in range(stencil.dims))].astype(np.float64)
            local = local.reshape((len(chosen),) + (2 * h + 1,) * stencil.dims)
            for _ in range(stencil.time_steps):
                local = _apply_once(case, local, coefficients, stencil.radius)
            values[first : first + batch] = local.reshape(len(chosen))

        with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            list(pool.map(evaluate, range(0, len(points), batch)))
    if stencil.variable_coefficient:
        values *= inputs["a"][tuple(points.T)].astype(np.float64)
    return values


def sample_points(case: Case, count: int, seed: int) -> np.ndarray:
    """Random points of the written region, plus its corners (where halo bugs show first)."""
    rng = np.random.default_rng(seed)
    h = case.stencil.halo
    lows = np.array([h] * len(case.shape))
    highs = np.array([n - h for n in case.shape])
    random = rng.integers(lows, highs, size=(count, len(case.shape)))
    corners = np.array(np.meshgrid(*[[lo, hi - 1] for lo, hi in zip(lows, highs)], indexing="ij")).reshape(len(case.shape), -1).T
    return np.concatenate([corners, random]).astype(np.int64)


def relative_error(output: np.ndarray, ref: np.ndarray) -> float:
    """‖y − ref‖₂ / ‖ref‖₂ in float64; NaN or inf anywhere gives inf."""
    y = np.asarray(output, dtype=np.float64)
    if not np.all(np.isfinite(y)):
        return float("inf")
    return float(np.linalg.norm(y - ref) / np.linalg.norm(ref))
