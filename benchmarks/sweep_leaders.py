"""The kernels a `handwritten_sweep.py --admitted` sweep measured ahead of each case's admitted kernel, as the
`--subjects` of a gate (`CASE=NAME,...`, printed on one line; nothing where none leads).

Why: on the device a warm machine is given back after 30 s idle, so a kernel a sweep puts ahead has to be gated in
the next call at once (scripts/h200_gate.sh `GATE_FROM=warm`), with its name read on the device, not typed here.
A variant leads when its median is at least `--margin` faster than the admitted kernel's in the same passes and the
campaign offers it by that name (forge/candidates.py `matrix_candidates`): the gate then judges it as it judges any
candidate, against the public bound and the prior best. One leader a case, the fastest.

    python3 benchmarks/sweep_leaders.py SWEEP.json [--margin 0.015]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from forge.candidates import matrix_candidates  # noqa: E402
from measurement.harness.cases import parse_case  # noqa: E402


def leaders(sweep: dict, margin: float) -> list[tuple[str, str, float]]:
    """(case, variant, admitted median / variant median) for each case whose fastest offered variant leads."""
    found = []
    for row in sweep["cases"]:
        variants = row["variants"]
        admitted = variants.get("admitted")
        if admitted is None:
            continue
        offered = {label.split(":", 1)[0] for label, *_ in matrix_candidates(parse_case(row["case"]))}
        timed = [(timing["median_ms"], name) for name, timing in variants.items() if name in offered]
        if not timed:
            continue
        median, name = min(timed)
        ratio = admitted["median_ms"] / median
        if ratio >= 1 + margin:
            found.append((row["case"], name, ratio))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sweep", help="a handwritten_sweep.py JSON made with --admitted")
    parser.add_argument("--margin", type=float, default=0.015,
                        help="how much faster than the admitted kernel a leader must be (default 0.015: 1.5%%)")
    options = parser.parse_args()
    if not 0 <= options.margin < 1:
        parser.error(f"--margin {options.margin}: a fraction from 0 to 1")
    try:
        sweep = json.loads(Path(options.sweep).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        parser.error(f"{options.sweep}: {error}")
    found = leaders(sweep, options.margin)
    for case_id, name, ratio in found:
        print(f"{case_id}: {name} {ratio:.3f}x the admitted kernel", file=sys.stderr)
    print(",".join(f"{case_id}={name}" for case_id, name, _ in found))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
