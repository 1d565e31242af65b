#!/usr/bin/env python
"""Where a gate's wall time goes: the fixed costs of a child (spawn, imports, CUDA context) and,
per case, every harness child and parent-side judgement of one `measurement.services.measure`
with a candidate (the straightforward kernel), in order (since session 25 the parent judges the
baselines together, then the candidate: two `judge_variants` phases where there was one
`judge_checks` phase a variant), and inside the baselines' child each baseline's preparation and
checks (`baseline_seconds`, which every measurement records).

A whole-matrix gate re-run must fit in minutes (issue 7), so the per-case cost has to be known
before it is cut. On the device machine (docs/gpu.md):

    source scripts/device_env.sh && python3 benchmarks/gate_profile.py --backend cuda \\
        --cases star_1/512x512x512/f32,box_2/512x512x512/f32 --out $OUT/gate_profile.json
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import scratch_ledger

IMPORT_PROBE = """
import json, time
stamps = {}
t = time.perf_counter()
import numpy
stamps['numpy'] = time.perf_counter() - t
for name in ('cupy', 'torch', 'pystencils'):
    t = time.perf_counter()
    try:
        __import__(name)
        stamps[name] = time.perf_counter() - t
    except Exception as error:
        stamps[name] = repr(error)
if BACKEND == "cuda":
    import cupy
    t = time.perf_counter()
    cupy.zeros(1).sum().item()
    stamps['cuda_context'] = time.perf_counter() - t
print(json.dumps(stamps))
"""


def timed(log: list, label: str, function):
    def wrapper(*args, **kwargs):
        began = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            name = getattr(args[0], "__name__", "") if label == "child" else ""
            log.append({"phase": f"{label} {name}".strip(), "seconds": round(time.perf_counter() - began, 3)})
    return wrapper


def run(options) -> dict:
    scratch_ledger.setup_django("profile")
    from measurement import services
    from measurement.backends.base import Kernel
    from measurement.harness import codegen
    from measurement.harness.cases import parse_case

    probe = subprocess.run([sys.executable, "-c", IMPORT_PROBE.replace("BACKEND", repr(options.backend))],
                           capture_output=True, text=True, check=True)
    result = {"backend": options.backend, "imports_in_a_fresh_process": json.loads(probe.stdout.strip().splitlines()[-1])}
    began = time.perf_counter()
    services.run_isolated(time.perf_counter, (), 60)
    result["spawn_seconds"] = round(time.perf_counter() - began, 3)
    log: list = []
    services.run_isolated = timed(log, "child", services.run_isolated)
    services.judge_variants = timed(log, "parent judge_variants", services.judge_variants)
    services.summarise_timing = timed(log, "parent summarise_timing", services.summarise_timing)
    result["cases"] = []
    for case_id in options.cases.split(","):
        case = parse_case(case_id)
        source = codegen.straightforward_cuda(case) if options.backend == "cuda" else codegen.straightforward_c(case)
        launch = codegen.straightforward_cuda_launch(case) if options.backend == "cuda" else {"threads": None}
        log.clear()
        began = time.perf_counter()
        report = services.measure(case_id, options.backend, Kernel(source, launch))
        total = time.perf_counter() - began
        split = report.description.get("baseline_seconds", {})  # inside the baselines' child
        result["cases"].append({"case": case_id, "total_seconds": round(total, 3), "phases": list(log),
                                "baseline_seconds": split, "attempts": report.attempts})
        print(f"{case_id}: {total:.1f} s " + ", ".join(f"{p['phase']} {p['seconds']:.1f}" for p in log)
              + "; the baselines' child: " + ", ".join(f"{name} {t['prepare']:.1f}+{t['checks']:.1f}"
                                                       for name, t in split.items() if name != "session"),
              file=sys.stderr, flush=True)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--cases", required=True)
    parser.add_argument("--out", required=True)
    options = parser.parse_args()
    out = Path(options.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(run(options), indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
