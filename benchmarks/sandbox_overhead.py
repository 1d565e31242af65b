#!/usr/bin/env python
"""What one harness child costs, without and with the sandbox (issue 14).

Every check and timing of a gate runs in a child (measurement.harness.isolation.run_isolated);
the sandbox adds namespaces, a private /proc and scratch, a uid switch and rlimits to each, and
a bubblewrap start to the first. This measures, in one process, on the CPU backend:

* `first_child`: the first run_isolated call (starts the preloading server);
* `empty_child`: later calls of a function that does nothing (`time.perf_counter`): the fixed
  cost per child;
* `check_child`: a check child of the straightforward kernel of a tiny case (4 checks), the
  cheapest child a gate really runs; its kernels come from the build cache after the first.

    .venv/bin/python benchmarks/sandbox_overhead.py --repeat 20 --out docs/benchmarks/sandbox_overhead_after.json
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

CASE = "star_1/16x16x16/f32"


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--out", required=True)
    options = parser.parse_args()

    from measurement.backends.base import Variant
    from measurement.harness import codegen, isolation
    from measurement.harness.cases import parse_case
    from measurement.harness.plan import check_plan
    from measurement.harness.protocol import check_variant
    from measurement.backends.base import Kernel

    case = parse_case(CASE)
    variant = Variant("straightforward", Kernel(codegen.straightforward_c(case), {}), "baseline")
    specs = check_plan(case, "cpu", 12345)
    first = seconds(lambda: isolation.run_isolated(time.perf_counter, (), 120))
    empty = [seconds(lambda: isolation.run_isolated(time.perf_counter, (), 60)) for _ in range(options.repeat)]
    check = [seconds(lambda: isolation.run_isolated(check_variant, ("cpu", CASE, variant, specs), 120))
             for _ in range(max(3, options.repeat // 4))]
    describe = getattr(isolation, "describe", None)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    result = {
        "command": " ".join([".venv/bin/python", "benchmarks/sandbox_overhead.py", *sys.argv[1:]]),
        "commit": commit,
        "isolation": describe() if describe else "forkserver children, no sandbox (before issue 14)",
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "loadavg": os.getloadavg()},
        "case": CASE,
        "first_child_seconds": round(first, 4),
        "empty_child_seconds": summary(empty),
        "check_child_seconds": summary(check),
    }
    Path(options.out).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "machine"}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
