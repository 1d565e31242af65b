"""Several appending processes at once (benchmarks/ledger_bench.py --append-writers N[,N...]):
the aggregate rate of N writers, the raw commit rate of N parallel committers in the same round,
and how long an append holds the chain lock.

Why: the target of 2,000 appends/s (issue 14) is not met by one sequential writer, and more
writers can only overlap what lies outside the chain lock. Every append holds the advisory lock
from its first round trip through its COMMIT, so writers queue on it; and every append costs the
machine's CPUs its client and server work whoever runs it. This module measures both bounds
instead of arguing them.

For every N, on the database the caller filled: N forked writer processes, each with its own
connection and its own draw of the benchmark workload (the same mix over the same streams),
wait at a barrier and append for a fixed window; an append counts when it returned inside the
window. Around each window, half before and half after, the same N processes run durable
one-row INSERT commits on autocommit connections (benchmarks/pg_commit_rate.py), so the raw
rate and the append rate come from the same stretch of the machine. Each writer measures its own
CPU and its backend's (/proc/PID/schedstat, the server being on this machine) and times its
appends' two driver calls (benchmarks/ledger_bench_costs.py's `RoundTrips`, without its /proc
reads): from the start of the call that sends BEGIN and the lock to the return of COMMIT's, with
one writer the chain lock's hold time (at most), with more the wait for the lock too; from the
return of the first call to COMMIT's, a time the lock is held whatever N. The coordinator measures the whole
machine's busy CPU (/proc/stat), which also holds the WAL writer's and any other work. The rounds
take the N values in turn, rotated each round. The ledger grows through the run; it is verified
at the end.

With `paths` (--writers-paths plain,group) every N runs one window per path in each round, each
between raw commit half-windows of its own: `plain` is `ledger.services.append`, `group` the
cross-process group commit prototype (benchmarks/ledger_group_commit.py), for which the window
records how many events each transaction carried (distinct `xmin` among the window's events)
instead of the lock's times.
"""
from __future__ import annotations

import multiprocessing
import os
import time
from multiprocessing.connection import Connection
from pathlib import Path

from ledger_bench_costs import READS, WRITES, RoundTrips
from ledger_bench_measure import measure_verify
from ledger_bench_setup import Workload, add_run, event_count, log
from ledger_bench_versus import backend_cpu_s, summary
from pg_commit_rate import PROBE_TABLE, open_probe, raw_commit, server_facts

WARMUP = 200  # appends and raw commits per writer before the first round: connection, prepared statements
EVENTS_PER_SECOND = 3000  # events each writer draws before a window, more than one writer appends
NOT_SUMMED = ("round", "writers", "path", "load_1m_at_start", "appends_by_writer")


def writer_rounds(workload: Workload, *, url: str, writers: list[int], rounds: int, seconds: float,
                  raw_seconds: float, paths: tuple[str, ...] = ("plain",)) -> dict:
    """Run the rounds on the filled database behind Django's default connection and `url`; return
    the run's facts (per round, per path and N over the rounds, the final verify)."""
    from django.db import connections
    from ledger_group_commit import create_table

    events_before = event_count()
    with open_probe(url):  # the probe table exists before the writers open theirs
        pass
    if "group" in paths:
        create_table()
    connections.close_all()  # each forked writer opens its own
    context = multiprocessing.get_context("fork")
    barriers = {n: context.Barrier(n + 1, timeout=600) for n in writers}
    pool = [_start(context, workload, index, url, barriers, paths) for index in range(max(writers))]
    try:
        for process, pipe in pool:
            if pipe.recv() != "ready":
                raise SystemExit(f"writer {process.pid} was not ready")
        per_round = []
        for number in range(rounds):
            shift = number % len(writers)
            for n in writers[shift:] + writers[:shift]:
                for path in paths if number % 2 == 0 else paths[::-1]:
                    per_round.append(_round(pool, barriers, number, n, path, seconds, raw_seconds))
    finally:
        for process, pipe in pool:
            pipe.send(None)
            process.join(timeout=60)
    with open_probe(url) as probe:
        probe.execute(f"DROP TABLE IF EXISTS {PROBE_TABLE}")
        facts = server_facts(probe)
    return {"server": facts, "ledger_events_before": events_before, "writers": writers, "paths": list(paths),
            "window_s": seconds, "raw_window_s": raw_seconds, "rounds": per_round,
            "by_path": {path: {str(n): summary([r for r in per_round if r["writers"] == n and r["path"] == path],
                                               skip=NOT_SUMMED) for n in writers} for path in paths},
            "ledger_events_after": event_count(), "verify": measure_verify(None, "verify_after_writers")}


