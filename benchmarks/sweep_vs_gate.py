#!/usr/bin/env python
"""Why the sweep and the gate disagreed in session 28: the sweep timed short4+alternate 4.5% faster
than rows16 on star2d_1/8192^2 f32 (docs/benchmarks/handwritten_march_h200_s28.json), the gate 9%
slower (h200_campaign_march_s28.log); box2d_1 f32 and varcoef_star_1/256^3 f32 the same way.

Each pair (the standing kernel, the candidate the gate reverted) is timed four ways in one process,
so the way of timing is the only thing that changes between the rows:

* `sweep`: benchmarks/handwritten_sweep.py's loop (one problem, the L2 flushed before each launch,
  the straightforward kernel beside the pair). docs/benchmarks/sweep_vs_gate_s29.json was measured
  with a copy of that loop without its agreement check and per-pass copy timing; it now calls it.
* `gate_pair`: measurement.harness.protocol.time_variants with the gate's TimingSpec (the decoy
  fill of the output before every launch, the flush, a read-back after it), the pair alone.
* `gate_straightforward`: the same with the straightforward kernel, as `sweep` has it.
* `gate_baselines`: the same with the case's baselines in the passes, as a gate times them (the
  straightforward kernel, cupyx.ndimage, pystencils, torch.conv and Halide with its tuned schedule).

The pair's ratio (standing median / candidate median; above 1: the candidate is faster) is what
to compare between rows. On the device machine:

    source scripts/device_env.sh && python3 scripts/halide_aot.py --unpack && python3 benchmarks/sweep_vs_gate.py \\
        --pairs star2d_1/8192x8192/f32:rows16:short4+alternate:auto_anderson2021 --out $OUT/sweep_vs_gate.json
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from forge.candidates import matrix_candidates  # noqa: E402
from measurement.harness.cases import parse_case  # noqa: E402

LIBRARIES = ("cupyx.ndimage", "pystencils", "torch.conv", "halide")


def _kernel(case, subject: str):
    from measurement.backends.base import Kernel

    for made, launch, _, source in matrix_candidates(case):
        if made.split(":")[0] == subject:
            return Kernel(source, launch)
    raise SystemExit(f"{case.id}: no candidate {subject!r} in forge.candidates.matrix_candidates")


def _sweep(backend, case, pair: dict, passes: int, launches: int) -> dict[str, float]:
    """benchmarks/handwritten_sweep.py's own loop (sweep_case) over the pair and the straightforward kernel."""
    from handwritten_sweep import sweep_case

    candidates = [(name, {}, lambda _case, k=kernel: (k.source, k.launch, "")) for name, kernel in pair.items()]
    rows = sweep_case(backend, case.id, passes, launches, candidates=candidates)["variants"]
    return {name: row["median_ms"] / 1e3 for name, row in rows.items()}


def _gate(case, pair: dict, extra: list, seed: int) -> dict[str, float]:
    from measurement.backends.base import Variant
    from measurement.harness.plan import DEFAULT_PROTOCOL, timing_spec
    from measurement.harness.protocol import time_variants

    variants = [Variant(name, kernel, role) for (name, kernel), role in zip(pair.items(), ("prior_best", "candidate"))]
    spec = timing_spec(DEFAULT_PROTOCOL["cuda"], seed)
    run = time_variants("cuda", case.id, variants + extra, tuple(float(c) for c in case.coefficients()), spec,
                        leave_out_failing=True)
    return {name: statistics.median([s for one in passes for s in one]) for name, passes in run.samples.items()}


def compare(backend, case_id: str, standing: str, candidate: str, schedule: str | None, passes: int,
            launches: int) -> dict:
    from measurement.backends.base import Variant

    case = parse_case(case_id)
    pair = {standing: _kernel(case, standing), candidate: _kernel(case, candidate)}
    straightforward = Variant("straightforward", backend.straightforward(case), "baseline")
    libraries = [Variant(name, schedule=schedule if name == "halide" else None) for name in LIBRARIES
                 if name in backend.baseline_names(case)]
    ways = {
        "sweep": lambda: _sweep(backend, case, pair, passes, launches),
        "gate_pair": lambda: _gate(case, pair, [], 11),
        "gate_straightforward": lambda: _gate(case, pair, [straightforward], 12),
        "gate_baselines": lambda: _gate(case, pair, [straightforward, *libraries], 13),
    }
    rows = {}
    for way, timed in ways.items():
        began = time.perf_counter()
        medians = timed()
        rows[way] = {"medians_ms": {name: round(m * 1e3, 5) for name, m in medians.items()},
                     "ratio": round(medians[standing] / medians[candidate], 4),
                     "seconds": round(time.perf_counter() - began, 1)}
        print(f"{case_id} {way}: {standing}/{candidate} = {rows[way]['ratio']:.4f} "
              f"({medians[standing] * 1e3:.4f} / {medians[candidate] * 1e3:.4f} ms)", file=sys.stderr, flush=True)
    return {"case": case_id, "standing": standing, "candidate": candidate, "halide_schedule": schedule, "ways": rows}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", required=True,
                        help="comma-separated CASE:STANDING:CANDIDATE[:HALIDE_SCHEDULE], subjects as forge.candidates names them")
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--launches", type=int, default=10)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    from measurement.backends import get_backend

    backend = get_backend("cuda")
    results = []
    for item in args.pairs.split(","):
        case_id, standing, candidate, *schedule = item.split(":")
        results.append(compare(backend, case_id, standing, candidate, schedule[0] if schedule else None,
                               args.passes, args.launches))
    Path(args.out).write_text(json.dumps({"command": " ".join(sys.argv), "passes": args.passes,
                                          "launches": args.launches, "pairs": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
