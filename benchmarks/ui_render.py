"""p95 render time of the audit UI's pages on a ledger of 100k and 1M events (issue 6: <= 150 ms
at 1M).

The ledger is built the way production builds it: the demo seed (matrices and the committed
exports of real runs: a CPU forge campaign, the bundled apps' gate, the H200 campaign), then
replicas of those runs' events appended with `append_many` in big batches, so every event is
validated, hash-chained and projected by the real services. Each replica gets fresh ids
(campaign, rounds, branches, event ids, consistently remapped, so references still hold), so
projections grow the way many campaigns over the same matrices make them grow: one operator
result per (backend, case) with a long history, rounds, perf and idea logs by the thousand.

Pages are rendered through Django's test client with DEBUG off (as served): after warm-up
requests, every page is requested at least --requests times and the p50/p95/max wall times,
the SQL statements of one request and the response size are recorded.

    .venv/bin/python benchmarks/ui_render.py --events 100000 --events 1000000 \\
        --out docs/benchmarks/ui_render.json --md docs/benchmarks/ui_render.md

A scratch SQLite database in a fresh FORGESTENCIL_VAR_DIR (benchmarks/scratch_ledger.py) unless
--var-dir names one: an existing ledger there is filled up to each size (never shrunk), so a
later run re-measures a built 1M ledger without rebuilding it. DATABASE_URL selects PostgreSQL.
Results merge into --out by (database, size); the Markdown is generated from the JSON.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

TARGET_MS = 150.0
TARGET_EVENTS = 1_000_000
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
TEMPLATES = ("docs/benchmarks/forge_cpu_levers.jsonl", "docs/benchmarks/forge_h200_levers.jsonl",
             "docs/benchmarks/appgate_cpu.jsonl")
NOT_REPLICATED = {"LedgerInitialised", "CaseDefined", "CheckpointSigned"}  # once per ledger / matrix
BUSIEST_CASE = ("cpu", "star_1/64x64x64/f32")  # admitted twice in every CPU campaign replica


def log(message: str) -> None:
    print(f"[{datetime.now().strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def pages() -> dict[str, str]:
    backend, case = BUSIEST_CASE
    return {
        "operator table": "/operators/",
        "case detail": f"/cases/{backend}/{case}/",
        "event browser, first page": "/events/",
        "event browser, filtered by type": "/events/?type=GateVerdict",
        "event browser, filtered by stream": f"/events/?stream=operator/{backend}/{case}",
        "application table": "/apps/",
        "dashboard": "/",
    }


# ---- building the ledger --------------------------------------------------------------------


def template_events() -> list[dict]:
    """The committed runs' events, each marked with whether another event refers to its id."""
    records = []
    for name in TEMPLATES:
        for line in (ROOT / name).read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            if record["type"] not in NOT_REPLICATED:
                records.append({key: record[key] for key in ("event_id", "stream", "type", "schema_version", "payload", "actor")})
    referenced = {found for record in records for found in UUID.findall(json.dumps(record["payload"]))}
    for record in records:
        record["referenced"] = record["event_id"] in referenced
    return records


def replica(templates: list[dict]) -> list:
    """One copy of the template runs with every id replaced by a fresh one (consistently).

    Only events that others refer to (measurements, verdicts, builds) are given their id; the
    rest get one from the ledger, which spares the append service's per-event idempotency
    lookup (a SELECT per event given an id: half the append time)."""
    from ledger.services import NewEvent

    fresh: dict[str, str] = {}

    def remap(text: str) -> str:
        return UUID.sub(lambda m: fresh.setdefault(m.group(0), str(uuid.uuid4())), text)

    events = []
    for record in templates:
        stream, payload = json.loads(remap(json.dumps([record["stream"], record["payload"]])))
        events.append(NewEvent(stream=stream, type=record["type"], payload=payload, actor=record["actor"],
                               event_id=uuid.UUID(remap(record["event_id"])) if record["referenced"] else None,
                               schema_version=record["schema_version"]))
    return events


def seed() -> None:
    """What `./dev run` starts from: matrices and the committed exports of real runs."""
    from django.core.management import call_command

    call_command("seed_demo", stdout=io.StringIO())


def catch_up_projections() -> float | None:
    """A ledger built by older code lacks the projections added since (their state lags the
    head): rebuild them all, as `ledger rebuild` after an upgrade. Returns the seconds taken."""
    from ledger.models import ProjectionState
    from ledger.projection_base import registered
    from ledger.verification import rebuild_projections

    head = event_count()
    states = dict(ProjectionState.objects.values_list("name", "last_position"))
    if all(states.get(projection.name) == head for projection in registered()):
        return None
    log("projections lag the head (ledger built by older code): rebuilding them")
    started = time.monotonic()
    rebuild_projections()
    return round(time.monotonic() - started, 1)


def event_count() -> int:
    from ledger.services import head

    return head()[0]


