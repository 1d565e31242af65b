"""Where the client CPU of one `append()` goes on PostgreSQL (issue 14, point 12), for
benchmarks/ledger_bench.py --append-profile.

At the ledger size of the ratio runs (--ratio-at), sequential appends of the benchmark workload
are timed twice in turns, plain and under cProfile. The plain blocks give the costs per append:
wall, this process's user and system CPU, the PostgreSQL backend's CPU (its
/proc/PID/schedstat, the server being on this machine), the statements issued. The profiled
blocks give the shares: the profiler's own time per function (with a CPU clock, so waiting for
the server counts for nothing) summed by component, and the heaviest functions. cProfile
charges each Python call a fixed overhead, so call-heavy code (psycopg's Python layer, Django's
wrappers) weighs more in the shares than it costs unprofiled: read the shares as an ordering,
the plain block's milliseconds as the costs.
"""
from __future__ import annotations

import cProfile
import os
import pstats
import time
from pathlib import Path

from ledger_bench_measure import QueryStats
from ledger_bench_setup import Workload, add_run, log

# component -> path fragments of the code it covers (first match wins; C functions are charged
# to the component of the Python function that called them, by the caller's file)
COMPONENTS = [
    ("canonical JSON (ledger.canonical, rfc8785)", ("/ledger/canonical.py", "/rfc8785/")),
    ("payload validation (pydantic)", ("/ledger/event_types.py", "/pydantic")),
    ("projection handlers and row stores", ("/projections.py", "/ledger/projection_base.py", "/ledger/records.py")),
    ("ledger append code (services, append_sql)", ("/ledger/services.py", "/ledger/append_sql.py")),
    ("Django field conversions", ("/django/db/models/",)),
    ("Django cursor wrappers and transactions", ("/django/db/", "/django/utils/")),
    ("psycopg Python layer (execute, pipeline, adaptation, waits)", ("/psycopg/",)),
    ("Python standard library", ("/lib/python3",)),
]


def component(path: str) -> str:
    return next((name for name, parts in COMPONENTS if any(part in path for part in parts)), "other")


def backend_cpu_s(pid: int) -> float | None:
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


def profile_appends(workload: Workload, *, rounds: int, per_round: int) -> dict:
    from django.db import connection
    from ledger.services import append

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = cursor.fetchone()[0]
    plain = {"appends": 0, "wall_s": 0.0, "user_s": 0.0, "system_s": 0.0, "server_s": 0.0}
    server_seen = backend_cpu_s(backend) is not None
    profiler = cProfile.Profile(time.process_time)
    profiled = 0
    queries = QueryStats()
    for number in range(rounds):
        events = workload.batch(per_round)
        with connection.execute_wrapper(queries):
            times, server, started = os.times(), backend_cpu_s(backend), time.perf_counter()
            for new in events:
                append(new)
            wall, after, server_after = time.perf_counter() - started, os.times(), backend_cpu_s(backend)
        plain["appends"] += per_round
        plain["wall_s"] += wall
        plain["user_s"] += after.user - times.user
        plain["system_s"] += after.system - times.system
        plain["server_s"] += server_after - server if server_seen else 0.0
        events = workload.batch(per_round)
        profiler.enable()
        for new in events:
            append(new)
        profiler.disable()
        profiled += per_round
        log(f"  profile round {number}: plain {per_round / wall:,.0f} appends/s, load {os.getloadavg()[0]:.1f}")
    n = plain["appends"]
    costs = {
        "appends": n,
        "appends_per_s": round(n / plain["wall_s"], 1),
        "wall_ms_per_append": round(plain["wall_s"] / n * 1e3, 3),
        "client_cpu_ms_per_append": round((plain["user_s"] + plain["system_s"]) / n * 1e3, 3),
        "client_user_ms_per_append": round(plain["user_s"] / n * 1e3, 3),
        "client_system_ms_per_append": round(plain["system_s"] / n * 1e3, 3),
        "server_cpu_ms_per_append": round(plain["server_s"] / n * 1e3, 3) if server_seen else None,
        "statements_per_append": round(queries.count / n, 2),
    }
    return {"plain": costs, "profiled": shares(pstats.Stats(profiler), profiled)}


def shares(stats: pstats.Stats, appends: int) -> dict:
    total = sum(own for _, _, own, _, _ in stats.stats.values())
    by_component: dict[str, list[float]] = {}
    rows = []
    for (path, line, name), (_, calls, own, cumulative, callers) in stats.stats.items():
        # a C function ("~") is charged to its callers' components, as much as each caused
        charged = [(caller[0], part, count) for caller, (_, count, part, _) in callers.items()] if path == "~" else []
        for where, part, count in charged or [(path, own, calls)]:
            entry = by_component.setdefault(component(where), [0.0, 0])
            entry[0] += part
            entry[1] += count
        where = "/".join(path.split("/")[-2:]) if path != "~" else "builtin"
        rows.append((own, cumulative, calls, f"{where}:{line}({name})"))
    rows.sort(reverse=True)
    return {
        "appends": appends,
        "profiled_cpu_ms_per_append": round(total / appends * 1e3, 3),
        "python_calls_per_append": round(sum(c for _, _, c, _ in rows) / appends, 1),
        "components": {name: {"share": round(own / total, 3), "calls_per_append": round(calls / appends, 1)}
                       for name, (own, calls) in sorted(by_component.items(), key=lambda kv: -kv[1][0])},
        "top_functions_by_own_time": [{"function": where, "own_share": round(own / total, 3),
                                       "cumulative_share": round(cumulative / total, 3),
                                       "calls_per_append": round(calls / appends, 2)}
                                      for own, cumulative, calls, where in rows[:30]],
    }


def write(path: Path, run_id: str, run: dict) -> None:
    add_run(path, run_id, run, about=__doc__.split("\n\n", 1)[1].replace("\n", " ").strip())
