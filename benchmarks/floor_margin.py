#!/usr/bin/env python
"""How near every timed variant of a ledger export came to the impossible-speed line
(measurement/harness/rules.py), under the rule as it stands and as it stood until session 43
(the launch overhead taken off the median alone): a margin of 1.0 is the line, below it the
variant is impossible. Read from each CandidateMeasured's own median, fraction of copy and launch
overhead, so no GPU is needed.

    .venv/bin/python benchmarks/floor_margin.py fixtures/ledgers/h200_campaign.jsonl \\
        --out docs/benchmarks/floor_margin_h200_s43.json
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from measurement.harness.rules import IMPOSSIBLE_MARGIN, counted_overhead  # noqa: E402


def margins(median: float, overhead: float, floor: float) -> tuple[float, float]:
    """(now, before): the variant's work over the rule's line; `floor` is the copy's time for its bytes."""
    taken = counted_overhead(overhead, floor)
    line_now = IMPOSSIBLE_MARGIN * (floor - taken)
    return (median - taken) / line_now if line_now > 0 else float("inf"), (median - taken) / (IMPOSSIBLE_MARGIN * floor)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("export")
    parser.add_argument("--out", required=True)
    parser.add_argument("--nearest", type=int, default=20, help="rows to keep, nearest the line first (by the old rule)")
    options = parser.parse_args()
    rows = []
    with open(options.export, encoding="utf-8") as lines:
        for line in lines:
            event = json.loads(line)
            if event["type"] != "CandidateMeasured" or not event["payload"].get("launch_overhead"):
                continue
            payload = event["payload"]
            for variant in payload["variants"]:
                timing = variant.get("timing") or {}
                if not timing.get("median") or not timing.get("fraction_of_copy"):
                    continue
                median, overhead = timing["median"], payload["launch_overhead"]
                floor = median * timing["fraction_of_copy"]  # compulsory bytes / copy bandwidth
                now, before = margins(median, overhead, floor)
                rows.append({"position": event["position"], "case": payload["case"], "variant": variant["name"],
                             "median_us": round(median * 1e6, 3), "launch_overhead_us": round(overhead * 1e6, 3),
                             "copy_us": round(floor * 1e6, 3), "percent_of_copy": round(100 * timing["fraction_of_copy"], 1),
                             "margin_now": round(now, 3), "margin_before": round(before, 3)})
    rows.sort(key=lambda row: row["margin_before"])
    result = {"command": " ".join(sys.argv), "variants": len(rows),
              "impossible_now": sum(row["margin_now"] < 1 for row in rows),
              "impossible_before": sum(row["margin_before"] < 1 for row in rows),
              "within_5_percent_before": sum(row["margin_before"] < 1.05 for row in rows),
              "within_5_percent_now": sum(row["margin_now"] < 1.05 for row in rows),
              "nearest": rows[: options.nearest]}
    Path(options.out).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print({k: v for k, v in result.items() if k != "nearest"})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