def fill(target: int, batch: int) -> dict:
    """Append replicas until the ledger holds at least `target` events."""
    from ledger.services import append_many

    templates = template_events()
    start_count, started, cpu_started = event_count(), time.monotonic(), time.process_time()
    count, pending = start_count, []
    while count < target:
        pending.extend(replica(templates))
        while len(pending) >= batch or (pending and count + len(pending) >= target):
            chunk, pending = pending[:batch], pending[batch:]
            append_many(chunk)
            count += len(chunk)
            if count // 50_000 != (count - len(chunk)) // 50_000:
                rate = (count - start_count) / (time.monotonic() - started)
                log(f"  {count:,} events ({rate:,.0f} events/s)")
            if count >= target:
                break
    wall = time.monotonic() - started
    appended = event_count() - start_count
    return {"appended": appended, "wall_s": round(wall, 1), "cpu_s": round(time.process_time() - cpu_started, 1),
            "events_per_s": round(appended / wall) if appended else None, "batch": batch}


# ---- measuring ------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))  # nearest rank
    return ordered[index]


def measure_page(client, url: str, warmup: int, requests: int) -> dict:
    from django.db import connection

    for _ in range(warmup):
        response = client.get(url)
        if response.status_code != 200:
            raise SystemExit(f"{url} answered {response.status_code}: {response.content[:300]!r}")
    statements = []
    with connection.execute_wrapper(lambda execute, sql, params, many, context: statements.append(sql) or execute(sql, params, many, context)):
        response = client.get(url)
    timings = []
    for _ in range(requests):
        started = time.perf_counter()
        client.get(url)
        timings.append((time.perf_counter() - started) * 1000)
    return {
        "url": url, "requests": requests, "warmup": warmup,
        "p50_ms": round(statistics.median(timings), 1), "p95_ms": round(percentile(timings, 95), 1),
        "max_ms": round(max(timings), 1), "min_ms": round(min(timings), 1),
        "sql_statements": len(statements), "response_bytes": len(response.content),
        "timings_ms": [round(t, 2) for t in timings],
    }


def busiest_stream() -> dict:
    """How much history the measured case detail has: its result stream's events by type."""
    from django.db.models import Count

    from ledger.models import Event

    backend, case = BUSIEST_CASE
    counts = Event.objects.filter(stream=f"operator/{backend}/{case}").values("type").annotate(n=Count("position"))
    return {row["type"]: row["n"] for row in counts}


def projection_rows() -> dict:
    from ledger.projection_base import registered

    return {projection.name: projection.model.objects.count() for projection in registered()}


def database_facts() -> dict:
    from django.db import connection

    if connection.vendor == "sqlite":
        path = Path(connection.settings_dict["NAME"])
        size = sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))
        return {"vendor": "sqlite", "version": connection.Database.sqlite_version, "bytes": size}
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_database_size(current_database()), version()")
        size, version = cursor.fetchone()
    return {"vendor": connection.vendor, "version": version.split(",")[0], "bytes": size}


def measure_size(size: int, args) -> dict:
    from django.test import Client

    client = Client()
    loads = [round(x, 2) for x in os.getloadavg()]
    results = {}
    for name, url in pages().items():
        results[name] = measure_page(client, url, args.warmup, args.requests)
        log(f"  {name}: p95 {results[name]['p95_ms']} ms, p50 {results[name]['p50_ms']} ms, "
            f"{results[name]['sql_statements']} SQL statements")
    return {
        "events": event_count(), "pages": results, "load_average_before": loads,
        "case_detail_stream": busiest_stream(),
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "database": database_facts(), "projection_rows": projection_rows(),
        "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


# ---- results --------------------------------------------------------------------------------


def machine_facts() -> dict:
    import django

    cpu_model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                      if line.startswith("model name")), None)
    git = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    dirty = bool(subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True).stdout.strip())
    return {"cpu_count": os.cpu_count(), "cpu_model": cpu_model, "python": platform.python_version(),
            "django": django.get_version(), "git_commit": git, "working_tree_dirty": dirty}


def write_results(path: Path, key: str, entry: dict) -> dict:
    """Merge the entry in; a re-measurement of the same built ledger keeps how it was built."""
    data = json.loads(path.read_text()) if path.exists() else {}
    data.setdefault("target", {"p95_ms": TARGET_MS, "events": TARGET_EVENTS})
    previous = data.setdefault("runs", {}).get(key)
    if previous and not entry["fill"]["appended"] and previous.get("ledger_dir") == entry["ledger_dir"]:
        entry["fill"] = previous["fill"]
        for name in ("projections_rebuilt_s", "note"):
            entry[name] = entry.get(name) or previous.get(name)
    data["runs"][key] = entry
    path.write_text(json.dumps(data, indent=1) + "\n")
    return data


