#!/usr/bin/env python
"""Benchmark the ledger: append throughput, fill to N events, verify and rebuild at N.

Standalone: it creates a fresh database (a new SQLite file in a temp dir, or a dropped and
recreated PostgreSQL database, default `ledger_bench` on 127.0.0.1), points DATABASE_URL at
it, sets up Django, migrates, initialises a ledger and then measures, in this order:

1. single appends: `append()` called sequentially, one transaction each, projections inline
   (default 5,000 appends, repeated 3 times, the median run kept);
2. batched appends: `append_many()` in batches of 500 (default 20,000 events, 3 times);
3. for every --events N (ascending): fill the ledger to N events with batched appends
   (progress on stderr), time `verify_ledger()` (report.ok must be True) and
   `rebuild_projections()`, then probe single and batched append throughput at that size.

With --append-ratio (PostgreSQL) it measures only single appends against the server's raw
one-row commit rate: fill to --ratio-at events (10,000), then interleave, one by one in one
process, durable one-row INSERT commits, the same INSERT behind an advisory lock in an explicit
transaction, and `append()` calls (benchmarks/ledger_bench_ratio.py); the run is added to
--ratio-out (docs/benchmarks/ledger_append_pg.json):

    .venv/bin/python benchmarks/ledger_bench.py --db postgres --append-ratio

With --append-costs (PostgreSQL) it times each round trip of an append (server CPU from the
backend's schedstat) and records the tables appends update (benchmarks/ledger_bench_costs.py);
the run is added to --costs-out
(docs/benchmarks/ledger_append_costs.json).

With --append-versus REF (PostgreSQL) it compares REF's ledger code with --snapshot's (default
HEAD): each in its own process and database, one append at a time in turns with raw and locked
commits (benchmarks/ledger_bench_versus.py); the run is added to --versus-out
(docs/benchmarks/ledger_append_versus.json):

    .venv/bin/python benchmarks/ledger_bench.py --db postgres --append-versus 559a9a5

With --append-writers [N,N...] (PostgreSQL; default 1,2,4) it runs N appending processes at
once for fixed windows, beside N parallel raw committers in the same rounds, and times the
appends' hold of the chain lock (benchmarks/ledger_bench_writers.py); the run is added to
--writers-out (docs/benchmarks/ledger_append_writers.json):

    .venv/bin/python benchmarks/ledger_bench.py --db postgres --append-writers 1,2,4 --snapshot HEAD

With --append-profile (PostgreSQL) it says where an append's client CPU goes: at the same size,
plain and cProfiled appends in turns (benchmarks/ledger_bench_profile.py); the run is added to
--profile-out (docs/benchmarks/ledger_append_profile.json):

    .venv/bin/python benchmarks/ledger_bench.py --db postgres --append-profile --snapshot HEAD

Every timed phase records wall time, this process's CPU time, the 1-minute load average and
(for appends) the SQL statements issued, by kind, with the time spent inside the driver.

Results are merged into the JSON file (--out) keyed by database and size, so SQLite and
PostgreSQL runs (or a 100k and a 1M run) can be done separately without overwriting each
other; a `targets` section is recomputed from whatever the file then holds.
`--table` prints the markdown table of docs/ledger_benchmarks.md from that JSON.

    .venv/bin/python benchmarks/ledger_bench.py --db postgres --snapshot --events 100000 --events 1000000 \
        --out docs/benchmarks/ledger.json
    .venv/bin/python benchmarks/ledger_bench.py --table --out docs/benchmarks/ledger.json

Useful options: --snapshot (benchmark a clean `git archive HEAD`, immune to edits of the
working tree during a long run), --profile DIR (cProfile dump + top functions per phase),
--no-write, --fill direct (reach a size by bulk-inserting sealed events without inline
projections, then rebuild; for when append_many cannot reach it in --max-fill-minutes).

The workload: events spread over 1,000 result streams ("case/<stencil>/<size>/<dtype>", mildly
skewed), 60% ResultDowngraded (result_status) and 40% AuditSignedOff (sign_offs), by a
handful of actors; deterministic (seeded).
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from ledger_bench_measure import (fill, fill_direct, measure_batched, measure_rebuild, measure_single, measure_verify,
                                  median_of, projection_rows)
from ledger_bench_modes import append_mode, append_versus
from ledger_bench_results import load_results, markdown_table, merge_and_write
from ledger_bench_setup import (ROOT, Workload, database_bytes, drop_database, event_count, log, machine_facts,
                                prepare_database, setup_django, snapshot)

DEFAULT_OUT = ROOT / "docs" / "benchmarks" / "ledger.json"
DEFAULT_RATIO_OUT = ROOT / "docs" / "benchmarks" / "ledger_append_pg.json"
DEFAULT_PROFILE_OUT = ROOT / "docs" / "benchmarks" / "ledger_append_profile.json"
DEFAULT_VERSUS_OUT = ROOT / "docs" / "benchmarks" / "ledger_append_versus.json"
DEFAULT_COSTS_OUT = ROOT / "docs" / "benchmarks" / "ledger_append_costs.json"
DEFAULT_WRITERS_OUT = ROOT / "docs" / "benchmarks" / "ledger_append_writers.json"
DEFAULT_PG_URL = "postgres://postgres@127.0.0.1:5432/ledger_bench"



def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", choices=["sqlite", "postgres"], help="which database to benchmark")
    parser.add_argument("--events", type=int, action="append", default=[],
                        help="ledger size at which to time verify and rebuild (repeatable; e.g. 100000 1000000)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="JSON file to merge results into")
    parser.add_argument("--table", action="store_true",
                        help="print the markdown tables from --out and --ratio-out and exit")
    parser.add_argument("--skip-throughput", action="store_true",
                        help="skip the single/batched append timings (keep those already in --out)")
    parser.add_argument("--single", type=int, default=5000, help="sequential append() calls to time")
    parser.add_argument("--batched", type=int, default=20000, help="events to append_many() for the batched timing")
    parser.add_argument("--batch-size", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=3, help="repetitions of each throughput timing (median kept)")
    parser.add_argument("--probe", type=int, default=1000,
                        help="single appends (and 5x as many batched) timed again at each size (0: skip)")
    parser.add_argument("--warmup", type=int, default=200, help="untimed appends before measuring")
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=20240611)
    parser.add_argument("--fill", choices=["append_many", "direct"], default="append_many",
                        help="how to reach each size: append_many (the real path, projections inline) or direct "
                             "(bulk insert of sealed events, then rebuild; for sizes append_many cannot reach in time)")
    parser.add_argument("--max-fill-minutes", type=float, default=25.0,
                        help="stop filling after this long (per database); verify/rebuild still run at the size reached")
    parser.add_argument("--pg-url", default=_default_pg_url(),
                        help="PostgreSQL database to DROP and recreate (default: DATABASE_URL when it names a "
                             f"PostgreSQL database, else {DEFAULT_PG_URL})")
    parser.add_argument("--force-drop", action="store_true", help="allow --pg-url names without 'bench'")
    parser.add_argument("--sqlite-path", help="SQLite file to (re)create (default: a temp dir)")
    parser.add_argument("--snapshot", metavar="GIT_REF", nargs="?", const="HEAD",
                        help="benchmark a clean `git archive` of GIT_REF (default HEAD) instead of the working tree")
    parser.add_argument("--tmp-dir", help="where temp dirs go (default: system temp)")
    parser.add_argument("--keep", action="store_true", help="keep the benchmark database afterwards")
    parser.add_argument("--debug", action="store_true", help="run with DEBUG on (query log); default off like production")
    parser.add_argument("--profile", type=Path, help="write cProfile dumps (.prof) and top-function text per phase here")
    parser.add_argument("--no-write", action="store_true", help="do not merge into --out (profiling runs)")
    parser.add_argument("--append-ratio", action="store_true",
                        help="only single appends against the raw commit rate, alternating (PostgreSQL; see above)")
    parser.add_argument("--ratio-at", type=int, default=10_000, help="ledger size before the paired rounds")
    parser.add_argument("--ratio-rounds", type=int, default=10, help="rounds (stretches that give the spread)")
    parser.add_argument("--ratio-appends", type=int, default=300,
                        help="appends per round (and as many raw and locked commits, interleaved)")
    parser.add_argument("--ratio-out", type=Path, default=DEFAULT_RATIO_OUT, help="JSON file the run is added to")
    parser.add_argument("--append-profile", action="store_true",
                        help="only where an append's client CPU goes (PostgreSQL, at --ratio-at events; "
                             "benchmarks/ledger_bench_profile.py); the run is added to --profile-out")
    parser.add_argument("--profile-rounds", type=int, default=5, help="rounds of plain and profiled appends")
    parser.add_argument("--profile-appends", type=int, default=600, help="appends per round, plain and profiled each")
    parser.add_argument("--profile-out", type=Path, default=DEFAULT_PROFILE_OUT,
                        help="JSON file the profile is added to")
    parser.add_argument("--append-costs", action="store_true",
                        help="PostgreSQL: server and client time per round trip of an append, and the tables appends "
                             "update (benchmarks/ledger_bench_costs.py)")
    parser.add_argument("--costs-appends", type=int, default=3000, help="appends timed")
    parser.add_argument("--costs-out", type=Path, default=DEFAULT_COSTS_OUT, help="JSON file the run is added to")
    parser.add_argument("--append-versus", metavar="GIT_REF",
                        help="single appends of GIT_REF's ledger code and --snapshot's (default HEAD) in turns, with raw "
                             "commits, each version in its own process and database (benchmarks/ledger_bench_versus.py)")
    parser.add_argument("--versus-out", type=Path, default=DEFAULT_VERSUS_OUT,
                        help="JSON file the comparison is added to")
    parser.add_argument("--append-writers", metavar="N,N...", nargs="?", const="1,2,4", type=_counts,
                        help="N appending processes at once, for each N (default 1,2,4), beside N raw committers "
                             "(PostgreSQL, at --ratio-at events; benchmarks/ledger_bench_writers.py)")
    parser.add_argument("--writers-rounds", type=int, default=5, help="rounds, each running every N once")
    parser.add_argument("--writers-seconds", type=float, default=10.0, help="append window per N and round")
    parser.add_argument("--writers-paths", default=("plain",), type=_paths,
                        help="comma-separated: plain (ledger.services.append), group (the cross-process group commit "
                             "prototype, benchmarks/ledger_group_commit.py); each N runs a window of each per round")
    parser.add_argument("--writers-raw-seconds", type=float, default=4.0,
                        help="raw commit window per N and round, half before the append window and half after")
    parser.add_argument("--writers-out", type=Path, default=DEFAULT_WRITERS_OUT, help="JSON file the run is added to")
    parser.add_argument("--versus-worker", action="store_true", help=argparse.SUPPRESS)  # one side of --append-versus
    args = parser.parse_args(argv)
    if not args.table and not args.db:
        parser.error("--db is required unless --table")
    if args.append_ratio and args.db != "postgres":
        parser.error("--append-ratio compares with PostgreSQL's commit rate: use --db postgres")
    if (args.append_versus or args.versus_worker) and args.db != "postgres":
        parser.error("--append-versus compares with PostgreSQL's commit rate: use --db postgres")
    if args.append_writers and args.db != "postgres":
        parser.error("--append-writers compares with PostgreSQL's commit rate: use --db postgres")
    if (args.append_profile or args.append_costs) and args.db != "postgres":
        parser.error("--append-profile and --append-costs read the PostgreSQL backend's CPU: use --db postgres")
    return args


def _default_pg_url() -> str:
    url = os.environ.get("DATABASE_URL", "")
    return url if url.startswith(("postgres://", "postgresql://")) else DEFAULT_PG_URL


def _counts(text: str) -> list[int]:
    counts = [int(part) for part in text.split(",")]
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"writer counts must be whole numbers from 1, got {text!r}")
    return counts


def _paths(text: str) -> tuple[str, ...]:
    paths = tuple(text.split(","))
    if not paths or not set(paths) <= {"plain", "group"} or len(set(paths)) < len(paths):
        raise argparse.ArgumentTypeError(f"paths are plain and group, each at most once, got {text!r}")
    return paths


def run_in_snapshot(args, command: str, argv: list[str]) -> int:
    """Re-run this script from `git archive <ref>` in a temp dir, so edits made to the working
    tree while a long benchmark runs (imports happen lazily) cannot leak into it."""
    commit, snap = snapshot(args.snapshot, args.tmp_dir)
    env = dict(os.environ, LEDGER_BENCH_SNAPSHOT=commit, LEDGER_BENCH_COMMAND=command)
    child_argv = list(argv) + ["--out", str(args.out.resolve()), "--ratio-out", str(args.ratio_out.resolve()),
                               "--profile-out", str(args.profile_out.resolve()),
                               "--versus-out", str(args.versus_out.resolve())]
    if args.append_costs:  # only then: a snapshot from before --append-costs does not know the option
        child_argv += ["--costs-out", str(args.costs_out.resolve())]
    if args.append_writers:
        child_argv += ["--writers-out", str(args.writers_out.resolve())]
    if args.sqlite_path:
        child_argv += ["--sqlite-path", str(Path(args.sqlite_path).resolve())]
    log(f"running against a snapshot of {args.snapshot} = {commit[:12]} in {snap}")
    try:
        # cwd matters: the Celery Django fixup puts os.getcwd() first on sys.path
        return subprocess.run([sys.executable, str(snap / "benchmarks" / "ledger_bench.py"), *child_argv], env=env,
                              cwd=snap).returncode
    finally:
        shutil.rmtree(snap, ignore_errors=True)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.table:
        print(markdown_table(load_results(args.out)))
        if args.ratio_out.exists():
            from ledger_bench_ratio import markdown_table as ratio_table

            print("\n" + ratio_table(json.loads(args.ratio_out.read_text())))
        if args.versus_out.exists():
            from ledger_bench_versus import markdown_table as versus_table

            print("\n" + versus_table(json.loads(args.versus_out.read_text())))
        if args.writers_out.exists():
            from ledger_bench_writers import markdown_tables as writers_tables

            print("\n" + writers_tables(json.loads(args.writers_out.read_text())))
        return 0

    command = os.environ.get("LEDGER_BENCH_COMMAND") or shlex.join(
        [".venv/bin/python" if Path(sys.executable).parent.parent == ROOT / ".venv" else sys.executable,
         os.path.relpath(__file__, ROOT) if Path(__file__).is_relative_to(ROOT) else __file__,
         *(argv if argv is not None else sys.argv[1:])])
    if args.append_versus:
        return append_versus(args, command)
    if args.snapshot and "LEDGER_BENCH_SNAPSHOT" not in os.environ:
        return run_in_snapshot(args, command, argv if argv is not None else sys.argv[1:])
    started = datetime.now(timezone.utc)
    run_id = f"{args.db}-{started.strftime('%Y%m%dT%H%M%SZ')}"
    log(f"ledger bench {run_id}: {command}")
    db_info = prepare_database(args)
    from django.db import connection  # settings are read lazily, at first use after setup_django()

    try:
        setup_django()

        from ledger.services import initialise_ledger

        run_facts = {"command": command, "date": started.isoformat(timespec="seconds"), "machine": machine_facts(args),
                     "workload": {"streams": args.streams, "seed": args.seed,
                                  "mix": "60% ResultDowngraded, 40% AuditSignedOff (8 reviewers, result_version 1-12)"},
                     "database": {k: v for k, v in db_info.items() if k != "var_dir"}}
        log(f"  {run_facts['machine']['database_server']}, {run_facts['machine']['cpu_count']} CPUs, "
            f"load {run_facts['machine']['load_average_at_start']}")
        initialise_ledger("benchmark ledger", "user:bench")
        workload = Workload(streams=args.streams, seed=args.seed)
        profile = args.profile

        from ledger.services import append

        for new in workload.batch(args.warmup):  # warm caches, connection, pydantic, prepared statements
            append(new)
        if args.append_ratio or args.append_profile or args.append_costs or args.append_writers:
            return append_mode(args, workload, run_id, run_facts)
        if args.versus_worker:
            from ledger_bench_versus import serve

            fill(workload, args.ratio_at, args.batch_size, time.monotonic() + args.max_fill_minutes * 60)
            return serve(workload, run_facts)
        throughput = None
        if not args.skip_throughput:
            throughput = {
                "single_append": median_of(args.repeat, "appends_per_s",
                                           lambda i: measure_single(workload, args.single, f"single_append_{i}", profile)),
                "batched_append": median_of(args.repeat, "events_per_s",
                                            lambda i: measure_batched(workload, args.batched, args.batch_size,
                                                                      f"batched_append_{i}", profile)),
            }
        if not args.no_write:
            merge_and_write(args.out, args.db, run_id, run_facts, throughput, {})

        deadline = time.monotonic() + args.max_fill_minutes * 60
        sizes: dict[int, dict] = {}
        failed = False
        for target in sorted(set(args.events)):
            if event_count() >= target:
                log(f"  skipping size {target:,}: ledger already holds {event_count():,} events")
                continue
            log(f"filling to {target:,} events ({args.fill})")
            filler = fill_direct if args.fill == "direct" else fill
            entry: dict = {"target_events": target, "fill": filler(workload, target, args.batch_size, deadline)}
            reached = entry["fill"]["to_events"]
            if reached == entry["fill"]["from_events"] and "aborted" in entry["fill"]:
                log(f"  stopping: {entry['fill']['aborted']} before any event was added")
                break
            entry["database_bytes"] = database_bytes(db_info)
            if args.fill == "direct":  # projections lag: rebuild first, then verify must pass
                entry["rebuild"] = measure_rebuild(profile, f"rebuild_{reached}")
                entry["verify"] = measure_verify(profile, f"verify_{reached}")
            else:
                entry["verify"] = measure_verify(profile, f"verify_{reached}")
                entry["rebuild"] = measure_rebuild(profile, f"rebuild_{reached}")
            entry["projection_rows"] = projection_rows()
            if args.probe:
                entry["single_append_probe"] = measure_single(workload, args.probe, f"single_append_at_{reached}", profile)
                entry["batched_append_probe"] = measure_batched(workload, max(args.probe, args.batch_size) * 5,
                                                                args.batch_size, f"batched_append_at_{reached}", profile)
            # a fill stopped by the time limit is recorded under the size it reached, not the target
            sizes[reached] = entry
            failed |= not (entry["verify"]["ok"] and entry["rebuild"]["ok"])
            if not args.no_write:
                merge_and_write(args.out, args.db, run_id, run_facts, throughput, {reached: entry})
            if "aborted" in entry["fill"]:
                log(f"  stopping: {entry['fill']['aborted']} at {reached:,} events")
                break

    finally:
        connection.close()
        if not args.keep:
            drop_database(args, db_info)
    if not args.no_write:
        log(f"results merged into {args.out}")
        log(json.dumps(load_results(args.out).get("targets", {}), indent=2))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
