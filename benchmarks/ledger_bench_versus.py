"""Two versions of the ledger code appending in turns, one append at a time, in the same seconds
(issue 14, point 12), for benchmarks/ledger_bench.py --append-versus REF.

On this shared 2-core machine the load of other people's suites moves an append's cost
several-fold within a minute, so two runs minutes apart compare moments of the machine as much
as code. Here each version runs in a process of its own from a clean `git archive` (REF, and
--snapshot, default HEAD), on a database of its own filled to --ratio-at events with the same
workload, and the coordinator asks them for one append at a time, in turns with a raw and a
locked one-row commit on its own connection (as benchmarks/ledger_bench_ratio.py does). A worker
times only its append: wall, its own CPU, its PostgreSQL backend's CPU (/proc/PID/schedstat, the
server being on this machine). Per round: each version's rate, their ratio, and the raw rate of
the same seconds.
"""
from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from ledger_bench_ratio import FLOOR_LOCK_KEY
from ledger_bench_setup import add_run, log, snapshot
from pg_commit_rate import PROBE_TABLE, locked_commit, open_probe, raw_commit

KINDS = ("raw", "locked", "ref", "new")


def backend_cpu_s(pid: int) -> float:
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e9


def serve(workload, run_facts: dict) -> int:
    """The worker: after the caller's fill and warm-up (the same in both versions, so both append
    the same events), one append of the workload per line read on stdin, answered with
    [wall s, this process's CPU s, its backend's CPU s] on stdout."""
    from django.db import connection
    from ledger.services import append

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = cursor.fetchone()[0]
    print(json.dumps(run_facts), flush=True)
    for _ in sys.stdin:
        new = workload.event()
        server, cpu, started = backend_cpu_s(backend), time.process_time(), time.perf_counter()
        append(new)
        wall = time.perf_counter() - started
        print(json.dumps([wall, time.process_time() - cpu, backend_cpu_s(backend) - server]), flush=True)
    return 0


def compare(args, command: str) -> dict:
    """Start a worker per version, interleave, and return the run (the workers drop their databases)."""
    snaps, workers, facts = [], {}, {}
    try:
        for kind, ref in (("ref", args.append_versus), ("new", args.snapshot or "HEAD")):
            commit, snap = snapshot(ref, args.tmp_dir)
            snaps.append(snap)
            url = f"{args.pg_url}_{kind}"
            argv = [sys.executable, str(snap / "benchmarks" / "ledger_bench.py"), "--db", "postgres", "--pg-url", url,
                    "--versus-worker", "--ratio-at", str(args.ratio_at), "--tmp-dir", str(snap)]
            env = dict(os.environ, LEDGER_BENCH_SNAPSHOT=commit, LEDGER_BENCH_COMMAND=command)
            # cwd matters: the Celery Django fixup puts os.getcwd() first on sys.path
            workers[kind] = subprocess.Popen(argv, cwd=snap, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                             text=True)
            log(f"  {kind}: {ref} = {commit[:12]}, filling its database to {args.ratio_at:,} events")
        for kind, worker in workers.items():
            line = worker.stdout.readline()
            if not line.startswith("{"):
                raise SystemExit(f"the {kind} worker was not ready: {line!r}")
            facts[kind] = json.loads(line)
        rounds = interleave(workers, url=f"{args.pg_url}_ref", rounds=args.ratio_rounds, per_round=args.ratio_appends)
    finally:
        for worker in workers.values():
            worker.stdin.close()
            worker.wait()
        for snap in snaps:
            shutil.rmtree(snap, ignore_errors=True)
    return {"command": command, "ref": facts["ref"], "new": facts["new"], "operations_per_round": args.ratio_appends,
            "rounds": rounds, **summary(rounds)}


