"""The JSON of benchmarks/ledger_bench.py: merging runs into it, the issue's targets judged
from it, and the markdown table of docs/ledger_benchmarks.md."""
from __future__ import annotations

import json
from pathlib import Path

TARGET_PG_SINGLE_APPENDS_PER_S = 2000.0
TARGET_VERIFY_1M_S = 30.0
TARGET_REBUILD_1M_S = 120.0
ONE_MILLION = 1_000_000


def load_results(path: Path) -> dict:
    if path.exists():
        return json.loads(path.read_text())
    return {}


def compute_targets(data: dict) -> dict:
    """Targets from the issue, judged from whatever the JSON holds (null: not measured)."""
    results = data.get("results", {})

    def status(measured, limit, higher_is_better: bool, note: str = "") -> dict:
        if measured is None:
            met = None
        else:
            met = measured >= limit if higher_is_better else measured <= limit
        entry = {"target": (">= " if higher_is_better else "<= ") + f"{limit:g}", "measured": measured, "met": met}
        if note:
            entry["note"] = note
        return entry

    targets: dict = {"stated_for": "a 2-core machine"}
    pg_single = results.get("postgres", {}).get("throughput", {}).get("single_append", {}).get("appends_per_s")
    targets["postgres_single_appends_per_s"] = status(pg_single, TARGET_PG_SINGLE_APPENDS_PER_S, True,
                                                      "sequential append(), one transaction each, projections inline")
    for db in ("postgres", "sqlite"):
        sizes = results.get(db, {}).get("sizes", {})
        one_m = sizes.get(str(ONE_MILLION), {})
        for what, limit in (("verify", TARGET_VERIFY_1M_S), ("rebuild", TARGET_REBUILD_1M_S)):
            phase = one_m.get(what, {})
            measured = phase.get("wall_s") if phase.get("ok") else None
            note = ""
            if one_m:
                note = f"ledger filled by {one_m.get('fill', {}).get('mode', '?').split(' ')[0]}"
                if phase and not phase.get("ok"):
                    note += f"; {what} did not pass: {phase.get('summary', '')}"
            entry = status(measured, limit, False, note)
            if not one_m:
                entry["note"] = "1M not measured"
                largest = max((int(k) for k, v in sizes.items() if v.get(what, {}).get("ok")), default=None)
                if largest:
                    wall = sizes[str(largest)][what]["wall_s"]
                    entry["linear_extrapolation_to_1m_s"] = round(wall * ONE_MILLION / largest, 1)
                    entry["note"] += f"; linear extrapolation from {largest:,} events (not a measurement)"
            targets[f"{db}_{what}_1m_s"] = entry
    return targets


def merge_and_write(path: Path, db: str, run_id: str, run_facts: dict, throughput: dict | None, sizes: dict) -> dict:
    data = load_results(path)
    data.setdefault("about", "ForgeStencil Ledger benchmark; written by benchmarks/ledger_bench.py. "
                             "results[db].sizes[N] and results[db].throughput refer to runs[run_id].")
    data.setdefault("runs", {})[run_id] = run_facts
    entry = data.setdefault("results", {}).setdefault(db, {})
    if throughput is not None:
        entry["throughput"] = {**throughput, "run_id": run_id}
    for size, facts in sizes.items():
        entry.setdefault("sizes", {})[str(size)] = {**facts, "run_id": run_id}
    used = {e.get("throughput", {}).get("run_id") for e in data["results"].values()}
    used |= {s.get("run_id") for e in data["results"].values() for s in e.get("sizes", {}).values()}
    data["runs"] = {k: v for k, v in data["runs"].items() if k in used}
    data["targets"] = compute_targets(data)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n")
    tmp.replace(path)
    return data


# ---- markdown table ------------------------------------------------------------------------


def markdown_table(data: dict) -> str:
    def num(value, fmt="{:,.0f}") -> str:
        return "—" if value is None else fmt.format(value)

    lines = []
    runs = data.get("runs", {})
    lines.append("| database | ledger size (events) | single append/s | batched append/s (batch size) | "
                 "fill to this size, ev/s (how) | verify s | rebuild s | verify ok |")
    lines.append("|---|---:|---:|---:|---:|---:|---:|:---:|")
    for db in ("postgres", "sqlite"):
        entry = data.get("results", {}).get(db)
        if not entry:
            continue
        tp = entry.get("throughput", {})
        single = tp.get("single_append", {})
        batched = tp.get("batched_append", {})
        lines.append(
            f"| {db} | ~{num(single.get('ledger_events_before'))} | {num(single.get('appends_per_s'))} | "
            f"{num(batched.get('events_per_s'))} ({batched.get('batch_size', '—')}) | — | — | — | — |"
        )
        for size in sorted(entry.get("sizes", {}), key=int):
            s = entry["sizes"][size]
            fill = s.get("fill", {})
            label = f"{int(size):,}"
            if s.get("target_events", int(size)) > int(size):
                label += f" (fill stopped; target {s['target_events']:,})"
            mode = fill.get("mode", "?").split(" ")[0].replace("direct_bulk_insert", "direct")
            verify, rebuild = s.get("verify", {}), s.get("rebuild", {})
            ok = {True: "yes", False: "**NO**", None: "—"}[verify.get("ok")]
            single = s.get("single_append_probe", {})
            batched = s.get("batched_append_probe", {})
            batch_size = f" ({batched['batch_size']})" if batched else ""
            lines.append(
                f"| {db} | {label} | {num(single.get('appends_per_s'))} | "
                f"{num(batched.get('events_per_s'))}{batch_size} | "
                f"{num(fill.get('events_per_s'))} ({mode}) | "
                f"{num(verify.get('wall_s'), '{:,.1f}')} | {num(rebuild.get('wall_s'), '{:,.1f}')} | {ok} |"
            )
    lines.append("")
    lines.append("| target (issue, 2-core machine) | goal | measured | met |")
    lines.append("|---|---:|---:|:---:|")
    names = {
        "postgres_single_appends_per_s": ("PostgreSQL single appends/s", "{:,.0f}"),
        "postgres_verify_1m_s": ("PostgreSQL verify 1M events (s)", "{:,.1f}"),
        "postgres_rebuild_1m_s": ("PostgreSQL rebuild 1M events (s)", "{:,.1f}"),
        "sqlite_verify_1m_s": ("SQLite verify 1M events (s)", "{:,.1f}"),
        "sqlite_rebuild_1m_s": ("SQLite rebuild 1M events (s)", "{:,.1f}"),
    }
    for key, (label, fmt) in names.items():
        t = data.get("targets", {}).get(key)
        if not t:
            continue
        met = {True: "yes", False: "**no**", None: "not measured"}[t.get("met")]
        measured = num(t.get("measured"), fmt)
        if t.get("measured") is None and t.get("linear_extrapolation_to_1m_s") is not None:
            measured = f"— (extrapolated ~{t['linear_extrapolation_to_1m_s']:,.0f})"
        lines.append(f"| {label} | {t['target']} | {measured} | {met} |")
    lines.append("")
    machines = []
    for run_id, run in sorted(runs.items()):
        m = run.get("machine", {})
        machines.append(
            f"- `{run_id}`: {m.get('cpu_count')} CPUs ({m.get('cpu_model')}), {m.get('memory_gib')} GiB, "
            f"Python {m.get('python')}, Django {m.get('django')}, {m.get('database_server')}, "
            f"load {m.get('load_average_at_start')} at start; `{run.get('command')}`"
        )
    lines.extend(machines)
    return "\n".join(lines)

