"""How long importing a shipped export into a new ledger takes, and where its CPU goes.

Tests and `./dev run`'s seed import fixtures/ledgers/h200_campaign.jsonl (4,126 events) again and again, and
session 38 found the suite CPU-bound (docs/testing.md). Each import runs in a child of its own on a fresh scratch
ledger (SQLite unless DATABASE_URL says otherwise; importing twice into one ledger adds nothing, so it would
measure another path): one plain (wall and CPU seconds), one under cProfile, its CPU split by component as
benchmarks/ledger_bench_profile.py splits an append's (read the shares as an ordering: cProfile charges every
Python call a fixed overhead).

    .venv/bin/python benchmarks/ledger_import_time.py fixtures/ledgers/h200_campaign.jsonl --out OUT.json
"""
from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import subprocess
import sys
import time
from pathlib import Path

from ledger_bench_profile import shares
from scratch_ledger import setup_django


def import_once(path: Path, profiled: bool) -> dict:
    setup_django("import-time")
    from django.core.management import call_command

    from ledger.transfer import import_ledger

    call_command("ledger", "init", stdout=open(os.devnull, "w"))
    profiler = cProfile.Profile(time.process_time)
    before, started = os.times(), time.perf_counter()
    if profiled:
        profiler.enable()
    new, present = import_ledger(path, "user:benchmark")
    if profiled:
        profiler.disable()
    wall, after = time.perf_counter() - started, os.times()
    result = {"events_imported": new, "already_present": present, "wall_s": round(wall, 2),
              "cpu_s": round(after.user - before.user + after.system - before.system, 2)}
    if profiled:
        result["profile"] = shares(pstats.Stats(profiler), new)  # "appends" there: the events imported
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("export", type=Path)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--child", choices=["plain", "profiled"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(import_once(args.export.resolve(), args.child == "profiled")))
        return
    runs = {}
    for mode in ("plain", "profiled"):
        done = subprocess.run([sys.executable, __file__, str(args.export), "--child", mode],
                              capture_output=True, text=True, check=True)
        runs[mode] = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"{mode}: {runs[mode]['events_imported']} events in {runs[mode]['wall_s']} s", file=sys.stderr)
    report = {"command": "python benchmarks/ledger_import_time.py " + " ".join(sys.argv[1:]),
              "export": str(args.export), "database": os.environ.get("DATABASE_URL", "sqlite (default)"),
              "load_average_1min": round(os.getloadavg()[0], 2), **runs}
    text = json.dumps(report, indent=1)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
