#!/usr/bin/env python
"""Bytes per second of the straightforward C kernel in f16 and in f32 on the same grid (issue 15, point 4).

The CPU twin of benchmarks/f16_naive_rate.py (whose check it reuses): the f16 straightforward
kernel is a fair bound only if it is not crippled by the compiler's handling of halves. For each
grid (default: star_1 96^3, box_1 96^3, star2d_1 1024^2) this times, in one process and
interleaved pass by pass, the f32 straightforward kernel, the f16 one (measurement.harness.codegen_c:
F16C conversions, eight x points at a time) and the scalar f16 kernel it replaced (the baseline
`straightforward_f16_scalar`), each single-threaded and on all cores, and reports each one's rate
(compulsory bytes / median time) and `ratio` = f16 rate / f32 rate (target >= 0.9; `ratio_scalar`
the same for the scalar kernel).

Method: correctness first, every kernel once on fresh random inputs into a poisoned output,
checked against the float64 oracle at the judge's sample points, with every point of the written
region written and nothing outside it; then PASSES passes, each kernel LAUNCHES launches a pass
in rotated order, each launch after a fill of the output with a random decoy and a flush of the
last-level caches (the CPU backend's own time_launches, as the gate's CPU protocol). Raw samples
go into the JSON. No Django, no ledger, no sandbox. From the repository root:

    .venv/bin/python benchmarks/f16_naive_rate_cpu.py

writes docs/benchmarks/f16_naive_rate_cpu.json (the default --out).
"""
from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from f16_naive_rate import KERNELS, checked_kernels, kernel_rate, ratios, time_interleaved, write_report  # noqa: E402

from measurement.backends import cpu  # noqa: E402

GRIDS = ("star_1/96x96x96", "box_1/96x96x96", "star2d_1/1024x1024")
THREADS = {"1_thread": 1, "all_threads": None}
PASSES, LAUNCHES, WARMUP = 7, 11, 2


def measure_grid(backend, grid: str, seed: int) -> dict:
    cases, coefs, buffers, compiled, checks = checked_kernels(backend, grid, seed)
    kernels = {(label, setting): (dataclasses.replace(compiled[label], threads=threads), precision)
               for label, precision, _ in KERNELS for setting, threads in THREADS.items()}
    samples = time_interleaved(backend, kernels, buffers, coefs, passes=PASSES, launches=LAUNCHES, warmup=WARMUP, seed=seed)
    result: dict = {"grid": grid, "checks": checks, "threads": {}}
    for setting, threads in THREADS.items():
        rates = {}
        for label, precision, name in KERNELS:
            passes = samples[label, setting]
            median = statistics.median([s for launches in passes for s in launches])
            rates[label] = {**kernel_rate(cases[precision], name, passes, median), "threads": threads or cpu.all_cores()}
        result["threads"][setting] = {"kernels": rates, **ratios(rates)}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--grids", default=",".join(GRIDS), help="TYPE/SHAPE, comma-separated (default: %(default)s)")
    parser.add_argument("--out", default=str(ROOT / "docs" / "benchmarks" / "f16_naive_rate_cpu.json"))
    parser.add_argument("--seed", type=int, default=20260715)
    options = parser.parse_args()
    backend = cpu.create()
    started = time.time()
    environment_before = backend.environment()
    results = []
    for grid in options.grids.split(","):
        results.append(measure_grid(backend, grid.strip(), options.seed))
        for setting, r in results[-1]["threads"].items():
            k = r["kernels"]
            print(f"{grid:20s} {setting:11s} f32 {k['f32']['median_s'] * 1e3:8.3f} ms"
                  f"  f16 {k['f16']['median_s'] * 1e3:8.3f} ms"
                  f"  f16 scalar {k['f16_scalar']['median_s'] * 1e3:8.3f} ms  ratio {r['ratio']:.3f}"
                  f" (scalar {r['ratio_scalar']:.3f})", flush=True)
    report = {
        "what": "straightforward C kernel bytes/s, f16 vs f32 on the same grid (benchmarks/f16_naive_rate_cpu.py)",
        "command": " ".join([".venv/bin/python", "benchmarks/f16_naive_rate_cpu.py", *sys.argv[1:]]),
        "protocol": {"passes": PASSES, "launches": LAUNCHES, "warmup": WARMUP, "cache_flush": True, "interleaved": True,
                     "decoy_fill_before_each_launch": True,
                     "threads": {k: v or cpu.all_cores() for k, v in THREADS.items()}},
        "target_ratio": 0.9,
        "device": backend.describe(),
        "environment_before": environment_before,
        "environment_after": backend.environment(),
        "seed": options.seed,
        "wall_s": time.time() - started,
        "grids": results,
    }
    write_report(Path(options.out), report)


if __name__ == "__main__":
    main()