def interleave(workers: dict, *, url: str, rounds: int, per_round: int) -> list[dict]:
    def ask(kind: str) -> list[float]:
        workers[kind].stdin.write("1\n")
        workers[kind].stdin.flush()
        return json.loads(workers[kind].stdout.readline())

    per_round_facts = []
    with open_probe(url) as probe:
        for i in range(200):  # warm: connection, prepared statements
            raw_commit(probe, i)
            locked_commit(probe, i, FLOOR_LOCK_KEY)
        for number in range(rounds):
            load = os.getloadavg()[0]
            total = {kind: [0.0, 0.0, 0.0] for kind in KINDS}  # wall, client CPU, server CPU
            for i in range(per_round):
                for kind in KINDS[i % 4:] + KINDS[:i % 4]:
                    if kind in workers:
                        measured = ask(kind)
                    else:
                        started, cpu = time.perf_counter(), time.process_time()
                        (raw_commit(probe, i) if kind == "raw" else locked_commit(probe, i, FLOOR_LOCK_KEY))
                        measured = [time.perf_counter() - started, time.process_time() - cpu, 0.0]
                    total[kind] = [a + b for a, b in zip(total[kind], measured)]
            entry = {"round": number, "load_1m_at_start": round(load, 2),
                     **{f"{kind}_per_s": round(per_round / total[kind][0], 1) for kind in KINDS},
                     **{f"{kind}_client_cpu_ms": round(total[kind][1] / per_round * 1e3, 3) for kind in ("ref", "new")},
                     **{f"{kind}_server_cpu_ms": round(total[kind][2] / per_round * 1e3, 3) for kind in ("ref", "new")}}
            entry["new_to_ref"] = round(entry["new_per_s"] / entry["ref_per_s"], 3)
            for kind in ("ref", "new"):
                entry[f"{kind}_to_raw"] = round(entry[f"{kind}_per_s"] / entry["raw_per_s"], 3)
            log(f"  round {number}: ref {entry['ref_per_s']:,.0f}/s, new {entry['new_per_s']:,.0f}/s "
                f"(x{entry['new_to_ref']:.2f}), raw {entry['raw_per_s']:,.0f}/s, load {load:.1f}")
            per_round_facts.append(entry)
        probe.execute(f"DROP TABLE IF EXISTS {PROBE_TABLE}")
    return per_round_facts


def summary(rounds: list[dict], skip: tuple[str, ...] = ("round", "load_1m_at_start")) -> dict:
    """Median, min and max over the rounds of every key but `skip`."""
    keys = [key for key in rounds[0] if key not in skip]
    return {"median": {key: round(statistics.median(r[key] for r in rounds), 3) for key in keys},
            "min": {key: min(r[key] for r in rounds) for key in keys},
            "max": {key: max(r[key] for r in rounds) for key in keys}}


def write(path: Path, run_id: str, run: dict) -> None:
    add_run(path, run_id, run, about=__doc__.split("\n\n", 1)[1].replace("\n", " ").strip())


def markdown_table(data: dict) -> str:
    """One row per run: the two versions, the load, and the medians (min–max) of the rounds."""
    def cell(run: dict, key: str, fmt: str = "{:,.0f}") -> str:
        return f"{fmt.format(run['median'][key])} ({fmt.format(run['min'][key])}–{fmt.format(run['max'][key])})"

    def pair(run: dict, key: str) -> str:
        return f"{run['median'][f'ref_{key}']:.2f} → {run['median'][f'new_{key}']:.2f}"

    lines = ["| run | ref → new | load (1 min) at start | ref appends/s | new appends/s | new ÷ ref | raw commits/s | "
             "client CPU per append, ref → new (ms) | server CPU per append, ref → new (ms) |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for run_id, run in sorted(data.get("runs", {}).items()):
        ref, new = run["ref"]["machine"]["git_commit"][:7], run["new"]["machine"]["git_commit"][:7]
        lines.append(
            f"| `{run_id}` | `{ref}` → `{new}` | {run['rounds'][0]['load_1m_at_start']:.1f} | "
            f"{cell(run, 'ref_per_s')} | {cell(run, 'new_per_s')} | {cell(run, 'new_to_ref', '{:.2f}')} | "
            f"{cell(run, 'raw_per_s')} | {pair(run, 'client_cpu_ms')} | {pair(run, 'server_cpu_ms')} |")
    return "\n".join(lines)
