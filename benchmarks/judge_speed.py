#!/usr/bin/env python
"""How long the parent's judging of a measurement's checks takes, the way measure() does it now
against the way it did before session 25, interleaved in one process (docs/measurement.md).

Why: on the H200 the parent judged every variant's four checks one variant after the other, about
0.4 s a variant for a 4M-point check (docs/benchmarks/gate_profile_h200_s25.json: seven judgements,
3.1 s of a 43 s gate), and a whole-matrix re-run pays that for every case. The judging needs no GPU:
the outputs here are the checks' references in the case's precision with a little noise per variant
(correct, and different from each other and from the other checks, as honest outputs are), laid in
NaN-poisoned arrays as the harness returns them.

    .venv/bin/python benchmarks/judge_speed.py --cases star_4/512x512x512/f16,star_1/512x512x512/f32 \
        --out docs/benchmarks/judge_speed.json

`before`: one variant after the other, the stale-result and constant-output tests on the whole array
(the code of commit 2baa0e3). `now`: judge_variants, as measure() calls it, with the middle-row shortcuts. Both
judge the same outputs; the run fails if any verdict differs.
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
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from measurement.harness import judge  # noqa: E402
from measurement.harness.judge import JUDGE_THREADS  # noqa: E402
from measurement.harness.cases import parse_case  # noqa: E402
from measurement.harness.plan import check_plan  # noqa: E402
from measurement.harness.protocol import CheckRun  # noqa: E402

VARIANTS = 7  # star_4/512^3 f16's gate on the H200: six baselines and the candidate


def outputs(case, specs, references, variant: int) -> list[CheckRun]:
    runs = []
    for spec in specs:
        shaped = case.with_shape(spec.shape)
        ref = references[spec]
        out = np.full(spec.shape, np.nan, dtype=case.dtype)
        noise = np.random.default_rng(variant).standard_normal(ref.shape) * 1e-7 * float(np.abs(ref).max())
        out[shaped.region] = (ref + noise).astype(case.dtype)
        runs.append(CheckRun(spec.label, out, True, None, 0.0))
    return runs


def whole_array_constant(region: np.ndarray) -> bool:
    return float(np.std(region.astype(np.float64))) == 0.0


def whole_array_same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=True))


def judge_before(case, specs, variant_runs, references):
    shortcuts = judge._constant, judge._same_output
    judge._constant, judge._same_output = whole_array_constant, whole_array_same
    try:
        return [judge.judge_checks(case, specs, runs, references=references) for runs in variant_runs]
    finally:
        judge._constant, judge._same_output = shortcuts


def judge_now(case, specs, variant_runs, references):
    return list(judge.judge_variants(case, specs, dict(enumerate(variant_runs)), references).values())


def measure_case(case_id: str, rounds: int) -> dict:
    case = parse_case(case_id)
    specs = check_plan(case, "cuda", 20261203)
    references = judge.check_references(case, specs)
    variant_runs = [outputs(case, specs, references, v) for v in range(VARIANTS)]
    times: dict[str, list[float]] = {"before": [], "now": []}
    for round_ in range(rounds):
        order = ("before", "now") if round_ % 2 == 0 else ("now", "before")
        for way in order:
            began = time.perf_counter()
            verdicts = (judge_before if way == "before" else judge_now)(case, specs, variant_runs, references)
            times[way].append(time.perf_counter() - began)
            if [v.as_dict() for v in verdicts] != [v.as_dict() for v in judge_before(case, specs, variant_runs, references)]:
                raise SystemExit(f"{case_id}: the two ways judged differently")
    ratios = [b / n for b, n in zip(times["before"], times["now"])]
    return {"case": case_id, "check_shapes": [list(s.shape) for s in specs], "variants": VARIANTS,
            "seconds": times, "median_seconds": {k: statistics.median(v) for k, v in times.items()},
            "speedup_median": statistics.median(ratios), "speedup_range": [min(ratios), max(ratios)]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", default="star_4/512x512x512/f16,star_1/512x512x512/f32")
    parser.add_argument("--rounds", type=int, default=7, help="rounds of each way, interleaved")
    parser.add_argument("--out", type=Path, help="JSON file to write")
    args = parser.parse_args()
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    load = os.getloadavg()[0]
    results = []
    for case_id in args.cases.split(","):
        result = measure_case(case_id.strip(), args.rounds)
        med = result["median_seconds"]
        print(f"{case_id}: before {med['before']:.3f} s, now {med['now']:.3f} s for {VARIANTS} variants: "
              f"{result['speedup_median']:.2f}x ({result['speedup_range'][0]:.2f}-{result['speedup_range'][1]:.2f})")
        results.append(result)
    if args.out:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
        record = {"started_utc": started, "command": " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]),
                  "git_commit": commit, "cpus": os.cpu_count(), "judge_threads": JUDGE_THREADS,
                  "load_1min_at_start": load, "machine": platform.platform(), "cases": results}
        args.out.write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
