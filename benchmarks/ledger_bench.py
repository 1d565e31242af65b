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
import cProfile
import io
import json
import os
import platform
import pstats
import random
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "docs" / "benchmarks" / "ledger.json"
DEFAULT_PG_URL = "postgres://postgres@127.0.0.1:5432/ledger_bench"

# Targets from the issue, stated for a 2-core machine.
TARGET_PG_SINGLE_APPENDS_PER_S = 2000.0
TARGET_VERIFY_1M_S = 30.0
TARGET_REBUILD_1M_S = 120.0
ONE_MILLION = 1_000_000


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# ---- workload ------------------------------------------------------------------------------

STENCILS = ["star_1", "star_2", "box_1", "box_2", "heat3d", "wave3d", "jacobi", "laplace", "advect", "diffuse"]
SIZES = ["64x64x64", "128x128x128", "256x256x256", "512x512x64", "96x96x96",
         "192x192x192", "320x320x32", "1024x1024x1", "48x48x48", "384x384x16",
         "160x160x160", "224x224x224", "288x288x72", "448x448x8", "80x80x80",
         "112x112x112", "240x240x60", "352x352x44", "416x416x26", "480x480x30",
         "544x544x17", "608x608x13", "672x672x11", "736x736x9", "800x800x7"]
DTYPES = ["f32", "f64", "bf16", "f16"]
REASONS = ["re-run slower on quiet node", "thermal throttling in original run", "wrong clock domain",
           "baseline was not warmed up", "reviewer reproduction 4% slower", "driver update changed timings"]
REVIEWERS = [f"user:reviewer{i}" for i in range(8)]
ACTORS = ["user:alice", "user:bob", "agent:forge-bot", "worker:measure-01", "worker:measure-02"]


class Workload:
    """Deterministic stream of realistic NewEvents over `streams` result streams."""

    def __init__(self, streams: int = 1000, seed: int = 20240611, signoff_share: float = 0.4) -> None:
        from ledger.services import NewEvent

        self.NewEvent = NewEvent
        self.rng = random.Random(seed)
        keys = [f"case/{s}/{z}/{d}" for s in STENCILS for z in SIZES for d in DTYPES]
        self.rng.shuffle(keys)
        self.streams = keys[:streams]
        self.signoff_share = signoff_share
        self.value = {key: 2.0 + self.rng.random() * 2 for key in self.streams}

    def event(self):
        rng = self.rng
        stream = self.streams[int(len(self.streams) * rng.random() ** 1.3)]  # mild skew: some results are busier
        if rng.random() < self.signoff_share:
            payload = {"result": stream, "result_version": rng.randint(1, 12), "reviewer": rng.choice(REVIEWERS)}
            if rng.random() < 0.3:
                payload["comment"] = "numbers reproduced on the reference node"
            return self.NewEvent(stream=stream, type="AuditSignedOff", payload=payload, actor=rng.choice(REVIEWERS))
        before = self.value[stream]
        after = round(before * (0.9 + rng.random() * 0.09), 4)
        self.value[stream] = after if after > 0.5 else 3.0
        payload = {"result": stream, "from_value": before, "to_value": after, "reason": rng.choice(REASONS)}
        if rng.random() < 0.1:
            payload["rerun"] = f"run/{uuid.UUID(int=rng.getrandbits(128))}"
        return self.NewEvent(stream=stream, type="ResultDowngraded", payload=payload, actor=rng.choice(ACTORS))

    def batch(self, size: int) -> list:
        return [self.event() for _ in range(size)]


# ---- database setup (before Django is imported) --------------------------------------------


def prepare_database(args) -> dict:
    """Create the fresh database, set DATABASE_URL & co; return facts about where it lives."""
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
    var_dir = Path(tempfile.mkdtemp(prefix="ledger_bench_var_", dir=args.tmp_dir))
    os.environ["FORGESTENCIL_VAR_DIR"] = str(var_dir)  # keep the signing key etc. out of var/
    if not args.debug:
        os.environ["DEBUG"] = "0"  # production-like: no query log
        os.environ.setdefault("SECRET_KEY", "ledger-bench-only-not-a-secret")
    else:
        os.environ["DEBUG"] = "1"
    if args.db == "sqlite":
        path = Path(args.sqlite_path) if args.sqlite_path else var_dir / "ledger_bench.sqlite3"
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        os.environ["DATABASE_URL"] = f"sqlite:///{path}"
        return {"var_dir": str(var_dir), "sqlite_path": str(path)}
    import psycopg
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(args.pg_url)
    name = parts.path.lstrip("/")
    if "bench" not in name and not args.force_drop:
        raise SystemExit(f"refusing to drop database {name!r}: its name lacks 'bench' (use --force-drop)")
    admin_url = urlunsplit(("postgresql", parts.netloc, "/postgres", "", ""))
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    os.environ["DATABASE_URL"] = args.pg_url
    return {"var_dir": str(var_dir), "pg_database": name}


