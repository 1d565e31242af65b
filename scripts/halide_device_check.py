#!/usr/bin/env python
"""ON the GPU machine: every compiled Halide schedule of every case of a matrix, checked and
timed against the straightforward kernel, in this process (no harness children, no ledger).

Per case: each schedule on a small odd shape against the float64 oracle (every point, and
nothing written outside the region); then at the case's own shape, the straightforward kernel
and every schedule, PASSES interleaved passes of LAUNCHES launches each after WARMUP, timed by
CudaBackend.time_launches (CUDA events, L2 flushed before every launch: the gate's timing),
with the full-size output checked at SAMPLE_POINTS oracle points after the last launch. The
JSON is rewritten after every case; with --deadline no case starts past it (the cases go one
type at a time, so a short run covers every type first).

    bash scripts/halide_device_check.sh      # the device command: GPU tests, then this
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

from measurement.backends import cuda  # noqa: E402
from measurement.backends.base import Variant  # noqa: E402
from measurement.backends.halide_aot import case_entries, read_index  # noqa: E402
from measurement.harness.cases import parse_case  # noqa: E402
from measurement.harness.oracle import TOLERANCE, make_inputs, reference, reference_at, relative_error, sample_points  # noqa: E402
from measurement.harness.plan import odd_shape  # noqa: E402

PASSES, LAUNCHES, WARMUP, SAMPLE_POINTS = 3, 10, 2, 4096


def small_check(backend, case, prepared) -> dict:
    shaped = case.with_shape(odd_shape(case))
    inputs = make_inputs(shaped, 7)
    coef = case.coefficients()
    buffers = backend.allocate(shaped, inputs)
    buffers.poison_output()
    prepared.run(buffers, backend.coefficients(coef))
    backend.synchronize()
    out = buffers.output()
    outside = np.ones(shaped.shape, dtype=bool)
    outside[shaped.region] = False
    error = relative_error(out[shaped.region], reference(shaped, inputs, coef))
    return {"shape": list(shaped.shape), "error": error, "outside_written": int((~np.isnan(out[outside].astype(np.float64))).sum()),
            "inputs_unchanged": buffers.inputs_unchanged()}


def measure_case(backend, case, entries) -> dict:
    prepared = {"straightforward": backend.prepare(case, Variant("straightforward"))}
    result: dict = {"case": case.id, "schedules": {}}
    for entry in entries:
        name = entry["schedule"]
        if "error" in entry:
            result["schedules"][name] = {"default": entry["default"], "compile_error": entry["error"]}
            continue
        try:
            prepared[name] = backend.prepare(case, Variant("halide", schedule=name))
            check = small_check(backend, case, prepared[name])
        except Exception as error:
            prepared.pop(name, None)
            result["schedules"][name] = {"default": entry["default"], "runtime_error": f"{type(error).__name__}: {error}"}
            continue
        result["schedules"][name] = {"default": entry["default"], "small_check": check}
    inputs = make_inputs(case, 11)
    coef_host = case.coefficients()
    buffers = backend.allocate(case, inputs)
    coef = backend.coefficients(coef_host)
    points = sample_points(case, SAMPLE_POINTS, 13)
    expected = reference_at(case, inputs, coef_host, points)
    read = buffers.sampler(points)
    for name, variant in list(prepared.items()):
        try:
            for _ in range(WARMUP):
                variant.run(buffers, coef)
            backend.synchronize()
        except Exception as error:  # at the case's own shape only: recorded, the others still timed
            if name == "straightforward":
                raise
            del prepared[name]
            result["schedules"][name]["runtime_error"] = f"{type(error).__name__}: {error}"
    samples: dict[str, list[float]] = {name: [] for name in prepared}
    names = list(prepared)
    errors = result["full_size_error"] = {name: 0.0 for name in names}
    for p in range(PASSES):
        for name in names[p % len(names):] + names[: p % len(names)]:
            # a decoy before every launch (outside the timed region), so each launch's own output is read
            samples[name] += backend.time_launches(prepared[name], buffers, coef, LAUNCHES, True,
                                                   before=lambda launch: buffers.fill_output(1.0 + launch))
            errors[name] = max(errors[name], relative_error(read(), expected))
    for name, values in samples.items():
        target = result if name == "straightforward" else result["schedules"][name]
        target["median_ms" if name != "straightforward" else "straightforward_ms"] = statistics.median(values) * 1e3
    tolerance = TOLERANCE[case.precision]
    correct = {name: s for name, s in result["schedules"].items() if "median_ms" in s
               and s["small_check"]["error"] <= tolerance and s["small_check"]["outside_written"] == 0
               and s["small_check"]["inputs_unchanged"] and result["full_size_error"][name] <= tolerance}
    default = next((n for n, s in result["schedules"].items() if s["default"]), None)
    result["default"] = default
    result["default_correct"] = default in correct
    if correct:
        best = min(correct, key=lambda n: correct[n]["median_ms"])
        result["best"] = {"schedule": best, "median_ms": correct[best]["median_ms"]}
    return result


def spread_by_type(cases: list[str]) -> list[str]:
    """One case of each type in turn (matrix order within a type): a run cut short by its
    deadline has still seen every type it reached."""
    by_type: dict[str, list[str]] = {}
    for case_id in cases:
        by_type.setdefault(case_id.split("/")[0], []).append(case_id)
    rounds = max(len(group) for group in by_type.values())
    return [group[i] for i in range(rounds) for group in by_type.values() if i < len(group)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--matrix", default=str(ROOT / "fixtures" / "matrices" / "gpu.json"))
    parser.add_argument("--out", required=True)
    parser.add_argument("--deadline", type=float, default=0.0, help="seconds from the start after which no case starts")
    args = parser.parse_args()
    started = time.perf_counter()
    index = read_index()
    if index is None:
        print("no Halide AOT folder: run scripts/halide_aot.py here and carry device_carry/halide", file=sys.stderr)
        return 2
    backend = cuda.create()
    cases = spread_by_type(json.loads(Path(args.matrix).read_text())["cases"])
    report = {"halide_version": index["halide_version"], "target": index["target"], "device": backend.describe(),
              "protocol": {"passes": PASSES, "launches": LAUNCHES, "warmup": WARMUP, "flush": True,
                           "sample_points": SAMPLE_POINTS}, "cases": []}
    for case_id in cases:
        if args.deadline and time.perf_counter() - started > args.deadline:
            report["not_run"] = cases[len(report["cases"]):]
            break
        case = parse_case(case_id)
        try:
            row = measure_case(backend, case, case_entries(index, case_id))
        except Exception as error:
            row = {"case": case_id, "error": f"{type(error).__name__}: {error}"}
        report["cases"].append(row)
        report["wall_seconds"] = time.perf_counter() - started
        Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
        default = row.get("schedules", {}).get(row.get("default"), {})
        print(f"{case_id:34s} straightforward {row.get('straightforward_ms', float('nan')):8.3f} ms | halide default "
              f"{row.get('default')} {default.get('median_ms', float('nan')):8.3f} ms correct={row.get('default_correct')} | "
              f"best {row.get('best', {}).get('schedule')} {row.get('best', {}).get('median_ms', float('nan')):8.3f} ms"
              + (f" | {row['error']}" if "error" in row else ""), flush=True)
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")  # with not_run, where the deadline stopped it
    return 0


if __name__ == "__main__":
    sys.exit(main())
