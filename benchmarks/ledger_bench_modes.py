"""The append-only modes of benchmarks/ledger_bench.py (--append-ratio, --append-profile,
--append-costs, --append-writers, --append-versus): each fills the ledger to --ratio-at events,
runs its module and adds the run to its own results file; ledger_bench.py keeps the throughput,
fill and verify benchmark and the command line."""
from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from pathlib import Path

from ledger_bench_measure import fill
from ledger_bench_setup import Workload, log


def append_mode(args, workload: Workload, run_id: str, run_facts: dict) -> int:
    """The one mode the arguments name, on the ledger filled to --ratio-at events."""
    fill(workload, args.ratio_at, args.batch_size, time.monotonic() + args.max_fill_minutes * 60)
    at_size = {**run_facts, "ledger_events_before": args.ratio_at}
    if args.append_ratio:
        from ledger_bench_ratio import interleaved_rounds, write

        result = interleaved_rounds(workload, url=args.pg_url, rounds=args.ratio_rounds, per_round=args.ratio_appends,
                                    profile_dir=args.profile)
        _record(args, write, args.ratio_out, run_id, {**run_facts, **result})
        log(json.dumps({k: result[k] for k in ("appends_per_s", "raw_commits_per_s", "ratio_appends_to_raw_commits")}))
    elif args.append_profile:
        from ledger_bench_profile import profile_appends, write

        result = profile_appends(workload, rounds=args.profile_rounds, per_round=args.profile_appends)
        _record(args, write, args.profile_out, run_id, {**at_size, **result})
        log(json.dumps({"plain": result["plain"], "components": result["profiled"]["components"]}, indent=1))
    elif args.append_costs:
        from ledger_bench_costs import append_costs, write

        result = append_costs(workload, appends=args.costs_appends)
        _record(args, write, args.costs_out, run_id, {**at_size, **result})
        log(json.dumps(result, indent=1))
    else:
        from ledger_bench_writers import write, writer_rounds

        result = writer_rounds(workload, url=args.pg_url, writers=args.append_writers, rounds=args.writers_rounds,
                               seconds=args.writers_seconds, raw_seconds=args.writers_raw_seconds,
                               paths=args.writers_paths)
        _record(args, write, args.writers_out, run_id, {**run_facts, **result})
        log(json.dumps({f"{path} {n}": spread["median"] for path, by_n in result["by_path"].items()
                        for n, spread in by_n.items()}, indent=1))
        return 0 if result["verify"]["ok"] else 1
    return 0


def append_versus(args, command: str) -> int:
    from ledger_bench_versus import compare, write

    run_id = f"postgres-{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%SZ')}"
    log(f"ledger bench {run_id}: {command}")
    run = compare(args, command)
    _record(args, write, args.versus_out, run_id, run)
    log(json.dumps(run["median"]))
    return 0


def _record(args, write, out: Path, run_id: str, run: dict) -> None:
    if not args.no_write:
        write(out, run_id, run)
        log(f"run added to {out}")
