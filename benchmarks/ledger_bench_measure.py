"""Timed phases of benchmarks/ledger_bench.py: single and batched appends, fills to a size,
verify and rebuild, each with wall and CPU time, load and the SQL statements it issued."""
from __future__ import annotations

import cProfile
import io
import os
import pstats
import re
import time
from pathlib import Path

from ledger_bench_setup import Workload, event_count, log


class QueryStats:
    """Counts the driver's executes (each one round trip) and the time spent inside them (round
    trip + server). A batch of several statements in one execute (the append's, on PostgreSQL)
    counts once, named by the statements in it."""

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
        if "; " in sql:  # a batch: its statements' verbs, prepared ones as EXECUTE
            return "; ".join(part.split(None, 1)[0].upper() for part in sql.split("; ") if part.strip())
        if "pg_advisory_xact_lock" in sql:
            return "SELECT pg_advisory_xact_lock"
        verb = sql.split(None, 1)[0].upper() if sql.strip() else "?"
        # the first table named (lower case) after FROM / INTO / UPDATE, skipping subqueries
        table = re.search(r'\b(?:FROM|INTO|UPDATE)\s+"?([a-z_][a-z0-9_]*)', sql)
        return f"{verb} {table.group(1) if table else ''}".strip()

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


def _fill_loop(workload: Workload, target: int, batch: int, deadline: float, phase: "Phase", label: str,
               write) -> dict:
    """Generate batches and `write` them (returns the new head position) until the ledger holds
    `target` events or `deadline` (monotonic) passes; progress on stderr."""
    start_count = position = event_count()
    t0 = last_report = time.perf_counter()
    generate = 0.0
    result: dict = {"from_events": start_count}
    with phase:
        while position < target:
            if time.monotonic() > deadline:
                result["aborted"] = "fill time limit reached (--max-fill-minutes)"
                break
            g0 = time.perf_counter()
            events = workload.batch(min(batch, target - position))
            generate += time.perf_counter() - g0
            position = write(events)
            now = time.perf_counter()
            if now - last_report >= 5 or position >= target:
                rate = (position - start_count) / (now - t0)
                eta = (target - position) / rate if rate else 0
                log(f"  {label}: {position:,}/{target:,} ({100 * position / target:.1f}%) "
                    f"{rate:,.0f} ev/s, eta {eta / 60:.1f} min")
                last_report = now
    result.update(to_events=position, workload_generation_s=round(generate, 3),
                  events_per_s=round((position - start_count) / phase.wall, 1) if phase.wall else None)
    result.update(phase.facts())
    return result


def fill(workload: Workload, target: int, batch: int, deadline: float) -> dict:
    """Append batches until the ledger holds `target` events or `deadline` (monotonic) passes."""
    from ledger.services import append_many

    phase = Phase("fill", count_queries=True)
    result = _fill_loop(workload, target, batch, deadline, phase, "fill", lambda events: append_many(events)[-1].position)
    sql = phase.queries.facts((result["to_events"] - result["from_events"]) or 1)
    return {"mode": "append_many", "sql_statement_time_s": sql["statement_time_s"], "sql_by_statement": sql["by_statement"],
            **result}


def fill_direct(workload: Workload, target: int, batch: int, deadline: float) -> dict:
    """Write the same kind of events straight into the events table, projections NOT updated.

    Only to reach large sizes quickly when append_many is too slow: each event is validated
    and sealed by the ledger's own code (services._validate/_seal/_insert, so the bodies, hashes
    and columns are exactly what append() would store) and inserted in batches, one
    transaction each. The projections lag behind until `rebuild_projections()` runs, so in
    this mode rebuild is timed before verify. verify then checks every hash, link and column.
    """
    from django.db import transaction
    from django.db.models import Max
    from ledger import services
    from ledger.append_sql import Session
    from ledger.models import Event

    position, prev_hash = services.head()
    versions = dict(Event.objects.values("stream").annotate(v=Max("version")).values_list("stream", "v"))

    def write(events) -> int:
        nonlocal position, prev_hash
        sealed_batch = []
        for new in events:
            new, payload, schema_version = services._validate(new)
            position += 1
            versions[new.stream] = versions.get(new.stream, 0) + 1
            sealed = services._seal(new, payload, schema_version, position, versions[new.stream], prev_hash)
            prev_hash = sealed.hash
            sealed_batch.append(sealed)
        session = Session()
        with transaction.atomic():
            services.lock_chain(session)
            services._insert(session, sealed_batch)
            session.finish()
        return position

    result = _fill_loop(workload, target, batch, deadline, Phase("fill_direct"), "fill (direct)", write)
    return {"mode": "direct_bulk_insert (no inline projections; rebuild timed before verify)", **result}


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

