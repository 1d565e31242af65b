#!/usr/bin/env python
"""A gate's three kinds of child on the CUDA backend, with the sandbox and without it (issue 14):
the baselines' session, a candidate check (the straightforward kernel as the candidate), a timing
of every variant; wall seconds of each, whether it ran, and the variants' median launch times
(the sandbox must not move them). Django-free, so it runs on the device image as it is:

    export FORGESTENCIL_BWRAP=$PWD/device_carry/bwrap/bwrap-run   # the image has no bubblewrap
    python3 benchmarks/sandbox_gate_children.py sandbox,unsafe,sandbox star_1/256x256x256/f32
"""
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from measurement.backends.base import Kernel, Variant
from measurement.harness import codegen, isolation
from measurement.harness.cases import parse_case
from measurement.harness.plan import DEFAULT_PROTOCOL, check_plan, timing_spec
from measurement.harness.protocol import check_variant, time_variants
from measurement.harness.session_info import baseline_session


def steps(case, specs, candidate) -> dict:
    found = {}
    t = time.perf_counter()
    s = isolation.run_isolated(baseline_session, ("cuda", case.id, specs), 600)
    found["baseline_session"] = [round(time.perf_counter() - t, 2), s.ok, s.error]
    t = time.perf_counter()
    c = isolation.run_isolated(check_variant, ("cuda", case.id, candidate, specs), 600)
    found["candidate_check"] = [round(time.perf_counter() - t, 2), c.ok, c.error]
    if s.ok:
        description, straightforward, runs = s.value
        variants = ([Variant("straightforward", straightforward, "baseline")]
                    + [Variant(n) for n, r in runs.items() if n != "straightforward" and not isinstance(r, str)] + [candidate])
        coefficients = tuple(float(x) for x in case.coefficients())
        spec = timing_spec(DEFAULT_PROTOCOL["cuda"], 5)
        t = time.perf_counter()
        r = isolation.run_isolated(time_variants, ("cuda", case.id, variants, coefficients, spec), 600)
        found["timing"] = [round(time.perf_counter() - t, 2), r.ok, r.error, [v.name for v in variants]]
        if r.ok:
            found["medians_ms"] = {name: round(sorted(sorted(p)[len(p) // 2] for p in passes)[len(passes) // 2] * 1e3, 4)
                                   for name, passes in r.value.samples.items()}
    return found


def main() -> None:
    case = parse_case(sys.argv[2] if len(sys.argv) > 2 else "star_1/256x256x256/f32")
    specs = check_plan(case, "cuda", 11)
    launch = codegen.straightforward_cuda_launch(case)
    candidate = Variant("candidate", Kernel(codegen.straightforward_cuda(case), launch), "candidate")
    for mode in sys.argv[1].split(","):
        os.environ.pop("FORGESTENCIL_UNSAFE_NO_SANDBOX", None)
        if mode == "unsafe":
            os.environ["FORGESTENCIL_UNSAFE_NO_SANDBOX"] = "1"
        print(mode, json.dumps(steps(case, specs, candidate)), flush=True)
    print(json.dumps({"isolation": isolation.describe()}))


if __name__ == "__main__":
    main()
