#!/usr/bin/env python
"""Bytes per second of the straightforward CUDA kernel in f16 and in f32 on the same grid (issue 15, point 4).

The f16 straightforward kernel is a bound only if it moves bytes as fast as the f32 one: the
scalar f16 kernel took 0.90-1.05x the f32 kernel's time for half the bytes, so every f16
speedup over it measured its weakness. For each grid (default: star_1 512^3, box_1 512^3,
star2d_1 8192^2) this times, in one process and interleaved pass by pass, the f32
straightforward kernel, the f16 one (measurement.harness.codegen_f16: four points per thread,
8-byte loads) and the scalar f16 kernel it replaced (the baseline `straightforward_f16_scalar`),
and reports each one's rate (compulsory bytes / median time) and `ratio` = f16 rate / f32 rate
(target >= 0.9; `ratio_scalar` the same for the scalar kernel).

Method (/work/.library/device/METHOD.md): correctness first, every kernel once on fresh random
inputs (never zeros) into a poisoned output, checked against the float64 oracle at the judge's
sample points, with every point of the written region written and nothing outside it; then
PASSES passes, each kernel LAUNCHES launches a pass in rotated order, each launch timed with CUDA
events after an untimed L2 flush and a fill of the output with a random decoy (the CUDA
backend's own time_launches, as every measurement). Raw samples go into the JSON.

No Django, no ledger, no sandbox: the CUDA backend in this process. On the device machine, from
the repository root (the image's python3 has cupy and numpy; nothing else is needed):

    python3 benchmarks/f16_naive_rate.py --out $OUT/f16_naive_rate_h200.json

and copy the file to docs/benchmarks/f16_naive_rate_h200.json (the default --out).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from measurement.backends.base import Variant, unwritten  # noqa: E402
from measurement.harness.cases import parse_case  # noqa: E402
from measurement.harness.oracle import TOLERANCE, make_inputs, reference_at, relative_error, sample_points  # noqa: E402

GRIDS = ("star_1/512x512x512", "box_1/512x512x512", "star2d_1/8192x8192")
PASSES, LAUNCHES, WARMUP, SAMPLE_POINTS = 7, 10, 3, 20000
# (label, precision, variant name): the f32 kernel, the f16 kernel, the scalar f16 one it replaced.
KERNELS = (("f32", "f32", "straightforward"), ("f16", "f16", "straightforward"),
           ("f16_scalar", "f16", "straightforward_f16_scalar"))


def check(backend, case, prepared, buffers, coef, seed: int) -> dict:
    """One launch into a poisoned output: error at the sample points, unwritten region points, writes outside."""
    buffers.poison_output()
    prepared.run(buffers, coef)
    backend.synchronize()
    out = buffers.output()
    points = sample_points(case, SAMPLE_POINTS, seed)
    expected = reference_at(case, make_inputs(case, seed), case.coefficients(), points)
    error = relative_error(out[tuple(points.T)].astype(np.float64), expected)
    missing = int(np.count_nonzero(unwritten(out[case.region])))
    outside = out.copy()
    outside[case.region] = np.nan
    wrote_outside = int(np.count_nonzero(~np.isnan(outside.astype(np.float64))))
    ok = error <= TOLERANCE[case.precision] and missing == 0 and wrote_outside == 0
    return {"error": error, "unwritten": missing, "written_outside": wrote_outside, "correct": ok}


def checked_kernels(backend, grid: str, seed: int) -> tuple[dict, dict, dict, dict, dict]:
    """The f32 and f16 cases of `grid` with their coefficients and buffers, and every kernel of
    KERNELS prepared and checked; nothing is timed when one is wrong."""
    cases = {precision: parse_case(f"{grid}/{precision}") for precision in ("f32", "f16")}
    coefs = {p: backend.coefficients(case.coefficients()) for p, case in cases.items()}
    buffers = {p: backend.allocate(case, make_inputs(case, seed)) for p, case in cases.items()}
    prepared, checks = {}, {}
    for label, precision, name in KERNELS:
        case = cases[precision]
        prepared[label] = backend.prepare(case, Variant(name))
        checks[label] = check(backend, case, prepared[label], buffers[precision], coefs[precision], seed)
        if not checks[label]["correct"]:
            raise SystemExit(f"{grid}/{precision} {name} is wrong, nothing timed: {checks[label]}")
    return cases, coefs, buffers, prepared, checks


def time_interleaved(backend, kernels: dict, buffers: dict, coefs: dict, *, passes: int, launches: int,
                     warmup: int, seed: int) -> dict:
    """key -> the launch times of each pass; `kernels` maps a key to (prepared kernel, precision).
    The kernels take turns pass by pass in rotated order, each launch after a random decoy fill."""
    rng = np.random.default_rng(seed)
    decoy = lambda p: (lambda launch: buffers[p].fill_output(float(rng.uniform(0.5, 1.5))))  # noqa: E731
    for kernel, precision in kernels.values():  # warm-up: module load, clocks, thread pool, page tables
        backend.time_launches(kernel, buffers[precision], coefs[precision], warmup, True)
    samples: dict = {key: [] for key in kernels}
    keys = list(kernels)
    for index in range(passes):
        for key in keys[index % len(keys):] + keys[: index % len(keys)]:
            kernel, p = kernels[key]
            samples[key].append(backend.time_launches(kernel, buffers[p], coefs[p], launches, True, before=decoy(p)))
    return samples


def kernel_rate(case, name: str, passes: list[list[float]], median: float) -> dict:
    medians = [statistics.median(launches) for launches in passes]
    return {"case": case.id, "variant": name, "compulsory_bytes": case.compulsory_bytes, "median_s": median,
            "pass_medians_s": medians, "spread": (max(medians) - min(medians)) / median,
            "bytes_per_s": case.compulsory_bytes / median, "samples_s": passes}


def ratios(kernels: dict) -> dict:
    """f16 and scalar-f16 byte rates over the f32 one (target >= 0.9 for `ratio`)."""
    rates = {label: k["bytes_per_s"] for label, k in kernels.items()}
    return {"ratio": rates["f16"] / rates["f32"], "ratio_scalar": rates["f16_scalar"] / rates["f32"]}


def measure_grid(backend, grid: str, seed: int) -> dict:
    cases, coefs, buffers, prepared, checks = checked_kernels(backend, grid, seed)
    precision_of = {label: precision for label, precision, _ in KERNELS}
    samples = time_interleaved(backend, {label: (prepared[label], precision_of[label]) for label in prepared},
                               buffers, coefs, passes=PASSES, launches=LAUNCHES, warmup=WARMUP, seed=seed)
    kernels = {}
    for label, precision, name in KERNELS:
        median = statistics.median(statistics.median(launches) for launches in samples[label])
        kernels[label] = kernel_rate(cases[precision], name, samples[label], median)
    return {"grid": grid, "checks": checks, "kernels": kernels, **ratios(kernels)}


def write_report(out: Path, report: dict) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--grids", default=",".join(GRIDS), help="TYPE/SHAPE, comma-separated (default: %(default)s)")
    parser.add_argument("--out", default=str(ROOT / "docs" / "benchmarks" / "f16_naive_rate_h200.json"))
    parser.add_argument("--seed", type=int, default=20260715)
    options = parser.parse_args()
    from measurement.backends import cuda

    backend = cuda.create()
    started = time.time()
    copy = backend.copy_bandwidth(512 * 2**20)
    results = []
    for grid in options.grids.split(","):
        results.append(measure_grid(backend, grid.strip(), options.seed))
        r = results[-1]
        print(f"{grid:22s} f32 {r['kernels']['f32']['bytes_per_s'] / 1e9:7.0f} GB/s  f16 {r['kernels']['f16']['bytes_per_s'] / 1e9:7.0f} GB/s"
              f"  f16 scalar {r['kernels']['f16_scalar']['bytes_per_s'] / 1e9:7.0f} GB/s  ratio {r['ratio']:.3f}"
              f" (scalar {r['ratio_scalar']:.3f})", flush=True)
    report = {
        "what": "straightforward CUDA kernel bytes/s, f16 vs f32 on the same grid (benchmarks/f16_naive_rate.py)",
        "protocol": {"passes": PASSES, "launches": LAUNCHES, "warmup": WARMUP, "l2_flush": True, "interleaved": True,
                     "decoy_fill_before_each_launch": True, "sample_points_checked": SAMPLE_POINTS},
        "target_ratio": 0.9,
        "device": backend.describe(),
        "environment": backend.environment(),
        "copy_bandwidth_bytes_per_s": copy,
        "seed": options.seed,
        "wall_s": time.time() - started,
        "grids": results,
    }
    write_report(Path(options.out), report)


if __name__ == "__main__":
    main()