def _start(context, workload: Workload, index: int, url: str, barriers: dict, paths: tuple[str, ...]):
    parent, child = context.Pipe()
    process = context.Process(target=_serve, args=(workload, index, url, child, barriers, paths), daemon=True)
    process.start()
    return process, parent


def _serve(workload: Workload, index: int, url: str, pipe: Connection, barriers: dict, paths: tuple[str, ...]) -> None:
    """A writer: warm up, then per command (kind, N, seconds) wait at N's barrier, run `kind`
    (raw, plain or group) for the window and answer [counted, done, CPU s, backend CPU s], for
    plain appends followed by [BEGIN-to-COMMIT s, first call s, second call s]; None ends it."""
    from django.db import connection
    from ledger.services import append
    from ledger_group_commit import append_grouped

    workload.rng.seed(workload.rng.getrandbits(64) + index)  # the parent's workload, its own draw of events
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = cursor.fetchone()[0]
    with open_probe(url) as probe:
        for i, new in enumerate(workload.batch(WARMUP)):
            (append_grouped if "group" in paths and i % 2 else append)(new)
            raw_commit(probe, i)
        pipe.send("ready")
        while (command := pipe.recv()) is not None:
            kind, n, window = command
            if kind == "raw":
                barriers[n].wait()
                pipe.send(_timed(lambda i: raw_commit(probe, i), probe.info.backend_pid, window))
                continue
            events = iter(workload.batch(int(window * EVENTS_PER_SECOND)))
            if kind == "group":
                barriers[n].wait()
                pipe.send(_timed(lambda i: append_grouped(next(events, None) or workload.event()), backend, window))
                continue
            timer = RoundTrips()
            with connection.execute_wrapper(timer):
                barriers[n].wait()
                answer = _timed(lambda i: append(next(events, None) or workload.event()), backend, window)
            pipe.send(answer + [timer.begin_to_commit_s, timer.wall_s(READS), timer.wall_s(WRITES)])
    connection.close()


def _timed(operation, backend: int, window: float) -> list[float]:
    """Run `operation` for `window` seconds; an operation that returns after the window is done but
    not counted, so the count is of what the window held."""
    end = time.monotonic() + window
    counted = done = 0
    cpu, server = time.process_time(), backend_cpu_s(backend)
    while True:
        operation(done)
        done += 1
        if time.monotonic() > end:
            break
        counted += 1
    return [counted, done, time.process_time() - cpu, backend_cpu_s(backend) - server]


def _phase(pool: list, barriers: dict, kind: str, n: int, seconds: float) -> tuple[list[list[float]], list[int]]:
    """One window of `kind` on the first n writers: their answers, and the machine's CPU time
    (busy, stolen, total jiffies) from the barrier to the last answer."""
    for _, pipe in pool[:n]:
        pipe.send((kind, n, seconds))
    barriers[n].wait()
    before = _machine_cpu()
    answers = [pipe.recv() for _, pipe in pool[:n]]
    return answers, [after - was for after, was in zip(_machine_cpu(), before)]


def _round(pool: list, barriers: dict, number: int, n: int, path: str, seconds: float, raw_seconds: float) -> dict:
    load = os.getloadavg()[0]
    before, _ = _phase(pool, barriers, "raw", n, raw_seconds / 2)
    head = event_count()  # positions are dense: the window's events follow it
    appends, (busy, stolen, total) = _phase(pool, barriers, path, n, seconds)
    after, _ = _phase(pool, barriers, "raw", n, raw_seconds / 2)
    raw = before + after
    done = sum(a[1] for a in appends)
    entry = {"round": number, "writers": n, "path": path, "load_1m_at_start": round(load, 2),
             "appends_per_s": round(sum(a[0] for a in appends) / seconds, 1),
             "raw_per_s": round(sum(r[0] for r in raw) / raw_seconds, 1),
             "append_client_cpu_ms": round(sum(a[2] for a in appends) / done * 1e3, 3),
             "append_server_cpu_ms": round(sum(a[3] for a in appends) / done * 1e3, 3),
             "raw_client_cpu_ms": round(sum(r[2] for r in raw) / sum(r[1] for r in raw) * 1e3, 3),
             "raw_server_cpu_ms": round(sum(r[3] for r in raw) / sum(r[1] for r in raw) * 1e3, 3),
             "machine_cpu_busy_share": round(busy / total, 3),
             "machine_cpu_stolen_share": round(stolen / total, 3),  # a virtual machine's CPUs taken by its host
             # all the machine's busy CPU in the window (WAL writer, kernel, other work too) per append
             "machine_cpu_ms_per_append": round(busy / os.sysconf("SC_CLK_TCK") / done * 1e3, 3),
             **(_lock_times(appends, done, sum(a[0] for a in appends) / seconds) if path == "plain" else
                _batches(head)),
             "appends_by_writer": [int(a[0]) for a in appends]}
    entry["ratio"] = round(entry["appends_per_s"] / entry["raw_per_s"], 3)
    log(f"  round {number}, {n} writer(s), {path}: {entry['appends_per_s']:,.0f} appends/s, raw "
        f"{entry['raw_per_s']:,.0f} commits/s, machine CPU {busy / total:.0%} busy, load {load:.1f}")
    return entry


