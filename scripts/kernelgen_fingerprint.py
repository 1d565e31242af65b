"""One hash over every source forge.kernelgen renders for a grid of plans, to show a refactor of the
generator changed nothing it writes (session 38 split forge/kernelgen.py into a package: the same
fingerprint before and after).

Every stencil type of the matrices (and diamond_ts1-4) in f16, f32 and f64, each with 512 CPU plans
(loop order, temporal scheme, classes, simd, restrict, collapse, schedule, threads, tiles) and 192
CUDA plans (block, z-march, shared tile, ldg, classes, vector width, temporal scheme): 27,456
renders, source and launch JSON. No compiler, no GPU, about 10 s.

    .venv/bin/python scripts/kernelgen_fingerprint.py [--out renders.json]

`--out` writes each render's own hash, keyed by case type, precision and plan, so two runs can be
diffed render by render when the fingerprints differ.
"""
from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from forge.kernelgen import Plan, render  # noqa: E402
from measurement.harness.cases import parse_case  # noqa: E402

TYPES = ("star_1", "star_2", "star_4", "box_1", "box_2", "star2d_1", "star2d_2", "box2d_1", "varcoef_star_1",
         "diamond_ts1", "diamond_ts2", "diamond_ts3", "diamond_ts4")


def cpu_plans() -> list[Plan]:
    grid = itertools.product(("zyx", "tiled"), ("sweeps", "blocked"), (False, True), (False, True), (False, True),
                             (1, 2), ("static", "guided"), (None, 3), ((0, 0, 0), (3, 5, 7)))
    return [Plan.default("cpu").with_(loop_order=order, temporal=temporal, unroll_classes=classes, simd=simd,
                                      restrict=restrict, collapse=collapse, schedule=schedule, threads=threads,
                                      block_z=tile[0], block_y=tile[1], block_x=tile[2])
            for order, temporal, classes, simd, restrict, collapse, schedule, threads, tile in grid]


def cuda_plans() -> list[Plan]:
    grid = itertools.product(((32, 8, 1), (64, 4, 2)), (0, 4), (False, True), (False, True), (False, True), (1, 2, 4),
                             ("composed", "march"))
    return [Plan.default("cuda").with_(block=block, z_march=march, smem_tile=smem, ldg=ldg, unroll_classes=classes,
                                       vector_x=vector, temporal=temporal)
            for block, march, smem, ldg, classes, vector, temporal in grid]


def renders() -> dict[str, str]:
    plans = cpu_plans() + cuda_plans()
    hashes = {}
    for type_name, precision in itertools.product(TYPES, ("f16", "f32", "f64")):
        case = parse_case(f"{type_name}/{'37x41' if '2d' in type_name else '19x21x23'}/{precision}")
        for plan in plans:
            kernel = render(case, plan=plan)
            text = kernel.source + json.dumps(kernel.launch, sort_keys=True)
            hashes[f"{type_name}/{precision}|{plan.to_json()}"] = hashlib.sha256(text.encode()).hexdigest()
    return hashes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="write each render's hash here (JSON)")
    args = parser.parse_args()
    hashes = renders()
    if args.out:
        args.out.write_text(json.dumps(hashes, sort_keys=True, indent=0) + "\n")
    fingerprint = hashlib.sha256(json.dumps(hashes, sort_keys=True).encode()).hexdigest()
    print(f"{len(hashes)} renders, fingerprint {fingerprint}")


if __name__ == "__main__":
    main()
