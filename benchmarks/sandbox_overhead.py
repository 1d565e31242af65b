#!/usr/bin/env python
"""What one harness child costs, with the sandbox and without it (issue 14).

Every check and timing of a gate runs in a child (measurement.harness.isolation.run_isolated);
the sandbox adds namespaces, a private /proc and scratch, a uid switch and rlimits to each, and
a bubblewrap start to the first. In one process, for each mode asked for (`sandbox`: the
default; `unsafe`: the same server without bubblewrap, FORGESTENCIL_UNSAFE_NO_SANDBOX=1):

* `first_child`: the first run_isolated call (starts the preloading server);
* `empty_child`: later calls of a function that does nothing (`time.perf_counter`): the fixed
  cost per child;
* `check_child`: a check child of the straightforward kernel of a small case (4 checks), the
  cheapest child a gate really runs; its kernels come from the build cache (CPU) after the first.

Needs no Django. Before issue 14 (the forkserver; there `--modes` has no meaning):

    .venv/bin/python benchmarks/sandbox_overhead.py --repeat 20 --out docs/benchmarks/sandbox_overhead_before.json

After it, here and on the device machine (docs/gpu.md):

    .venv/bin/python benchmarks/sandbox_overhead.py --repeat 20 --modes sandbox,unsafe --out docs/benchmarks/sandbox_overhead_after.json
    python3 benchmarks/sandbox_overhead.py --backend cuda --repeat 20 --modes sandbox,unsafe --out $OUT/sandbox_overhead_h200.json
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CASES = {"cpu": "star_1/16x16x16/f32", "cuda": "star_1/64x64x64/f32"}


def seconds(call) -> float:
    began = time.perf_counter()
    outcome = call()
    elapsed = time.perf_counter() - began
    if not outcome.ok:
        raise SystemExit(f"a child failed: {outcome.error}")
    return elapsed


def summary(values: list[float]) -> dict:
    return {"median": round(statistics.median(values), 4), "min": round(min(values), 4), "max": round(max(values), 4),
            "n": len(values), "all": [round(v, 4) for v in values]}


def measure_mode(backend: str, repeat: int) -> dict:
    from measurement.backends.base import Kernel, Variant
    from measurement.harness import codegen, isolation
    from measurement.harness.cases import parse_case
    from measurement.harness.plan import check_plan
    from measurement.harness.protocol import check_variant

    case = parse_case(CASES[backend])
    source = codegen.straightforward_c(case) if backend == "cpu" else codegen.straightforward_cuda(case)
    launch = {} if backend == "cpu" else codegen.straightforward_cuda_launch(case)
    variant = Variant("straightforward", Kernel(source, launch), "baseline")
    specs = check_plan(case, backend, 12345)
    first = seconds(lambda: isolation.run_isolated(time.perf_counter, (), 300))
    empty = [seconds(lambda: isolation.run_isolated(time.perf_counter, (), 60)) for _ in range(repeat)]
    check = [seconds(lambda: isolation.run_isolated(check_variant, (backend, case.id, variant, specs), 300))
             for _ in range(max(3, repeat // 4))]
    describe = getattr(isolation, "describe", None)
    return {"isolation": describe() if describe else "forkserver children, no sandbox (before issue 14)",
            "first_child_seconds": round(first, 4), "empty_child_seconds": summary(empty),
            "check_child_seconds": summary(check)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=sorted(CASES), default="cpu")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--modes", default="sandbox", help="comma-separated: sandbox, unsafe")
    parser.add_argument("--out", required=True)
    options = parser.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    result = {
        "command": " ".join(["python", "benchmarks/sandbox_overhead.py", *sys.argv[1:]]),
        "commit": commit,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "loadavg_before": os.getloadavg()},
        "backend": options.backend,
        "case": CASES[options.backend],
        "modes": {},
    }
    for mode in options.modes.split(","):
        os.environ.pop("FORGESTENCIL_UNSAFE_NO_SANDBOX", None)
        if mode == "unsafe":
            os.environ["FORGESTENCIL_UNSAFE_NO_SANDBOX"] = "1"
        result["modes"][mode] = measure_mode(options.backend, options.repeat)
    result["machine"]["loadavg_after"] = os.getloadavg()
    Path(options.out).write_text(json.dumps(result, indent=1) + "\n")
    for mode, numbers in result["modes"].items():
        print(f"{mode}: first {numbers['first_child_seconds']} s, empty child median {numbers['empty_child_seconds']['median']} s, "
              f"check child median {numbers['check_child_seconds']['median']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
