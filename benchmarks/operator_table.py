#!/usr/bin/env python
"""The operator table of a matrix, generated from a ledger export alone (JSON Lines).

Why: a headline number about the operators (how many cases are admitted, how close the
memory-bound kernels come to the copy bandwidth, the speedups over the public bound) must be
traceable to the events that measured it, and must move when the ledger revises a result. So
nothing here is typed by hand or read from a database: every number comes from the export's
events (CaseDefined, GateVerdict and the CandidateMeasured it names, the forge's rounds,
PerfLogged, CellSealed, CaseConverged, and the revisions ResultDowngraded / ResultRetracted),
and the committed markdown is checked to be exactly what this script prints.

How:

    .venv/bin/python benchmarks/operator_table.py docs/benchmarks/forge_h200_levers.jsonl \\
        --out docs/benchmarks/h200_operator_table.md
    .venv/bin/python benchmarks/operator_table.py docs/benchmarks/forge_h200_levers.jsonl \\
        --check docs/benchmarks/h200_operator_table.md     # exit 1 when the file is not what it prints

The export's hash chain is verified first (`ledger.verify_export`; `--unverified` skips it).
The rows are the cases named by the export's CaseDefined events, in their order (`--matrix gpu`:
the cases of fixtures/matrices/gpu.json instead); a case without an admitted result still gets
its row. Per case: the current status (the latest admitted GateVerdict, then any revision
that revises it and any re-run verdict), the kernel (round subject, proposer, source sha256),
the candidate's median, its fraction of the copy bandwidth measured in the same run, its speedup
over each public baseline timed in that same CandidateMeasured, the speedup over the bound with
the gate's 95% CI, same- or mixed-precision, the arithmetic-intensity class and the diagnosis.
Then a summary against the targets, beside the matrix its edge shapes (cases gated with a matrix
case's kernel and no round: EdgeShapeMeasured, forge/edges.py; never rows of the matrix), each
case's rounds, the refuted directions and, when the export holds re-run verdicts, the whole-matrix
re-run.

Only the machine model is computed rather than measured: the FP32 peak is sm_count x 128 FP32
lanes x 2 (FMA) x the maximum SM clock of the recorded description, for compute capability 9.0
only (otherwise the classification is "unknown"); the copy bandwidth of the balance is the
median of the copy measurements in the export. Needs no Django and no database.

The parts: operator_table_export (reading the export, replaying the results),
operator_table_rows (the machine model, the ceilings, the cells of a row), operator_table_render
(header, summary, per-case table), operator_table_edges (the edge shapes), operator_table_history
(rounds, refuted directions, re-run);
here: the command line and the assembly of the sections.
"""
from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for _path in (str(HERE), str(ROOT)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from ledger.verify_export import ExportError  # noqa: E402
from operator_table_edges import edges_section  # noqa: E402
from operator_table_export import Export, load  # noqa: E402
from operator_table_history import refuted_section, regate_section, rerun_section, rounds_section  # noqa: E402
from operator_table_render import case_table, display, header, summary  # noqa: E402
from operator_table_rows import machine  # noqa: E402


def command_text(export: Export, matrix: str | None, backend: str | None) -> str:
    parts = [".venv/bin/python benchmarks/operator_table.py", display(export.path)]
    if matrix:
        parts.append(f"--matrix {matrix}")
    if backend:
        parts.append(f"--backend {backend}")
    return " ".join(parts)


def render(path: Path, matrix: str | None = None, backend: str | None = None, verify: bool = True) -> str:
    export = load(path, matrix, backend, verify)
    mach = machine(export)
    lines = (header(export, command_text(export, matrix, backend)) + summary(export, mach) + case_table(export, mach)
             + edges_section(export) + rounds_section(export) + refuted_section(export) + rerun_section(export) + regate_section(export))
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("export", help="the ledger export (JSON Lines)")
    parser.add_argument("--matrix", help="rows: the cases of fixtures/matrices/NAME.json (default: the export's CaseDefined)")
    parser.add_argument("--backend", choices=["cpu", "cuda"], help="default: the backend of the latest CandidateMeasured")
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--out", help="write the markdown here (default: stdout)")
    output.add_argument("--check", metavar="FILE", help="exit 1 when FILE differs from what would be generated")
    parser.add_argument("--unverified", action="store_true", help="skip the export's hash-chain verification")
    options = parser.parse_args(argv)
    try:
        text = render(Path(options.export), options.matrix, options.backend, not options.unverified)
    except ExportError as error:
        print(f"{options.export}: the export does not verify: {error}", file=sys.stderr)
        return 2
    if options.check:
        target = Path(options.check)
        current = target.read_text(encoding="utf-8") if target.is_file() else ""
        if current == text:
            print(f"{target}: up to date with {options.export}")
            return 0
        diff = difflib.unified_diff(current.splitlines(), text.splitlines(), str(target), "generated", lineterm="", n=1)
        print(f"{target}: differs from what {options.export} generates:", file=sys.stderr)
        print("\n".join(list(diff)[:60]), file=sys.stderr)
        return 1
    if options.out:
        Path(options.out).parent.mkdir(parents=True, exist_ok=True)
        Path(options.out).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
