#!/usr/bin/env python
"""Which blocks, ring and chunk of `tcq` (forge/handwritten_tensor.py: the in-plane products of box_R and star_R f16
on the tensor cores) to submit for a case, and how it stands against the case's bound and admitted kernel before any
round is spent.

One process, interleaved passes, L2 flushed (benchmarks/handwritten_sweep.py's `sweep_case`): the straightforward
kernel (the fair f16 kernel, the bound of every f16 case), the case's latest admitted kernel from `--admitted`, and
`tcq` in blocks of 4 x 2, 8 x 1, 2 x 4, 4 x 4 and 8 x 2 warps at 3 and 4 shared planes and the default chunk, then
the best of those at half and twice the chunk; for box_2 each also with every |dz| > 0 product straight into both its
queue slots (`direct`: 20 more MMAs a plane, 32 fewer adds a lane); each with its copies through L1 (`ca`) and
not (`cg`). A variant whose output differs from the
straightforward kernel's is reported, not timed; the gate does the real checks.

On the device machine (docs/gpu.md):

    source scripts/device_env.sh && python3 benchmarks/tensor_sweep.py --admitted /tmp/prev.jsonl \\
        --cases star_4/512x512x512/f16,box_1/512x512x512/f16,box_2/512x512x512/f16,star_1/512x512x512/f16,\\
               star_1/64x1024x1024/f16,varcoef_star_1/512x512x512/f16,box2d_1/8192x8192/f16,star2d_1/16384x16384/f16 \\
        --out $OUT/tensor_sweep_h200.json
"""
from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
for _path in (str(HERE), str(HERE.parent)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from handwritten_sweep import with_admitted, sweep_case, sweep_main  # noqa: E402
from forge.handwritten_tensor import default_chunk, render  # noqa: E402
from measurement.harness.cases import parse_case  # noqa: E402

BLOCKS = ((4, 2), (8, 1), (2, 4), (4, 4), (8, 2))


def variants(case, chunks: dict[tuple[int, int], list[int]] | None = None) -> list[tuple[str, dict]]:
    """(label, render parameters) of every block shape at 3 and 4 planes, at the chunks `chunks` gives a block shape
    (default: its `default_chunk`); for box_2 also `direct`. A 2-D case: one plane a block, so one buffer, and also
    blocks of 32 warps."""
    made: list[tuple[str, dict]] = []
    directs = (None, True) if case.stencil.family == "box" and case.stencil.radius == 2 and case.stencil.dims == 3 else (None,)
    flat = case.stencil.dims == 2  # one plane a block: one buffer, no chunk to vary
    for wx, wy in BLOCKS + ((8, 4), (4, 8)) if flat else BLOCKS:
        for chunk in (chunks or {}).get((wx, wy), [default_chunk(case, wx, wy)]):
            for stages in (2,) if flat else (3, 4):
                for direct in directs:
                    for cache in ("cg", "ca"):
                        made.append((f"tcq {wx}x{wy} L{chunk} nb{stages}{' direct' if direct else ''} {cache}",
                                     {"warps_x": wx, "warps_y": wy, "chunk": chunk, "stages": stages, "direct": direct,
                                      "cache": cache}))
    return made


def sweep_tensor(backend, case_id: str, passes: int, launches: int, admitted=None) -> tuple[dict, str]:
    """`variants` beside the straightforward and admitted kernels; then the fastest variant's block shape again at half
    and twice its chunk, in a second row of its own."""
    case = parse_case(case_id)
    row = sweep_case(backend, case_id, passes, launches, [(*v, render) for v in variants(case)] + with_admitted([], admitted))
    best = row["best"]
    if best and best != "admitted":
        p = row["variants"][best]["parameters"]
        lengths = [c for c in (p["chunk"] // 2, p["chunk"] * 2) if 4 <= c < case.shape[0]] if case.stencil.dims == 3 else []
        more = [(label, q) for label, q in variants(case, {(p["warps_x"], p["warps_y"]): lengths})
                if q["stages"] == p["stages"] and q["direct"] == p["direct"] and q["cache"] == p["cache"]]
        if more:
            again = sweep_case(backend, case_id, passes, launches, [(*v, render) for v in more] + [(best, p, render)]
                               + with_admitted([], admitted))
            row["chunks"] = again
    admitted_ms = row["variants"].get("admitted", {}).get("median_ms")
    top = row["variants"].get(best, {})
    versus = f", {round(admitted_ms / top['median_ms'], 3)}x admitted" if admitted_ms and top else ""
    return row, (f"best {best} {top.get('percent_of_copy')}% of copy, {top.get('x_straightforward')}x straightforward"
                 f"{versus}, rejected {sorted(row['rejected'])}")


def main() -> int:
    return sweep_main(__doc__.splitlines()[0], "comma-separated case ids: box_1, box_2, star_R, varcoef_star_1, box2d_1, star2d_1 (f16)", sweep_tensor,
                      {"tensor": sweep_tensor})


if __name__ == "__main__":
    raise SystemExit(main())
