#!/usr/bin/env python
"""How many instructions a point session 37's designs issue, counted in their SASS (benchmarks/sass_count.py's
compiler and loop counter): `tcq` (forge/handwritten_tensor.py) against its main loop's per-half fallbacks left out,
and `pipe` (forge/handwritten_temporal.py) as gated and with `pair`; cpipe's `signal` (forge/handwritten_cluster.py)
only its registers and spills. The counts docs/forge.md quotes are this
script's JSON; no GPU is needed (nvcc here, nvdisasm from the `nvidia-cuda-nvdisasm` wheel).

    .venv/bin/python benchmarks/sass_designs.py --nvdisasm /tmp/nvd/x/nvidia/cu13/bin/nvdisasm \\
        --out docs/benchmarks/sass_designs_s37.json

Per point: a loop's instructions over the points its body computes. `tcq`: 8 points a lane a plane, the plane loop
unrolled 2RZ + 1 times (RZ the z radius, 0 in 2-D), so its biggest loop is 8 (2RZ + 1) points. `pipe`: 4 points a
lane, T steps an iteration; a loop's iterations are read from its FADDs (five a point and step: the step's sum), so
the paired march's fill and steady loops are told apart (the steady loop holds two iterations). Where several
spans of different lengths hold the same iterations (skipped warps branch back inside the body), no figure is given.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sass_count import count  # noqa: E402
from forge.handwritten_cluster import render_cluster_pipe  # noqa: E402
from forge.handwritten_temporal import render_pipe  # noqa: E402
from forge.handwritten_tensor import render as render_tensor, z_radius  # noqa: E402
from measurement.harness.cases import parse_case  # noqa: E402

TCQ = ["star_1/512x512x512/f16", "box_1/512x512x512/f16", "star_4/512x512x512/f16", "box_2/512x512x512/f16",
       "varcoef_star_1/512x512x512/f16", "box2d_1/8192x8192/f16", "star2d_1/16384x16384/f16"]
PIPE = [("diamond_ts4/512x512x512/f32", 96, 32, 256, False, True), ("diamond_ts4/512x512x512/f32", 64, 32, 256, True, True),
        ("diamond_ts8/512x512x512/f32", 64, 32, 128, True, False)]


def aligned_paths(source: str) -> str:
    """`tcq`'s source without its per-half fallbacks (the edge tiles' copies and stores): what an interior block runs."""
    for opening, closing in (("            } else if (cell < CELLS) {", "            }\n        }\n    };"),
                             ("                    } else {\n                        const int gy",
                              "                    }\n                }\n        }")):
        start = source.index(opening)
        source = source[:start] + source[source.index(closing, start):]
    return source


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nvdisasm", default="nvdisasm")
    parser.add_argument("--out", required=True)
    options = parser.parse_args()
    result: dict = {"command": " ".join(sys.argv), "tcq": [], "pipe": [], "cpipe_signal": []}
    for case_id in TCQ:
        case = parse_case(case_id)
        flat = case.stencil.dims == 2
        source, _, _ = render_tensor(case, 4, 2, 1 if flat else None, 2 if flat else 4)
        counted = count(aligned_paths(source), options.nvdisasm)
        counted["registers_as_rendered"] = count(source, options.nvdisasm)["registers"]
        biggest = max(counted["loops"], key=lambda loop: loop["instructions"])
        counted["per_point"] = round(biggest["instructions"] / (8 * (2 * z_radius(case) + 1)), 1)
        result["tcq"].append({"case": case_id, "blocks": "4 x 2 warps", **counted})
        print(f"tcq {case_id}: {counted['per_point']} a point, {counted['registers_as_rendered']} registers", file=sys.stderr)
    for case_id, width, height, chunk, shuffle, skip in PIPE:
        case = parse_case(case_id)
        t = case.stencil.time_steps
        for pair in (False, True):
            counted = count(render_pipe(case, width, height, chunk, shuffle=shuffle, skip=skip, pair=pair)[0],
                            options.nvdisasm)
            for loop in counted["loops"]:
                loop["iterations"] = loop["opcodes"].get("FADD", 0) / (5 * 4 * t)
            most = max(loop["iterations"] for loop in counted["loops"] if loop["iterations"] <= 1 + pair)
            spans = {loop["instructions"] for loop in counted["loops"] if loop["iterations"] == most}
            # one span: the loop; several of the same iterations (warps skipping steps branch back inside the
            # body): which is the loop is not read here, so no figure
            counted["per_point_and_step"] = round(spans.pop() / (most * 4 * t), 1) if len(spans) == 1 else None
            result["pipe"].append({"case": case_id, "tile": [width, height], "chunk": chunk, "shuffle": shuffle,
                                   "skip": skip, "pair": pair, **counted})
            print(f"pipe {case_id} {width}x{height} pair={pair}: {counted['per_point_and_step']} a point and step",
                  file=sys.stderr)
    case = parse_case("diamond_ts8/512x512x512/f32")
    for width, height in ((64, 16), (64, 32), (128, 16)):
        for pair in (False, True):
            counted = count(render_cluster_pipe(case, width, height, 4, 256, exchange="signal", pair=pair)[0],
                            options.nvdisasm)
            result["cpipe_signal"].append({"case": case.id, "block": [width, height], "cluster": 4, "pair": pair,
                                           "registers": counted["registers"],
                                           "spill_store_bytes": counted["spill_store_bytes"]})
    Path(options.out).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