def markdown(data: dict) -> str:
    lines = [
        "# Audit UI render times",
        "",
        "Generated by `benchmarks/ui_render.py` from [`ui_render.json`](ui_render.json) (raw timings there);",
        "do not edit by hand. p95 over the timed requests of each page, after warm-up, through Django's",
        f"test client with DEBUG off. Target: p95 <= {TARGET_MS:.0f} ms at {TARGET_EVENTS:,} events.",
        "",
        "Workload: the demo seed (matrices; the committed CPU campaign, bundled-apps gate and H200",
        "campaign), then replicas of those runs with fresh ids, appended through `append_many`. Every",
        "replica re-forges the same cases, so a case's result stream, and with it the history that its",
        "case detail shows, grows with the ledger (counts under each run).",
        "",
        "| database | events | page | p50 ms | p95 ms | max ms | SQL | KiB | p95 <= target |",
        "|---|---:|---|---:|---:|---:|---:|---:|:---:|",
    ]
    for key, run in sorted(data["runs"].items(), key=lambda item: (item[1]["database"]["vendor"], item[1]["events"])):
        for name, page in run["pages"].items():
            met = "yes" if page["p95_ms"] <= TARGET_MS else "**no**"
            lines.append(f"| {run['database']['vendor']} | {run['events']:,} | {name} (`{page['url']}`) | {page['p50_ms']} | "
                         f"{page['p95_ms']} | {page['max_ms']} | {page['sql_statements']} | {page['response_bytes'] / 1024:.0f} | {met} |")
    lines += ["", "## Runs", ""]
    for key, run in sorted(data["runs"].items(), key=lambda item: (item[1]["database"]["vendor"], item[1]["events"])):
        facts, database, built = run["machine"], run["database"], run.get("fill")
        built_text = (f"appended {built['appended']:,} events in {built['wall_s']} s ({built['events_per_s']:,} events/s, "
                      f"batches of {built['batch']})" if built and built["appended"] else "ledger already at this size")
        lines += [
            f"- **{key}**: `{run['command']}`",
            f"  - {facts['cpu_count']} CPUs ({facts['cpu_model']}), Python {facts['python']}, Django {facts['django']}, "
            f"{database['vendor']} {database['version']}, database {database['bytes'] / 2**20:,.0f} MiB; "
            f"git {facts['git_commit']}{' with uncommitted changes' if facts['working_tree_dirty'] else ''}",
            f"  - {built_text}; load average {run['load_average_before']} before, {run['load_average_after']} after "
            f"measuring (a 2-core machine shared with other test runs)",
            "  - projection rows: " + ", ".join(f"{name} {rows:,}" for name, rows in run["projection_rows"].items() if rows),
        ]
        if run.get("projections_rebuilt_s"):
            lines.append(f"  - projections rebuilt before measuring (ledger built by older code): {run['projections_rebuilt_s']} s")
        if run.get("note"):
            lines.append(f"  - note: {run['note']}")
        if run.get("case_detail_stream"):
            lines.append("  - the measured case's result stream (its history on the case detail): "
                         + ", ".join(f"{n:,} {kind}" for kind, n in sorted(run["case_detail_stream"].items())))
    return "\n".join(lines) + "\n"


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, action="append", required=True, help="ledger size to measure at (repeatable)")
    parser.add_argument("--requests", type=int, default=30, help="timed requests per page (>= 30)")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--batch", type=int, default=2000, help="events per append_many while filling")
    parser.add_argument("--var-dir", help="FORGESTENCIL_VAR_DIR to build in or reuse (default: a fresh scratch one)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--md", type=Path)
    parser.add_argument("--note", help="what the numbers cannot say themselves (e.g. how a reused ledger was built)")
    args = parser.parse_args(argv)
    if args.requests < 30:
        parser.error("--requests must be at least 30")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    command = "benchmarks/ui_render.py " + shlex.join(sys.argv[1:] if argv is None else argv)
    # Served as in production: DEBUG off (no query log, no debug templates); the test client's host.
    os.environ["DEBUG"] = "false"
    os.environ.setdefault("SECRET_KEY", "ui-render-benchmark-" + uuid.uuid4().hex)
    os.environ["ALLOWED_HOSTS"] = "testserver"
    import scratch_ledger  # beside this file

    scratch_ledger.setup_django("ui-render", args.var_dir)
    log(f"ledger in {os.environ['FORGESTENCIL_VAR_DIR']}")
    if event_count() == 0:
        seed()
    rebuilt = catch_up_projections()
    facts = machine_facts()
    for size in sorted(args.events):
        log(f"filling to {size:,} events (now {event_count():,})")
        built = fill(size, args.batch)
        log(f"measuring at {event_count():,} events")
        entry = {**measure_size(size, args), "fill": built, "machine": facts, "command": command,
                 "ledger_dir": os.environ["FORGESTENCIL_VAR_DIR"], "projections_rebuilt_s": rebuilt, "note": args.note}
        key = f"{entry['database']['vendor']}-{size}"
        data = write_results(args.out, key, entry)
        if args.md:
            args.md.write_text(markdown(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
