"""Where a single append's time goes, per round trip (benchmarks/ledger_bench.py --append-costs).

Each driver call of an append (a round trip: the reads with BEGIN and the lock; the writes with
COMMIT) timed on its own: wall, this process's CPU, and the server backend's CPU
(/proc/PID/schedstat, the server being on this machine), and the wall from the start of the call
that sends BEGIN and the chain lock to the return of the call that sends COMMIT, for which the
chain lock is held at most (`RoundTrips`, which benchmarks/ledger_bench_writers.py also uses).
Then the state of the tables every append updates (pages, live and dead row versions, the share
of in-place updates): this server runs without autovacuum, so what the appends leave behind stays.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

from ledger_bench_setup import Workload
from ledger_bench_versus import backend_cpu_s


def append_costs(workload: Workload, *, appends: int) -> dict:
    from django.db import connection
    from ledger.services import append

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid(), current_setting('autovacuum')")
        pid, autovacuum = cursor.fetchone()
    return {"autovacuum": autovacuum, "appends": appends, **_round_trips(workload, appends, pid, append),
            "tables_after": _tables()}


READS, WRITES = "reads (BEGIN, lock, reads)", "writes (one statement, COMMIT)"


class RoundTrips:
    """An execute wrapper that times an append's driver calls by kind: calls, wall, this process's
    CPU and, given the backend's pid, the backend's CPU (two reads of /proc a call, the costly part:
    without a pid the wrapper is cheap enough to leave on while appends are counted); and the wall
    from the start of the call that sends BEGIN and the chain lock to the return of the call that
    sends COMMIT, for which the chain lock is held at most."""

    def __init__(self, backend_pid: int | None = None) -> None:
        self.pid = backend_pid
        self.totals: dict[str, list[float]] = {}  # kind: [calls, wall s, client CPU s, server CPU s]
        self.begun = 0.0
        self.begin_to_commit_s = 0.0

    def __call__(self, execute, sql, params, many, context):
        wall, cpu, server = time.perf_counter(), time.process_time(), self._server_cpu_s()
        if sql.startswith("BEGIN"):
            self.begun = wall
        try:
            return execute(sql, params, many, context)
        finally:
            ended = time.perf_counter()
            if sql.endswith("COMMIT"):
                self.begin_to_commit_s += ended - self.begun
            kind = READS if sql.startswith("BEGIN") else WRITES if sql.endswith("COMMIT") else sql.split(None, 1)[0]
            entry = self.totals.setdefault(kind, [0, 0.0, 0.0, 0.0])
            entry[0] += 1
            entry[1] += ended - wall
            entry[2] += time.process_time() - cpu
            entry[3] += self._server_cpu_s() - server

    def _server_cpu_s(self) -> float:
        return backend_cpu_s(self.pid) if self.pid else 0.0

    def wall_s(self, kind: str) -> float:
        return self.totals.get(kind, [0, 0.0])[1]


def _round_trips(workload: Workload, appends: int, pid: int, append) -> dict:
    from django.db import connection

    timer = RoundTrips(pid)
    events = list(workload.batch(appends))
    wall, cpu, server = time.perf_counter(), time.process_time(), backend_cpu_s(pid)
    with connection.execute_wrapper(timer):
        for new in events:
            append(new)
    whole = {"appends_per_s": round(appends / (time.perf_counter() - wall), 1),
             "wall_ms": round((time.perf_counter() - wall) / appends * 1e3, 3),
             "client_cpu_ms": round((time.process_time() - cpu) / appends * 1e3, 3),
             "server_cpu_ms": round((backend_cpu_s(pid) - server) / appends * 1e3, 3),
             "begin_to_commit_ms": round(timer.begin_to_commit_s / appends * 1e3, 3)}
    per_call = {kind: {"calls": n, "wall_ms_per_append": round(w / appends * 1e3, 3),
                       "client_cpu_ms_per_append": round(c / appends * 1e3, 3),
                       "server_cpu_ms_per_append": round(s / appends * 1e3, 3)}
                for kind, (n, w, c, s) in timer.totals.items()}
    return {"per_append": whole, "per_driver_call": per_call}


def _tables() -> dict:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT relname, pg_relation_size(relid) / current_setting('block_size')::int, n_live_tup, "
                       "n_dead_tup, n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables "
                       "WHERE relname LIKE 'ledger%' AND n_tup_upd > 0 ORDER BY relname")
        return {name: {"pages": pages, "live_rows": live, "dead_row_versions": dead,
                       "in_place_update_share": round(hot / updates, 3)}
                for name, pages, live, dead, updates, hot in cursor.fetchall()}


def write(path: Path, run_id: str, run: dict) -> None:
    data = json.loads(path.read_text()) if path.exists() else {}
    data.setdefault("about", "Where a single append's time goes per driver call (server CPU from the backend's "
                             "schedstat), and the tables appends update afterwards; written by "
                             "benchmarks/ledger_bench.py --append-costs.")
    data.setdefault("runs", {})[run_id] = run
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n")
