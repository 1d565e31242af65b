#!/usr/bin/env python
"""How many instructions a plane costs a hand-written plane-queue kernel (forge/handwritten.py),
counted in its SASS: the f16 cases are issue-bound (docs/forge.md, scripts/f16_ncu.sh), so the
instructions of the hot loop say what a change can gain before any device time is spent.

Each variant is rendered, compiled for sm_90 (`nvcc -cubin -Xptxas -v`: the registers a thread)
and disassembled (`nvdisasm`); a loop is the span from a label to a branch back to it, and its
instructions are counted by opcode. A predicated instruction counts whether or not its predicate
holds: the scheduler issues it either way. Needs nvcc and nvdisasm (on the device machine both
are there; here `pip install nvidia-cuda-nvdisasm` gives nvdisasm, `--nvdisasm` names it).

    python benchmarks/sass_count.py --cases star_1/512x512x512/f16 --out docs/benchmarks/sass_f16_s30.json

`--family bounds` counts the variants of handwritten_sweep.py's `--family bounds` instead (session 45's `min_blocks`:
what the register cap costs in spills and instructions before the sweep times it), `--family ahead` those of its
`--family ahead` (session 46's L2 prefetch: what it costs a plane), `--family pipelined` those of its `--family pipelined`
(session 47's loads a plane ahead: the registers and instructions of the raw vectors).
"""
from __future__ import annotations

import argparse
import collections
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from forge.handwritten import render  # noqa: E402
from measurement.harness.cases import parse_case  # noqa: E402
from measurement.harness.codegen_f16 import straightforward_cuda_f16, vectorised  # noqa: E402
from sweep_variants import ahead_variants, bounds_variants, pipelined_variants  # noqa: E402

KERNELS = {"rows16": {"by": 8}, "short4": {"by": 4}, "rows8": {"by": 8, "vector_bytes": 8}}
CHANGES = {"": {}, "+split": {"split": True}, "+split+stride": {"split": True, "stride": True}}
FAMILIES = {"bounds": bounds_variants, "ahead": ahead_variants, "pipelined": pipelined_variants}


def loops(disassembly: str) -> list[dict]:
    """Every backward branch's span: its first and last instruction and the opcodes between."""
    instructions: list[tuple[str, str]] = []
    labels: dict[str, int] = {}
    for line in disassembly.splitlines():
        label = re.match(r"\s*(\.L_\w+):", line)
        if label:
            labels[label.group(1)] = len(instructions)
            continue
        found = re.search(r"/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;", line)
        if found:
            text = found.group(1)
            instructions.append((re.sub(r"^@!?U?P\w+\s+", "", text).split()[0], text))
    spans = []
    for index, (opcode, text) in enumerate(instructions):
        target = re.search(r"`\((\.L_\w+)\)", text) if opcode.startswith("BRA") else None
        if target and labels.get(target.group(1), index + 1) < index:
            body = instructions[labels[target.group(1)]:index + 1]
            spans.append({"instructions": len(body),
                          "opcodes": dict(collections.Counter(op for op, _ in body).most_common())})
    return spans


def count(source: str, nvdisasm: str) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        cu, cubin = Path(folder, "kernel.cu"), Path(folder, "kernel.cubin")
        cu.write_text(source, encoding="utf-8")
        built = subprocess.run(["nvcc", "-arch=sm_90", "-cubin", "-Xptxas", "-v", "-o", str(cubin), str(cu)],
                               capture_output=True, text=True, check=True)
        registers = int(re.search(r"Used (\d+) registers", built.stderr).group(1))
        disassembly = subprocess.run([nvdisasm, "-c", str(cubin)], capture_output=True, text=True, check=True).stdout
    spilled = int(re.search(r"(\d+) bytes spill stores", built.stderr).group(1))
    return {"registers": registers, "spill_store_bytes": spilled, "loops": loops(disassembly)}


def variants(case, family: str) -> list[tuple[str, dict]]:
    if family in FAMILIES:
        return FAMILIES[family](case)
    return [(kernel + change, {**parameters, **flags}) for kernel, parameters in KERNELS.items()
            if not (kernel == "rows8" and case.precision == "f64") for change, flags in CHANGES.items()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", required=True, help="comma-separated T = 1 case ids")
    parser.add_argument("--nvdisasm", default="nvdisasm")
    parser.add_argument("--out", required=True)
    parser.add_argument("--family", choices=["changes", *FAMILIES], default="changes",
                        help="changes: rows16, short4 and rows8 with split and stride (session 30); bounds: session 45's; "
                             "ahead: session 46's")
    options = parser.parse_args()
    result: dict = {"command": " ".join(sys.argv), "cases": []}
    for case_id in options.cases.split(","):
        case = parse_case(case_id)
        row: dict = {"case": case_id, "variants": {}}
        if vectorised(case):
            row["variants"]["straightforward"] = count(straightforward_cuda_f16(case), options.nvdisasm)
        for name, parameters in variants(case, options.family):
            source, launch, _ = render(case, **parameters)
            counted = count(source, options.nvdisasm)
            counted["points_a_loop_iteration"] = launch["tile"][0] // 32 * 2  # the plane loop is unrolled twice
            row["variants"][name] = counted
        for name, counted in row["variants"].items():
            spans = ", ".join(str(span["instructions"]) for span in counted["loops"] if span["instructions"] > 1)
            print(f"{case_id} {name}: {counted['registers']} registers, loops of {spans} instructions", file=sys.stderr)
        result["cases"].append(row)
    Path(options.out).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