def setup_django() -> None:
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)


# ---- facts ---------------------------------------------------------------------------------


def _git(*cmd: str) -> str | None:
    try:
        return subprocess.run(["git", *cmd], cwd=ROOT, capture_output=True, text=True, timeout=10).stdout.strip()
    except Exception:
        return None


def source_fingerprint() -> str:
    import hashlib

    digest = hashlib.sha256()
    for path in sorted((ROOT / "ledger").glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def machine_facts(args) -> dict:
    import django
    from django.db import connection

    cpu_model = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_gib = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    facts = {
        "cpu_count": os.cpu_count(),
        "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cpu_model": cpu_model,
        "memory_gib": mem_gib,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "django": django.get_version(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "django_debug": bool(args.debug),
        "git_commit": os.environ.get("LEDGER_BENCH_SNAPSHOT") or _git("rev-parse", "HEAD"),
        "code": ("clean snapshot of git_commit (--snapshot)" if os.environ.get("LEDGER_BENCH_SNAPSHOT")
                 else "working tree" + (" (ledger/ has uncommitted changes)"
                                        if _git("status", "--porcelain", "--", "ledger") else "")),
        # the tree is edited while benchmarks run: fingerprint the ledger code this run imported
        "ledger_source_sha256": source_fingerprint(),
    }
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SHOW server_version")
            facts["database_server"] = f"PostgreSQL {cursor.fetchone()[0]}"
            settings = {}
            for name in ("synchronous_commit", "fsync", "shared_buffers", "work_mem", "max_wal_size"):
                cursor.execute(f"SHOW {name}")
                settings[name] = cursor.fetchone()[0]
            facts["database_settings"] = settings
            import psycopg

            facts["driver"] = f"psycopg {psycopg.__version__}"
        else:
            cursor.execute("select sqlite_version()")
            facts["database_server"] = f"SQLite {cursor.fetchone()[0]}"
            settings = {}
            for name in ("journal_mode", "synchronous", "cache_size", "page_size"):
                cursor.execute(f"PRAGMA {name}")
                settings[name] = cursor.fetchone()[0]
            settings["transaction_mode"] = connection.settings_dict["OPTIONS"].get("transaction_mode")
            facts["database_settings"] = settings
    return facts


def database_bytes(db_info: dict) -> int | None:
    from django.db import connection

    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_database_size(current_database())")
            return int(cursor.fetchone()[0])
    path = db_info.get("sqlite_path")
    return sum(Path(f"{path}{s}").stat().st_size for s in ("", "-wal") if Path(f"{path}{s}").exists())


def event_count() -> int:
    from ledger.services import head

    return head()[0]


# ---- measurements --------------------------------------------------------------------------


class QueryStats:
    """Counts SQL statements and the time spent inside the driver's execute (round trip + server)."""

    def __init__(self) -> None:
        self.count = 0
        self.seconds = 0.0
        self.by_kind: dict[str, list] = {}

    def __call__(self, execute, sql, params, many, context):
        t0 = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            elapsed = time.perf_counter() - t0
            self.count += 1
            self.seconds += elapsed
            kind = self.kind(sql)
            entry = self.by_kind.setdefault(kind, [0, 0.0])
            entry[0] += 1
            entry[1] += elapsed

    @staticmethod
    def kind(sql: str) -> str:
        if "pg_advisory_xact_lock" in sql:
            return "SELECT pg_advisory_xact_lock"
        words = sql.replace("(", " ").split()
        upper = [w.upper() for w in words]
        verb = upper[0] if upper else "?"
        keyword = {"INSERT": "INTO", "UPDATE": "UPDATE", "SELECT": "FROM", "DELETE": "FROM"}.get(verb)
        table = ""
        if keyword in upper:
            index = upper.index(keyword)
            if index + 1 < len(words):
                table = words[index + 1].strip('"')
        return f"{verb} {table}".strip()

    def facts(self, per: int) -> dict:
        top = sorted(self.by_kind.items(), key=lambda kv: -kv[1][1])
        return {
            "statements": self.count,
            "statements_per_event": round(self.count / per, 2) if per else None,
            "statement_time_s": round(self.seconds, 3),
            "by_statement": {k: {"count": n, "s": round(t, 3)} for k, (n, t) in top},
        }


class Phase:
    """Wall and process-CPU time of a block (and, with --profile, a cProfile dump)."""

    def __init__(self, name: str, profile_dir: Path | None = None, count_queries: bool = False) -> None:
        self.name = name
        self.profile_dir = profile_dir
        self.profiler = cProfile.Profile() if profile_dir else None
        self.queries = QueryStats() if count_queries else None

    def __enter__(self) -> "Phase":
        if self.queries:
            from django.db import connection

            self._wrapper = connection.execute_wrapper(self.queries)
            self._wrapper.__enter__()
        self.load_before = os.getloadavg()[0]
        self.cpu0, self.t0 = time.process_time(), time.perf_counter()
        if self.profiler:
            self.profiler.enable()
        return self

    def __exit__(self, *exc) -> None:
        if self.profiler:
            self.profiler.disable()
        if self.queries:
            self._wrapper.__exit__(None, None, None)
        self.wall = time.perf_counter() - self.t0
        self.cpu = time.process_time() - self.cpu0
        self.load_after = os.getloadavg()[0]
        if self.profiler and exc[0] is None:
            self.profile_dir.mkdir(parents=True, exist_ok=True)
            self.profiler.dump_stats(self.profile_dir / f"{self.name}.prof")
            text = io.StringIO()
            stats = pstats.Stats(self.profiler, stream=text)
            stats.sort_stats("cumulative").print_stats(40)
            stats.sort_stats("tottime").print_stats(30)
            (self.profile_dir / f"{self.name}.txt").write_text(text.getvalue())

    def facts(self) -> dict:
        return {
            "wall_s": round(self.wall, 3),
            "process_cpu_s": round(self.cpu, 3),
            "load_1m_before_after": [round(self.load_before, 2), round(self.load_after, 2)],
        }


def measure_single(workload: Workload, count: int, label: str, profile_dir) -> dict:
    from ledger.services import append

    events = workload.batch(count)
    size_before = event_count()
    with Phase(label, profile_dir, count_queries=True) as phase:
        for new in events:
            append(new)
    result = {"appends": count, "ledger_events_before": size_before, "appends_per_s": round(count / phase.wall, 1)}
    result.update(phase.facts())
    result["sql"] = phase.queries.facts(count)
    log(f"  {label}: {count:,} appends in {phase.wall:.2f}s = {count / phase.wall:,.0f}/s (ledger at {size_before:,})")
    return result


def measure_batched(workload: Workload, count: int, batch: int, label: str, profile_dir) -> dict:
    from ledger.services import append_many

    size_before = event_count()
    batches = [workload.batch(batch) for _ in range(count // batch)]
    with Phase(label, profile_dir, count_queries=True) as phase:
        for events in batches:
            append_many(events)
    total = batch * len(batches)
    result = {
        "events": total,
        "batch_size": batch,
        "ledger_events_before": size_before,
        "events_per_s": round(total / phase.wall, 1),
        "batches_per_s": round(len(batches) / phase.wall, 2),
    }
    result.update(phase.facts())
    result["sql"] = phase.queries.facts(total)
    log(f"  {label}: {total:,} events in {phase.wall:.2f}s = {total / phase.wall:,.0f}/s")
    return result


def median_of(repeat: int, key: str, measure) -> dict:
    """Run `measure` `repeat` times; keep the run with the median rate, list all rates."""
    runs = [measure(i) for i in range(repeat)]
    ordered = sorted(runs, key=lambda r: r[key])
    chosen = dict(ordered[(len(ordered) - 1) // 2])
    chosen["repeats"] = repeat
    chosen[f"all_{key}"] = [r[key] for r in runs]
    return chosen


def fill(workload: Workload, target: int, batch: int, deadline: float) -> dict:
    """Append batches until the ledger holds `target` events or `deadline` (monotonic) passes."""
    from ledger.services import append_many

    start_count = event_count()
    position = start_count
    t0 = time.perf_counter()
    last_report = t0
    generate = 0.0
    aborted = None
    with Phase("fill", count_queries=True) as phase:
        while position < target:
            if time.monotonic() > deadline:
                aborted = "fill time limit reached (--max-fill-minutes)"
                break
            g0 = time.perf_counter()
            events = workload.batch(min(batch, target - position))
            generate += time.perf_counter() - g0
            position = append_many(events)[-1].position
            now = time.perf_counter()
            if now - last_report >= 5 or position >= target:
                done = position - start_count
                rate = done / (now - t0)
                eta = (target - position) / rate if rate else 0
                log(f"  fill: {position:,}/{target:,} ({100 * position / target:.1f}%) "
                    f"{rate:,.0f} ev/s, eta {eta / 60:.1f} min")
                last_report = now
    appended = position - start_count
    sql = phase.queries.facts(appended or 1)
    result = {
        "mode": "append_many",
        "sql_statement_time_s": sql["statement_time_s"],
        "sql_by_statement": sql["by_statement"],
        "from_events": start_count,
        "to_events": position,
        "events_per_s": round(appended / phase.wall, 1) if phase.wall else None,
        "workload_generation_s": round(generate, 3),
    }
    result.update(phase.facts())
    if aborted:
        result["aborted"] = aborted
    return result


def fill_direct(workload: Workload, target: int, batch: int, deadline: float) -> dict:
    """Write the same kind of events straight into the events table, projections NOT updated.

    Only to reach large sizes quickly when append_many is too slow: each event is validated
    and sealed by the ledger's own code (services._validate/_seal/_row, so the bodies, hashes
    and columns are exactly what append() would store) and bulk-inserted in batches, one
    transaction each. The projections lag behind until `rebuild_projections()` runs, so in
    this mode rebuild is timed before verify. verify then checks every hash, link and column.
    """
    from django.db import transaction
    from django.db.models import Max
    from ledger import services
    from ledger.models import Event

    start_count = event_count()
    position, prev_hash = services.head()
    versions = dict(Event.objects.values("stream").annotate(v=Max("version")).values_list("stream", "v"))
    t0 = last_report = time.perf_counter()
    generate = 0.0
    aborted = None
    with Phase("fill_direct") as phase:
        while position < target:
            if time.monotonic() > deadline:
                aborted = "fill time limit reached (--max-fill-minutes)"
                break
            g0 = time.perf_counter()
            events = workload.batch(min(batch, target - position))
            generate += time.perf_counter() - g0
            rows = []
            for new in events:
                new, payload, schema_version = services._validate(new)
                position += 1
                versions[new.stream] = versions.get(new.stream, 0) + 1
                sealed = services._seal(new, payload, schema_version, position, versions[new.stream], prev_hash)
                prev_hash = sealed.hash
                rows.append(services._row(sealed))
            with transaction.atomic():
                services.lock_chain()
                Event.objects.bulk_create(rows)
            now = time.perf_counter()
            if now - last_report >= 5 or position >= target:
                rate = (position - start_count) / (now - t0)
                log(f"  fill (direct): {position:,}/{target:,} ({100 * position / target:.1f}%) "
                    f"{rate:,.0f} ev/s, eta {(target - position) / rate / 60:.1f} min")
                last_report = now
    result = {
        "mode": "direct_bulk_insert (no inline projections; rebuild timed before verify)",
        "from_events": start_count,
        "to_events": position,
        "events_per_s": round((position - start_count) / phase.wall, 1) if phase.wall else None,
        "workload_generation_s": round(generate, 3),
    }
    result.update(phase.facts())
    if aborted:
        result["aborted"] = aborted
    return result


def measure_verify(profile_dir, label: str) -> dict:
    from ledger.verification import verify_ledger

    with Phase(label, profile_dir) as phase:
        report = verify_ledger(progress=lambda p: log(f"  verify: {p:,} events…"))
    result = {"ok": report.ok, "events": report.events, "summary": report.summary()}
    result.update(phase.facts())
    log(f"  verify: {report.summary()} [{phase.wall:.2f}s]")
    return result


def measure_rebuild(profile_dir, label: str) -> dict:
    from ledger.verification import rebuild_projections
    from ledger.services import head

    expected = head()[0]
    with Phase(label, profile_dir) as phase:
        position = rebuild_projections(progress=lambda p: log(f"  rebuild: {p:,} events…"))
    result = {"head_position": position, "ok": position == expected}
    result.update(phase.facts())
    log(f"  rebuild: {position:,} events replayed [{phase.wall:.2f}s]")
    return result


def projection_rows() -> dict:
    from ledger.projection_base import registered

    return {p.name: p.model.objects.count() for p in registered()}


# ---- JSON merge and targets ----------------------------------------------------------------


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


# ---- main ----------------------------------------------------------------------------------


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", choices=["sqlite", "postgres"], help="which database to benchmark")
    parser.add_argument("--events", type=int, action="append", default=[],
                        help="ledger size at which to time verify and rebuild (repeatable; e.g. 100000 1000000)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="JSON file to merge results into")
    parser.add_argument("--table", action="store_true", help="print the markdown table from --out and exit")
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
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL, help="PostgreSQL database to DROP and recreate")
    parser.add_argument("--force-drop", action="store_true", help="allow --pg-url names without 'bench'")
    parser.add_argument("--sqlite-path", help="SQLite file to (re)create (default: a temp dir)")
    parser.add_argument("--snapshot", metavar="GIT_REF", nargs="?", const="HEAD",
                        help="benchmark a clean `git archive` of GIT_REF (default HEAD) instead of the working tree")
    parser.add_argument("--tmp-dir", help="where temp dirs go (default: system temp)")
    parser.add_argument("--keep", action="store_true", help="keep the benchmark database afterwards")
    parser.add_argument("--debug", action="store_true", help="run with DEBUG on (query log); default off like production")
    parser.add_argument("--profile", type=Path, help="write cProfile dumps (.prof) and top-function text per phase here")
    parser.add_argument("--no-write", action="store_true", help="do not merge into --out (profiling runs)")
    args = parser.parse_args(argv)
    if not args.table and not args.db:
        parser.error("--db is required unless --table")
    return args


def drop_database(args, db_info: dict) -> None:
    if args.db == "postgres":
        import psycopg
        from urllib.parse import urlsplit, urlunsplit

        parts = urlsplit(args.pg_url)
        with psycopg.connect(urlunsplit(("postgresql", parts.netloc, "/postgres", "", "")), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{parts.path.lstrip("/")}"')
    shutil.rmtree(db_info["var_dir"], ignore_errors=True)
    if args.sqlite_path:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{args.sqlite_path}{suffix}").unlink(missing_ok=True)


def run_in_snapshot(args, command: str, argv: list[str]) -> int:
    """Re-run this script from `git archive <ref>` in a temp dir, so edits made to the working
    tree while a long benchmark runs (imports happen lazily) cannot leak into it."""
    commit = _git("rev-parse", args.snapshot)
    if not commit:
        raise SystemExit(f"cannot resolve git ref {args.snapshot!r}")
    snap = Path(tempfile.mkdtemp(prefix=f"ledger_bench_src_{commit[:8]}_", dir=args.tmp_dir))
    archive = subprocess.run(["git", "archive", commit], cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(snap)], input=archive, check=True)
    (snap / "benchmarks").mkdir(exist_ok=True)
    shutil.copy2(__file__, snap / "benchmarks" / "ledger_bench.py")  # this version of the bench itself
    env = dict(os.environ, LEDGER_BENCH_SNAPSHOT=commit, LEDGER_BENCH_COMMAND=command)
    child_argv = list(argv) + ["--out", str(args.out.resolve())]
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
        return 0

    command = os.environ.get("LEDGER_BENCH_COMMAND") or shlex.join(
        [".venv/bin/python" if Path(sys.executable).parent.parent == ROOT / ".venv" else sys.executable,
         os.path.relpath(__file__, ROOT) if Path(__file__).is_relative_to(ROOT) else __file__,
         *(argv if argv is not None else sys.argv[1:])])
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

        for new in workload.batch(args.warmup):  # warm caches, connection, pydantic
            from ledger.services import append

            append(new)
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
