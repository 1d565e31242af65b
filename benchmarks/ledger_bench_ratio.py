"""Single appends against the raw commit rate of the same PostgreSQL server, in one run
(issue 14, point 12: the target is 2,000 appends/s; the raw rate is the ceiling under it).

Three operations take turns, one of each in a rotating order, in one process: a durable
one-row INSERT commit on a plain psycopg connection (the raw rate, benchmarks/pg_commit_rate.py);
the same INSERT inside a transaction that first takes an advisory lock, BEGIN to COMMIT in one
round trip (the floor under any serialised append); and an `append()` (one transaction,
projections inline). Each operation is timed on its own and the times are summed per kind, so
the three rates come from the same seconds of the machine: the shared machine's load, which
moves the raw rate between a few hundred and a few thousand commits/s from one second to the next, falls
on all three alike. The rounds (consecutive stretches of operations) give the spread.
"""
from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path

from ledger_bench_measure import Phase
from ledger_bench_results import TARGET_PG_SINGLE_APPENDS_PER_S
from ledger_bench_setup import Workload, event_count, log
from pg_commit_rate import PROBE_TABLE, locked_commit, open_probe, raw_commit, server_facts

FLOOR_LOCK_KEY = 0x466C6F6F72  # "Floor": not the ledger's chain lock, so no append waits on it
KINDS = ("raw", "locked", "append")


def interleaved_rounds(workload: Workload, *, url: str, rounds: int, per_round: int, profile_dir) -> dict:
    """`rounds` rounds of `per_round` operations of each kind, interleaved one by one; per
    round the three rates and the ratios, then medians and spreads over the rounds."""
    from ledger.services import append

    per_round_facts = []
    events_before = event_count()
    with open_probe(url) as probe:
        for i in range(200):  # warm: connection, prepared statements
            raw_commit(probe, i)
            locked_commit(probe, i, FLOOR_LOCK_KEY)
        operations = {"raw": lambda i, new: raw_commit(probe, i),
                      "locked": lambda i, new: locked_commit(probe, i, FLOOR_LOCK_KEY),
                      "append": lambda i, new: append(new)}
        with Phase("interleaved_appends", profile_dir, count_queries=True) as phase:
            for number in range(rounds):
                load = os.getloadavg()[0]
                seconds = dict.fromkeys(KINDS, 0.0)
                cpu = dict.fromkeys(KINDS, 0.0)
                for i, new in enumerate(workload.batch(per_round)):
                    for kind in KINDS[i % 3:] + KINDS[:i % 3]:
                        started, cpu_started = time.perf_counter(), time.process_time()
                        operations[kind](i, new)
                        seconds[kind] += time.perf_counter() - started
                        cpu[kind] += time.process_time() - cpu_started
                entry = {"round": number, "load_1m_at_start": round(load, 2),
                         **{f"{kind}_per_s": round(per_round / seconds[kind], 1) for kind in KINDS},
                         # this process's own CPU per operation: a ceiling no saved round trip lifts
                         **{f"{kind}_client_cpu_ms": round(cpu[kind] / per_round * 1e3, 3) for kind in KINDS}}
                entry["ratio"] = round(entry["append_per_s"] / entry["raw_per_s"], 3)
                entry["locked_ratio"] = round(entry["locked_per_s"] / entry["raw_per_s"], 3)
                log(f"  round {number}: {entry['append_per_s']:,.0f} appends/s, raw {entry['raw_per_s']:,.0f} "
                    f"commits/s (ratio {entry['ratio']:.2f}), locked {entry['locked_per_s']:,.0f}/s, load {load:.1f}")
                per_round_facts.append(entry)
        probe.execute(f"DROP TABLE IF EXISTS {PROBE_TABLE}")
        facts = server_facts(probe)
    sql = phase.queries.facts(rounds * per_round)
    return {"server": facts, "ledger_events_before": events_before, "operations_per_round": per_round,
            "rounds": per_round_facts, **summary(per_round_facts), "statements_per_append": sql["statements_per_event"],
            "sql_by_statement": sql["by_statement"]}


def summary(per_round: list[dict]) -> dict:
    def spread(key: str) -> dict:
        values = [r[key] for r in per_round]
        return {"median": round(statistics.median(values), 3 if "ratio" in key or "cpu" in key else 1),
                "min": min(values), "max": max(values)}

    appends = spread("append_per_s")
    return {
        "appends_per_s": appends,
        "append_client_cpu_ms": spread("append_client_cpu_ms"),
        "raw_client_cpu_ms": spread("raw_client_cpu_ms"),
        "raw_commits_per_s": spread("raw_per_s"),
        "locked_commits_per_s": spread("locked_per_s"),
        "ratio_appends_to_raw_commits": spread("ratio"),
        "ratio_locked_to_raw_commits": spread("locked_ratio"),
        "target": {"appends_per_s": TARGET_PG_SINGLE_APPENDS_PER_S,
                   "met_by_median": appends["median"] >= TARGET_PG_SINGLE_APPENDS_PER_S},
    }


def write(path: Path, run_id: str, run: dict) -> None:
    """Add this run to the file (runs keyed by id), keeping earlier runs for the spread; the
    summary groups runs by the ledger code they measured."""
    data = json.loads(path.read_text()) if path.exists() else {}
    data.setdefault("about", "Single appends (append(), one transaction each, projections inline) against the raw "
                             "one-row commit rate of the same server and against a locked one-row transaction, "
                             "in turns in one process; written by benchmarks/ledger_bench.py --append-ratio.")
    data.setdefault("runs", {})[run_id] = run
    by_code: dict[str, dict] = {}
    for key, entry in sorted(data["runs"].items()):
        code = by_code.setdefault(entry["machine"]["ledger_source_sha256"],
                                  {"git_commit": entry["machine"]["git_commit"], "runs": []})
        code["runs"].append({"run": key, "load_1m_at_start": entry["machine"]["load_average_at_start"][0],
                             "median_appends_per_s": entry["appends_per_s"]["median"],
                             "median_raw_commits_per_s": entry["raw_commits_per_s"]["median"],
                             "median_ratio": entry["ratio_appends_to_raw_commits"]["median"]})
    data["by_code"] = by_code
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n")


def markdown_table(data: dict) -> str:
    """One row per run: the code measured, the load, and the medians (min–max) of its rounds."""
    def cell(spread: dict, fmt: str = "{:,.0f}") -> str:
        return f"{fmt.format(spread['median'])} ({fmt.format(spread['min'])}–{fmt.format(spread['max'])})"

    lines = ["| run | ledger code | load (1 min) at start | appends/s | raw commits/s | locked commits/s | "
             "appends ÷ raw | driver calls per append | client CPU per append (ms) |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for run_id, run in sorted(data.get("runs", {}).items()):
        machine = run["machine"]
        lines.append(
            f"| `{run_id}` | `{machine['git_commit'][:7]}` | {machine['load_average_at_start'][0]:.1f} | "
            f"{cell(run['appends_per_s'])} | {cell(run['raw_commits_per_s'])} | {cell(run['locked_commits_per_s'])} | "
            f"{cell(run['ratio_appends_to_raw_commits'], '{:.2f}')} | {run['statements_per_append']} | "
            f"{cell(run['append_client_cpu_ms'], '{:.2f}') if 'append_client_cpu_ms' in run else 'not measured'} |")
    return "\n".join(lines)
