#!/usr/bin/env python
"""The public baselines of the GPU matrix, read from the events of a signed ledger export.

Why: the H200 re-gate of issue 15 timed every public baseline of each case (the fair
straightforward kernel, the historical scalar f16 one, Halide with its tuned schedule, the composed
bounds of the temporal cases, cupyx, pystencils, torch) in the same interleaved passes as the
standing kernel, and recorded them in the gate's CandidateMeasured events. Those are the baselines
the verdicts rest on, so docs/benchmarks/baselines_h200.{json,md} are read from them rather than
from a separate device run (benchmarks/baselines_matrix.py), and need no GPU to regenerate:

    .venv/bin/python benchmarks/baselines_from_export.py fixtures/ledgers/h200_campaign.jsonl \\
        --out docs/benchmarks/baselines_h200.json --table docs/benchmarks/baselines_h200.md
    ... the same with --check: exit 1 when either file is not what the export gives

The export is verified first (`ledger.verify_export`: the hash chain, every checkpoint's signature,
and a last line that is a checkpoint of the head signed by a key of fixtures/keys/trusted_keys.txt);
an export that does not verify is refused, nothing written. Per case of the matrix
(fixtures/matrices/gpu.json) it takes the latest CandidateMeasured of a gate re-run (hypothesis
RERUN) that timed every baseline (none `left_out`: measurement.contenders), latest by the time of record: the origin's `recorded_at` for an imported event, else its
own. The JSON has the schema baselines_matrix.py writes (baselines_entry.py; compulsory bytes and
flops from the case's CaseDefined), each case with the event it was read from, and a `source` block
(the export, its head, the command) that the table's header reports.
"""
from __future__ import annotations

import argparse
import difflib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(1, str(ROOT))  # the ledger and measurement packages; this folder is sys.path[0] when run as a script

from baselines_entry import case_entry  # noqa: E402
from baselines_matrix import matrix_cases  # noqa: E402
from baselines_table import table  # noqa: E402
from operator_table_render import display  # noqa: E402

from ledger.trust import DEFAULT_KEYS_FILE, TrustError, fingerprint, trusted_keys  # noqa: E402
from ledger.verify_export import ExportError, read_export, require_signed_head, verify_export  # noqa: E402

DEFAULT_EXPORT = ROOT / "fixtures" / "ledgers" / "h200_campaign.jsonl"
RERUN = "gate re-run of the admitted kernel"  # the hypothesis measurement/reruns.py records
PREVIOUS = ("Until the re-gate, baselines_h200.{json,md} held a `benchmarks/baselines_matrix.py` device run of "
            "2026-11-29/30 (four baselines: the straightforward kernel, scalar in f16, cupyx.ndimage, pystencils and "
            "torch.conv; no Halide, no composed bound; and a repeatability probe); it is in git history: "
            "`git show f92837b:docs/benchmarks/baselines_h200.md`.")


class Refused(Exception):
    """The export cannot be trusted, or holds nothing to read."""


def time_of_record(event: dict) -> str:
    return (event.get("origin") or {}).get("recorded_at") or event["recorded_at"]


def verified_events(path: Path) -> tuple[list[dict], dict]:
    try:
        summary = verify_export(read_export(path), keep_events=True)
        require_signed_head(summary, trusted_keys([], [DEFAULT_KEYS_FILE]))
    except (OSError, TrustError, ExportError) as error:
        raise Refused(f"{path}: refused, the export does not verify against {display(DEFAULT_KEYS_FILE)}: {error}") from None
    signed = summary.signed_head
    return summary.events_list, {
        "export": display(path),
        "ledger_id": summary.ledger_id,
        "events": summary.events,
        "head_hash": summary.head_hash,
        "verified": f"hash chain and signatures verified by `ledger.verify_export`, head signed by trusted key "
                    f"{fingerprint(signed.public_key)}",
    }


def build(path: Path, command: str) -> dict:
    events, source = verified_events(path)
    defined = {}
    latest: dict[str, dict] = {}
    for event in events:
        payload = event["payload"]
        if event["type"] == "CaseDefined":
            defined.setdefault(payload["case"], payload)
        elif (event["type"] == "CandidateMeasured" and payload.get("hypothesis") == RERUN
              and not payload["description"].get("left_out")):  # one that timed every baseline
            current = latest.get(payload["case"])
            if current is None or time_of_record(event) >= time_of_record(current):
                latest[payload["case"]] = event
    order = matrix_cases()
    chosen = [latest[case] for case in order if case in latest]
    if not chosen:
        raise Refused(f"{path}: no CandidateMeasured of a gate re-run ('{RERUN}') for a case of the gpu matrix")
    cases = {}
    for event in chosen:
        payload, case = event["payload"], defined[event["payload"]["case"]]
        cases[case["case"]] = case_entry(payload, compulsory_bytes=case["compulsory_bytes"], flops=case["flops"]) | {
            "event": {"position": event["position"], "event_id": event["event_id"], "recorded_at": time_of_record(event),
                      "ledger_id": (event.get("origin") or {}).get("ledger_id") or source["ledger_id"]},
        }
    last = max(chosen, key=time_of_record)["payload"]
    device = {k: v for k, v in last["description"].items() if k not in ("identities", "precisions", "baseline_seconds")}
    selection = (f"the latest CandidateMeasured whose hypothesis is \"{RERUN}\" and that left no baseline out "
                 "(by time of record), its public "
                 "baselines only (the standing kernel's verdicts are in h200_operator_table.md)")
    return {"matrix": "gpu", "source": source | {"selection": selection, "command": command, "previous": PREVIOUS},
            "protocol": last["protocol"], "matrix_order": order, "device": device, "cases": cases}


def outputs(data: dict) -> dict[str, str]:
    return {"json": json.dumps(data, indent=1) + "\n", "table": table(data) + "\n"}


def check(targets: dict[str, Path], texts: dict[str, str]) -> int:
    stale = 0
    for kind, target in targets.items():
        current = target.read_text(encoding="utf-8") if target.is_file() else ""
        if current == texts[kind]:
            print(f"{target}: up to date")
            continue
        stale += 1
        diff = difflib.unified_diff(current.splitlines(), texts[kind].splitlines(), str(target), "generated", lineterm="", n=1)
        print(f"{target}: differs from what the export gives:", file=sys.stderr)
        print("\n".join(list(diff)[:40]), file=sys.stderr)
    return 1 if stale else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("export", nargs="?", default=str(DEFAULT_EXPORT), help="the signed ledger export (JSON Lines)")
    parser.add_argument("--out", required=True, help="the JSON to write")
    parser.add_argument("--table", required=True, help="the markdown to write")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when --out or --table differs")
    options = parser.parse_args(argv)
    targets = {"json": Path(options.out), "table": Path(options.table)}
    command = (f".venv/bin/python benchmarks/baselines_from_export.py {display(Path(options.export))} "
               f"--out {display(targets['json'])} --table {display(targets['table'])}")
    try:
        texts = outputs(build(Path(options.export), command))
    except Refused as error:
        print(error, file=sys.stderr)
        return 2
    if options.check:
        return check(targets, texts)
    for kind, target in targets.items():
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(texts[kind], encoding="utf-8")
        print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
