#!/usr/bin/env python
"""What the CPU backend's cache flush costs, and what it does to the times and ratios it precedes (session 42).

Before session 42 the flush wrote then read every double of a buffer twice the last-level caches, so it left
those caches full of dirty lines, whose write-back then landed in the timed launch; since then it reads one
double a 64-byte line of the same buffer (measurement/backends/cpu_compile.py `harness_flush`), as the CUDA
backend's L2 flush reads. Both evict every line of the case's arrays. This times, in one process and interleaved
launch by launch, each variant after each flush: the straightforward kernel, scipy.ndimage and the empty kernel
(the harness's launch overhead), so the ratio scipy.ndimage / straightforward (a speedup the gate would report)
can be compared between the two flushes on the same inputs. It times the flushes too: on a machine whose
last-level cache is large (480 MiB here) they are most of a CPU gate's time, and of the test suite's.

    .venv/bin/python benchmarks/cpu_flush.py --out docs/benchmarks/cpu_flush_s42.json
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from measurement.backends import cpu  # noqa: E402
from measurement.backends.base import Variant  # noqa: E402
from measurement.harness.cases import parse_case  # noqa: E402
from measurement.harness.oracle import make_inputs  # noqa: E402

CASES = ("star_1/32x32x32/f32", "star_1/128x128x128/f32", "box_1/256x256x256/f32", "star2d_1/2048x2048/f64")
VARIANTS = ("straightforward", "scipy.ndimage", "empty")


def write_then_read(backend: cpu.CpuBackend) -> None:
    """The flush before session 42: every double written, then read; read here one double a line (today's flush),
    which evicts the same lines; the dirty lines stay either way."""
    buffer, lib = backend._flush_buffer, cpu.Harness.lib()
    lib.harness_fill(buffer.ctypes.data, 2.0, buffer.size)
    backend.flush_cache()


FLUSHES = {"write_then_read": write_then_read, "read_a_line": lambda backend: backend.flush_cache()}


def measure(backend: cpu.CpuBackend, case_id: str, passes: int, launches: int) -> dict:
    case = parse_case(case_id)
    buffers = backend.allocate(case, make_inputs(case, 7))
    coef = backend.coefficients(case.coefficients())
    prepared = {"straightforward": backend.prepare(case, Variant("straightforward", backend.straightforward(case))),
                "scipy.ndimage": backend.prepare(case, Variant("scipy.ndimage")),
                "empty": backend.prepare(case, Variant("empty", backend.empty(case)))}
    for variant in prepared.values():
        variant.run(buffers, coef)  # warm-up: first touch, JIT, threads
    samples = {(flush, name): [] for flush in FLUSHES for name in VARIANTS}
    flush_seconds = {flush: [] for flush in FLUSHES}
    for _ in range(passes):
        for _ in range(launches):
            for name in VARIANTS:
                for flush, evict in FLUSHES.items():
                    began = time.perf_counter_ns()
                    evict(backend)
                    started = time.perf_counter_ns()
                    prepared[name].run(buffers, coef)
                    samples[flush, name].append((time.perf_counter_ns() - started) * 1e-9)
                    flush_seconds[flush].append((started - began) * 1e-9)
    medians = {flush: {name: statistics.median(samples[flush, name]) for name in VARIANTS} for flush in FLUSHES}
    return {
        "case": case_id,
        "array_bytes": int(case.points * case.dtype.itemsize),
        "median_s": medians,
        "scipy_over_straightforward": {flush: m["straightforward"] / m["scipy.ndimage"] for flush, m in medians.items()},
        "flush_median_s": {flush: statistics.median(values) for flush, values in flush_seconds.items()},
        "samples_s": {f"{flush}/{name}": values for (flush, name), values in samples.items()},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--launches", type=int, default=5)
    parser.add_argument("--out", required=True)
    options = parser.parse_args()
    backend = cpu.create()
    result = {"command": " ".join(sys.argv), "backend": backend.describe(), "flush_bytes": backend.flush_bytes(),
              "environment_before": backend.environment(), "cases": []}
    for case_id in options.cases.split(","):
        row = measure(backend, case_id, options.passes, options.launches)
        result["cases"].append(row)
        m, ratio, cost = row["median_s"], row["scipy_over_straightforward"], row["flush_median_s"]
        print(f"{case_id}: straightforward {m['write_then_read']['straightforward'] * 1e3:.3f} -> "
              f"{m['read_a_line']['straightforward'] * 1e3:.3f} ms; scipy/straightforward ratio "
              f"{ratio['write_then_read']:.3f} -> {ratio['read_a_line']:.3f}; empty "
              f"{m['write_then_read']['empty'] * 1e6:.0f} -> {m['read_a_line']['empty'] * 1e6:.0f} us; flush "
              f"{cost['write_then_read']:.3f} -> {cost['read_a_line']:.3f} s", flush=True)
    result["environment_after"] = backend.environment()
    Path(options.out).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