def _machine_cpu() -> tuple[int, int, int]:
    """(busy, stolen, total) jiffies of all CPUs since boot, from /proc/stat: busy is user, nice,
    system, irq and softirq; idle, iowait and steal are not."""
    user, nice, system, idle, iowait, irq, softirq, steal = \
        (int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9])
    busy = user + nice + system + irq + softirq
    return busy, steal, busy + idle + iowait + steal


def _lock_times(appends: list[list[float]], done: int, rate: float) -> dict:
    """Per append, from the writers' driver-call timings: BEGIN to COMMIT (with one writer the
    lock's hold time at most; with more, the wait for the lock too), its two calls and the Python
    between them. And the rate times (Python between + round trip 2), about the share of the
    window in which the lock was held: above it by the way back of COMMIT's answer, which follows
    the release, below it by the first call's reads after the grant. Near 1, the lock is never free."""
    span, first, second = (sum(a[i] for a in appends) / done * 1e3 for i in (4, 5, 6))
    return {"begin_to_commit_ms": round(span, 3), "round_trip_1_ms": round(first, 3),
            "python_between_ms": round(span - first - second, 3), "round_trip_2_ms": round(second, 3),
            "lock_busy_share": round(rate * (span - first) / 1e3, 3)}


def _batches(head: int) -> dict:
    """The events appended since position `head` and the transactions that wrote them (their
    `xmin`): how many events a group commit's transaction carried on average."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT COUNT(*), COUNT(DISTINCT xmin::text) FROM ledger_event WHERE position > %s", [head])
        events, transactions = cursor.fetchone()
    return {"events_per_commit": round(events / transactions, 2)}


def write(path: Path, run_id: str, run: dict) -> None:
    add_run(path, run_id, run, about=__doc__.split("\n\n", 1)[1].replace("\n", " ").strip())


def markdown_tables(data: dict) -> str:
    """Per run, path and N, the medians (min–max) over the rounds: the rates and CPU (with the events
    a commit carried), then the plain appends' lock times. A run from before --writers-paths ran
    the plain path only."""
    def cell(spread: dict, key: str, fmt: str = "{:,.0f}") -> str:
        low, high = fmt.format(spread["min"][key]), fmt.format(spread["max"][key])
        return f"{fmt.format(spread['median'][key])} ({low}–{high})"

    rates = ["| run | ledger code | load (1 min) at start | path | writers | appends/s | raw commits/s | "
             "appends ÷ raw | events per commit | client CPU per append (ms) | server CPU per append (ms) | "
             "machine CPU busy | "
             "machine CPU per append (ms) |",
             "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    locks = ["| run | writers | BEGIN → COMMIT (ms) | round trip 1 | Python between | round trip 2 | "
             "appends/s × (Python between + round trip 2) | 1 ÷ (Python between + round trip 2), appends/s |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for run_id, run in sorted(data.get("runs", {}).items()):
        machine = run["machine"]
        by_path = run.get("by_path", {"plain": run.get("by_writers")})
        for path, n, spread in [(path, n, spread) for path, by_n in by_path.items() for n, spread in by_n.items()]:
            median = spread["median"]
            per_commit = cell(spread, "events_per_commit", "{:.1f}") if path == "group" else "1"
            rates.append(f"| `{run_id}` | `{machine['git_commit'][:7]}` | {machine['load_average_at_start'][0]:.1f} | "
                         f"{path} | {n} | {cell(spread, 'appends_per_s')} | {cell(spread, 'raw_per_s')} | "
                         f"{cell(spread, 'ratio', '{:.2f}')} | {per_commit} | {median['append_client_cpu_ms']:.2f} | "
                         f"{median['append_server_cpu_ms']:.2f} | {median['machine_cpu_busy_share']:.0%} | "
                         f"{median['machine_cpu_ms_per_append']:.2f} |")
            if path != "plain":
                continue
            locks.append(f"| `{run_id}` | {n} | {cell(spread, 'begin_to_commit_ms', '{:.2f}')} | "
                         f"{median['round_trip_1_ms']:.2f} | {median['python_between_ms']:.2f} | "
                         f"{median['round_trip_2_ms']:.2f} | {cell(spread, 'lock_busy_share', '{:.2f}')} | "
                         f"{1e3 / (median['python_between_ms'] + median['round_trip_2_ms']):,.0f} |")
    return "\n".join(rates) + "\n\n" + "\n".join(locks)
