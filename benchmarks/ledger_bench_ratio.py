"""Single appends against the raw commit rate of the same PostgreSQL server, in one run
(issue 14, point 12: the target is 2,000 appends/s; the raw rate is the ceiling under it).

Three kinds of block are measured in turn in one process, their order rotated each round:
durable one-row INSERT commits on a plain psycopg connection (the raw rate,
benchmarks/pg_commit_rate.py); the same INSERT inside a transaction that first takes an
advisory lock, BEGIN to COMMIT in one round trip (the floor under any serialised append); and
`append()` calls (one transaction each, projections inline). The machine is shared, so its
load moves all three; each round's ratio compares blocks a few seconds apart, which is what
the JSON reports beside the absolute rates.
"""
from __future__ import annotations

import json
import os
import statistics
from pathlib import Path

from ledger_bench_measure import measure_single
from ledger_bench_results import TARGET_PG_SINGLE_APPENDS_PER_S
from ledger_bench_setup import Workload, log
from pg_commit_rate import commit_rate, locked_commit_rate, open_probe, server_facts

FLOOR_LOCK_KEY = 0x466C6F6F72  # "Floor": not the ledger's chain lock, so no append waits on it
KINDS = ("raw", "locked", "append")


def paired_rounds(workload: Workload, *, url: str, rounds: int, appends: int, profile_dir) -> dict:
    """`rounds` rounds of `appends` raw commits, locked commits and single appends, the order
    rotated each round; per round the rates and their ratios, then medians and spreads."""
    per_round = []
    with open_probe(url) as probe:
        commit_rate(probe, 200)  # warm: connection, prepared statements
        locked_commit_rate(probe, 200, FLOOR_LOCK_KEY)
        for number in range(rounds):
            load = os.getloadavg()[0]
            order = KINDS[number % 3:] + KINDS[:number % 3]
            entry: dict = {"round": number, "order": list(order), "load_1m_at_start": round(load, 2)}
            for what in order:
                if what == "raw":
                    entry["raw_commits_per_s"] = round(commit_rate(probe, appends), 1)
                elif what == "locked":
                    entry["locked_commits_per_s"] = round(locked_commit_rate(probe, appends, FLOOR_LOCK_KEY), 1)
                else:
                    single = measure_single(workload, appends, f"paired_append_{number}", profile_dir)
                    entry["appends_per_s"] = single["appends_per_s"]
                    entry["ledger_events_before"] = single["ledger_events_before"]
                    entry["statements_per_append"] = single["sql"]["statements_per_event"]
                    entry["sql_by_statement"] = single["sql"]["by_statement"]
            entry["ratio"] = round(entry["appends_per_s"] / entry["raw_commits_per_s"], 3)
            entry["locked_ratio"] = round(entry["locked_commits_per_s"] / entry["raw_commits_per_s"], 3)
            log(f"  round {number}: {entry['appends_per_s']:,.0f} appends/s, raw {entry['raw_commits_per_s']:,.0f} "
                f"commits/s (ratio {entry['ratio']:.2f}), locked {entry['locked_commits_per_s']:,.0f}/s, "
                f"load {load:.1f}")
            per_round.append(entry)
        probe.execute("DROP TABLE IF EXISTS commit_rate_probe")
        facts = server_facts(probe)
    return {"server": facts, "rounds": per_round, **summary(per_round)}


def summary(per_round: list[dict]) -> dict:
    def spread(key: str) -> dict:
        values = [r[key] for r in per_round]
        return {"median": round(statistics.median(values), 3 if "ratio" in key else 1),
                "min": min(values), "max": max(values)}

    appends = spread("appends_per_s")
    return {
        "appends_per_s": appends,
        "raw_commits_per_s": spread("raw_commits_per_s"),
        "locked_commits_per_s": spread("locked_commits_per_s"),
        "ratio_appends_to_raw_commits": spread("ratio"),
        "ratio_locked_to_raw_commits": spread("locked_ratio"),
        "target": {"appends_per_s": TARGET_PG_SINGLE_APPENDS_PER_S, "met_by_median": appends["median"] >= TARGET_PG_SINGLE_APPENDS_PER_S},
        "statements_per_append": per_round[-1]["statements_per_append"],
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
             "appends ÷ raw | statements per append |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for run_id, run in sorted(data.get("runs", {}).items()):
        machine = run["machine"]
        lines.append(
            f"| `{run_id}` | `{machine['git_commit'][:7]}` | {machine['load_average_at_start'][0]:.1f} | "
            f"{cell(run['appends_per_s'])} | {cell(run['raw_commits_per_s'])} | {cell(run['locked_commits_per_s'])} | "
            f"{cell(run['ratio_appends_to_raw_commits'], '{:.2f}')} | {run['statements_per_append']} |")
    return "\n".join(lines)
