"""What cuDNN's benchmark-mode search costs the torch.conv baseline in each fresh process.

Every timing child of a gate is a fresh process, so `torch.backends.cudnn.benchmark = True`
(measurement/backends/cuda_baselines.py) makes cuDNN search its algorithms again in each one.
The gate profile of session 25 left 27 s of star_4/512³ f16's timing child unexplained; this
measures, per case and per mode, in a process of its own: the first call (search and run),
then the median of the following calls, so the search's cost and what it buys are side by
side. Correctness is not checked here (the gate checks torch.conv); the input is random, never
zeros. On the device machine (docs/gpu.md):

    source scripts/device_env.sh && python3 benchmarks/cudnn_search.py --out $OUT/cudnn_search.json
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the child imports measurement.*

CASES = ["star_4/512x512x512/f16", "star_4/512x512x512/f32", "box2d_1/8192x8192/f16", "star_2/512x512x512/f32"]
CALLS = 10


def measure(case_id: str, benchmark: bool) -> dict:
    """One case in this process: first call and the median of CALLS more, in milliseconds."""
    import numpy as np
    import torch

    from measurement.backends.cuda_baselines import weight_array
    from measurement.harness.cases import parse_case

    case = parse_case(case_id)
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = benchmark
    dtype = {"f16": torch.float16, "f32": torch.float32, "f64": torch.float64}[case.precision]
    generator = np.random.default_rng(7)
    coef = generator.uniform(0.1, 1.0, size=max(case.stencil.class_index) + 1)
    weight = torch.from_numpy(weight_array(case, coef, np.float64)).to("cuda", dtype)[None, None].contiguous()
    x = torch.rand(case.shape, device="cuda", dtype=torch.float32).to(dtype)[None, None]
    conv = torch.nn.functional.conv3d if case.stencil.dims == 3 else torch.nn.functional.conv2d
    torch.cuda.synchronize()
    start = time.perf_counter()
    conv(x, weight)
    torch.cuda.synchronize()
    first = time.perf_counter() - start
    times = []
    for _ in range(CALLS):
        start = time.perf_counter()
        conv(x, weight)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return {"case": case_id, "benchmark": benchmark, "first_call_ms": first * 1e3, "median_ms": statistics.median(times) * 1e3,
            "torch": torch.__version__, "cudnn": torch.backends.cudnn.version()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--one", help=argparse.SUPPRESS)  # CASE,MODE: run in this process (the child)
    args = parser.parse_args()
    if args.one:
        case_id, mode = args.one.split(",")
        print(json.dumps(measure(case_id, mode == "on")))
        return
    rows = []
    for case_id in CASES:
        for mode in ("on", "off", "on"):
            started = time.perf_counter()
            done = subprocess.run([sys.executable, __file__, "--out", "-", "--one", f"{case_id},{mode}"],
                                  capture_output=True, text=True)
            if done.returncode:
                raise SystemExit(f"{case_id} {mode}: {done.stderr[-2000:]}")
            row = json.loads(done.stdout.strip().splitlines()[-1])
            row["process_s"] = time.perf_counter() - started
            rows.append(row)
            print(json.dumps(row), flush=True)
    with open(args.out, "w") as handle:
        json.dump({"command": " ".join(sys.argv), "rows": rows}, handle, indent=1)


if __name__ == "__main__":
    main()
