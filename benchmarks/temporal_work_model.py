"""Why no 3.5-D pipeline of diamond_ts8 beats two launches of the ts4 pipeline: the on-chip work a useful point-step,
modelled, for the best tile each design's on-chip storage allows.

The composed bound of diamond_ts8 is two launches of the admitted ts4 kernel, and that kernel runs at 32-38% of the
copy's bandwidth on the H200 (docs/benchmarks/h200_operator_table.md): its time is on-chip work, not DRAM. A fused
T-step pipeline saves DRAM traffic, which the bound does not spend, and pays for it in redundant halo work: step s of
a W x H input tile computes (W - 2s)(H - 2s) points for (W - 2T)(H - 2T) outputs (x halo rounded up to whole vectors).
So at equal cost a computed point-step, ts8 beats two ts4 launches only if its redundancy is below ts4's, and the
tile that sets it is capped by what a block can hold on chip:

* `pipe` as built (forge/handwritten_temporal.py): a register queue of 2T planes (`registers_per_thread`), T
  double-buffered shared planes (`shared_bytes`), at most 1,024 threads of 4 x points, one block an SM;
* `least state`: any design that keeps 3 planes a step (the two z neighbours and the shared in-plane plane), 3T floats
  a point and nothing else, in all 256 KiB of registers and 227 KiB of shared memory an SM together.

and, beside them, the tiles of the ts4 kernels the export admitted last (their launch's block: V x points a thread).

    python3 benchmarks/temporal_work_model.py [--export fixtures/ledgers/h200_campaign.jsonl] [--out FILE.json]

A model: the ratios it prints are ceilings under its assumption (equal cost a computed point-step), not measurements."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from forge.handwritten_temporal import REGISTER_FILE, SHARED_LIMIT, V, registers_per_thread, shared_bytes, x_halo  # noqa: E402
from handwritten_sweep import admitted_kernels  # noqa: E402

FLOAT = 4


def redundancy(t: int, width: int, height: int) -> float:
    """Points computed over all T steps, a useful output point-step (each step computing only what later steps need)."""
    out = (width - 2 * x_halo(t)) * (height - 2 * t)
    return sum((width - 2 * s) * (height - 2 * s) for s in range(1, t + 1)) / (t * out)


def fits_pipe(t: int, width: int, height: int) -> bool:
    threads = width // V * height
    return threads <= 1024 and threads * registers_per_thread(t) <= REGISTER_FILE and shared_bytes(t, width, height) <= SHARED_LIMIT


def fits_least_state(t: int, width: int, height: int) -> bool:
    return width * height * 3 * t * FLOAT <= REGISTER_FILE * FLOAT + SHARED_LIMIT


def best_tile(t: int, fits) -> dict:
    """The tile of least redundancy among those that fit (widths in whole vectors)."""
    tiles = [(redundancy(t, w, h), w, h) for w in range(2 * x_halo(t) + V, 1025, V) for h in range(2 * t + 1, 513)
             if fits(t, w, h)]
    least, width, height = min(tiles)
    return {"tile": [width, height], "redundancy": round(least, 3)}


def admitted_ts4_tiles(export: Path) -> dict[str, list[int]]:
    """Each diamond_ts4 case's tile (W, H) in the latest admitted GateVerdict of a ledger export (V x points a thread)."""
    return {case: [launch["block"][0] * V, launch["block"][1]]
            for case, (_source, launch) in admitted_kernels(str(export)).items() if case.startswith("diamond_ts4/")}


def model(export: Path) -> dict:
    designs = {"pipe": fits_pipe, "least_state": fits_least_state}
    tiles = {name: {f"T={t}": best_tile(t, fits) for t in (4, 8)} for name, fits in designs.items()}
    ceilings = {name: round(tiles[name]["T=4"]["redundancy"] / tiles[name]["T=8"]["redundancy"], 3) for name in designs}
    least_ts8 = tiles["least_state"]["T=8"]["redundancy"]
    admitted = {case: {"tile": tile, "redundancy": round(redundancy(4, *tile), 3),
                       "ts8_least_state_over_two_launches": round(redundancy(4, *tile) / least_ts8, 3)}
                for case, tile in sorted(admitted_ts4_tiles(export).items())}
    return {"command": " ".join(sys.argv), "what": __doc__.splitlines()[0], "best_tiles": tiles,
            "ts8_over_two_ts4_launches_at_equal_cost_a_point_step": ceilings, "admitted_ts4": admitted}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--export", type=Path, default=Path("fixtures/ledgers/h200_campaign.jsonl"),
                        help="the ledger export whose admitted ts4 tiles to compare (default: the shipped H200 export)")
    parser.add_argument("--out", help="also write the JSON here")
    options = parser.parse_args()
    if not options.export.is_file():
        parser.error(f"{options.export}: no such ledger export")
    result = model(options.export)
    text = json.dumps(result, indent=1) + "\n"
    if options.out:
        Path(options.out).write_text(text, encoding="utf-8")
    print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
