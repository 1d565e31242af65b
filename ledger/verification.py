"""Verify and rebuild: the two ways the ledger proves its projections follow from its events.

`verify` recomputes every hash, the chain links, the stream versions and every checkpoint
(signed by a trusted key, or covered by one that is: ledger.trust), checks that nothing shows
the chain once reached further (ledger.witness), then replays all events into scratch
projections and compares them with the live tables. `rebuild` replays into scratch and
replaces the live tables with the result, unless the tail evidence says events are missing.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone as dt_timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from django.db import connection, transaction
from django.utils import timezone

from . import event_types, witness
from .canonical import GENESIS_HASH, chain_hash
from .checkpoints import trusted_public_keys
from .errors import LedgerError, UnknownEventType
from .models import Event, ProjectionState, VerificationRun
from .projection_base import MemoryRows, registered
from .records import RecordedEvent
from .services import iso_utc, lock_chain
from .trust import (SERVICE_HOW_TO_TRUST, Signed, covered_unknown, first_uncovered, places_held, signature_valid,
                    untrusted_message)

Progress = Callable[[int], None]
COLUMNS = ("position", "event_id", "stream", "version", "type", "schema_version", "actor", "recorded_at", "body", "prev_hash", "hash")


@dataclass
class VerifyReport:
    head_position: int = 0
    head_hash: str = GENESIS_HASH
    ledger_id: str | None = None
    events: int = 0
    checkpoints: int = 0
    covered_unknown: int = 0
    witnessed: int = 0
    projections_compared: int = 0
    problem: str | None = None
    bad_position: int | None = None

    @property
    def ok(self) -> bool:
        return self.problem is None

    def summary(self) -> str:
        if not self.ok:
            where = "" if self.bad_position is None else f" at position {self.bad_position}"
            return f"FAILED{where}: {self.problem}"
        text = (
            f"OK: {self.events} events, head #{self.head_position} {self.head_hash[:16]}…, "
            f"{self.checkpoints} checkpoints signed and matching, {self.projections_compared} projections identical on replay"
        )
        if self.covered_unknown:
            text += f"; {self.covered_unknown} checkpoints by keys not trusted here, each covered by a trusted one"
        if self.witnessed:
            text += f"; the chain reaches the {self.witnessed} signed heads witnessed outside the database"
        return text


class _Failure(Exception):
    def __init__(self, position: int | None, problem: str) -> None:
        super().__init__(problem)
        self.position = position
        self.problem = problem


def _rows() -> Iterator[tuple]:
    """Event rows straight from a (server-side, on PostgreSQL) cursor, without the ORM's
    per-row converters, which cost about a third of a verify; the two columns whose raw form
    differs by database (UUID, timestamp) are normalised to the body's form here."""
    with connection.chunked_cursor() as cursor:
        cursor.execute(f"SELECT {', '.join(COLUMNS)} FROM {Event._meta.db_table} ORDER BY position")
        while batch := cursor.fetchmany(5000):
            for row in batch:
                yield (row[0], _uuid_text(row[1]), *row[2:7], _timestamp_text(row[7]), *row[8:])


def _uuid_text(value) -> str:
    text = str(value)  # uuid.UUID on PostgreSQL; 32 hex digits on SQLite
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}" if len(text) == 32 else text


def _timestamp_text(value) -> str:
    if isinstance(value, str):  # "YYYY-MM-DD HH:MM:SS[.ffffff]", UTC
        value = datetime.fromisoformat(value)
    if value.tzinfo is None:  # SQLite keeps UTC without an offset
        value = value.replace(tzinfo=dt_timezone.utc)
    return iso_utc(value)


def _dispatch() -> dict[str, list]:
    """For each event type, the projections that handle it (checked once, not per event)."""
    projections = list(registered())
    return {name: [p for p in projections if p.handles is None or name in p.handles] for name in event_types.all_types()}


def check_positions(positions: Iterable[int]) -> str | None:
    """The first problem among these events, each checked as a full verify checks it, against
    its stored predecessor (None: they verify). Lets a page say whether the events under one
    result verify without walking the whole ledger."""
    positions = sorted(set(positions))
    wanted = set(positions) | {p - 1 for p in positions if p > 1}
    rows = {row[0]: row for row in Event.objects.filter(position__in=wanted).values_list(*COLUMNS)}
    for position in positions:
        row = rows.get(position)
        prev = GENESIS_HASH if position == 1 else rows.get(position - 1, (None,) * len(COLUMNS))[-1]
        if row is None or prev is None:
            return f"event #{position if row is None else position - 1} is missing"
        try:
            _check_row((row[0], str(row[1]), *row[2:7], iso_utc(row[7]), *row[8:]), position, prev)
        except _Failure as failure:
            return f"#{failure.position}: {failure.problem}"
    return None


def _check_row(row: tuple, expected_position: int, prev_hash: str) -> RecordedEvent:
    position, event_id, stream, version, type_, schema_version, actor, recorded_at, body, row_prev, row_hash = row
    if position != expected_position:
        what = "missing (deleted or renumbered)" if position > expected_position else "out of order"
        raise _Failure(expected_position, f"event at position {expected_position} is {what}; next stored position is {position}")
    if row_prev != prev_hash:
        raise _Failure(position, f"prev_hash {row_prev[:16]}… does not link to the previous event's hash {prev_hash[:16]}… (chain broken: event inserted, removed or reordered)")
    if chain_hash(row_prev, body) != row_hash:
        raise _Failure(position, "stored hash does not match sha256 of the stored canonical body (event edited)")
    try:
        event = RecordedEvent.from_body(body, row_prev, row_hash)
    except (ValueError, TypeError) as exc:
        raise _Failure(position, f"canonical body is not a valid event: {exc}") from None
    try:
        event_types.get(event.type)
    except UnknownEventType as exc:
        raise _Failure(position, str(exc)) from None
    columns = {"position": position, "event_id": event_id, "stream": stream, "version": version, "type": type_,
               "schema_version": schema_version, "actor": actor, "recorded_at": recorded_at}
    for name, value in columns.items():
        if getattr(event, name) != value:
            raise _Failure(position, f"column {name}={value!r} differs from the hashed body's {getattr(event, name)!r} (column edited)")
    return event


def verify_ledger(progress: Progress | None = None, replay: bool = True, held: Iterable[Path] = ()) -> VerifyReport:
    """`held`: exports or witness-file copies kept elsewhere, whose signed heads the chain must
    reach with the same hashes (what catches a rewrite by someone who also rewrote this host's
    witness file)."""
    report = VerifyReport()
    scratch = {projection.name: MemoryRows() for projection in registered()}
    stream_versions: dict[str, int] = {}
    origin_hashes: dict[tuple[str, int], str] = {}
    checkpoints: list[RecordedEvent] = []
    local_ledger: str | None = None
    prev_hash = GENESIS_HASH
    position = 0
    handlers = _dispatch()
    outermost = not connection.in_atomic_block
    trusted = trusted_public_keys()
    evidence = witness.evidence(held, trusted)  # before the snapshot: a checkpoint committed after it must not look missing
    try:
        with transaction.atomic():  # one consistent snapshot of the events and the projections
            if connection.vendor == "postgresql" and outermost:
                with connection.cursor() as cursor:
                    cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            for row in _rows():
                event = _check_row(row, position + 1, prev_hash)
                position, prev_hash = event.position, event.hash
                expected_version = stream_versions.get(event.stream, 0) + 1
                if event.version != expected_version:
                    raise _Failure(position, f"stream {event.stream} jumps to version {event.version}, expected {expected_version}")
                stream_versions[event.stream] = event.version
                origin_hashes.update(places_held(event.type, event.origin, event.data))
                if event.origin is None and event.type == "LedgerInitialised" and local_ledger is None:
                    local_ledger = event.data["ledger_id"]
                if event.type == "CheckpointSigned":
                    checkpoints.append(event)
                if replay:
                    for projection in handlers[event.type]:
                        projection.apply(event, scratch[projection.name])
                if progress and position % 100_000 == 0:
                    progress(position)
            report.events, report.head_position, report.head_hash = position, position, prev_hash
            report.ledger_id = local_ledger
            _check_checkpoints(checkpoints, local_ledger, origin_hashes, trusted, report)
            tail = witness.tail_problem(evidence, position, trusted, _hash_at, scan_rows=not replay)
            if tail is not None:
                raise _Failure(tail.position, tail.message())
            report.witnessed = len(evidence.signed)
            if replay:
                _compare_projections(scratch, position, report)
    except _Failure as failure:
        report.problem, report.bad_position = failure.problem, failure.position
    return report


def _hash_at(position: int) -> str | None:
    return Event.objects.filter(position=position).values_list("hash", flat=True).first()


def _check_checkpoints(checkpoints: list[RecordedEvent], local_ledger: str | None, origin_hashes: dict,
                       trusted: set[str], report: VerifyReport) -> None:
    signed_list = []
    for event in checkpoints:
        data = event.data
        if not signature_valid(data["public_key"], data["signature"], data["ledger_id"], data["head_position"], data["head_hash"]):
            raise _Failure(event.position, "checkpoint signature does not verify")
        if event.origin is None:
            if data["ledger_id"] != local_ledger:
                raise _Failure(event.position, f"checkpoint names ledger {data['ledger_id']}, not this ledger {local_ledger}")
            signed = _hash_at(data["head_position"])
        else:
            signed = origin_hashes.get((data["ledger_id"], data["head_position"]))
        if signed != data["head_hash"]:
            raise _Failure(data["head_position"], f"history differs from the checkpoint signed at position {event.position} (head hash {data['head_hash'][:16]}…)")
        signed_list.append(Signed(where=f"position {event.position}", ledger_id=data["ledger_id"],
                                  at=event.position if event.origin is None else event.origin["position"],
                                  local=event.position, head_position=data["head_position"],
                                  public_key=data["public_key"], own=event.origin is None))
        report.checkpoints += 1
    uncovered = first_uncovered(signed_list, trusted)
    if uncovered is not None:
        raise _Failure(uncovered.local, untrusted_message(uncovered, SERVICE_HOW_TO_TRUST))
    report.covered_unknown = len(covered_unknown(signed_list, trusted))


def _compare_projections(scratch: dict[str, MemoryRows], head_position: int, report: VerifyReport) -> None:
    states = dict(ProjectionState.objects.values_list("name", "last_position"))
    for projection in registered():
        applied = states.get(projection.name, 0 if head_position else None)
        if head_position and applied != head_position:  # ahead of the head: witness.tail_problem reported it
            first = (applied or 0) + 1
            raise _Failure(first, f"projection {projection.name} has applied events up to {applied or 0}, the head is "
                           f"{head_position}: a projection added since, or a bulk load of your own, needs `ledger rebuild`; "
                           f"if neither, events #{first}-{head_position} were inserted out of band, not by the append "
                           "service (which projects each event in the event's own transaction)")
        live = projection.live_rows()
        replayed = scratch[projection.name].rows
        if live != replayed:
            ahead = witness.rows_ahead(projection, live, head_position)
            if ahead is not None:
                raise _Failure(ahead.position, ahead.message())
            raise _Failure(None, f"projection {projection.name} differs from a replay of the events: {_first_difference(live, replayed)}")
        report.projections_compared += 1


def _first_difference(live: dict[Any, dict], replayed: dict[Any, dict]) -> str:
    for key in sorted(set(live) | set(replayed), key=str):
        if live.get(key) != replayed.get(key):
            return f"row {key!r}: live {json.dumps(live.get(key), default=str)} vs replay {json.dumps(replayed.get(key), default=str)}"
    return "no row differs"


def rebuild_projections(progress: Progress | None = None, override: str | None = None, actor: str = "") -> int:
    """Drop every projection table and replay all events into it; returns the head position.
    Refused while the witness or the projections show events the chain lacks (ledger.witness),
    unless `override` gives a reason (logged)."""
    witness.check_before_rebuild(override, actor, trusted_public_keys())
    return replay_projections(progress)


def replay_projections(progress: Progress | None = None) -> int:
    """Replace every projection table with a replay of all events (no tail check: for rebuild,
    and for restore, which fills an empty ledger)."""
    with transaction.atomic():
        lock_chain()
        scratch = {projection.name: MemoryRows() for projection in registered()}
        handlers = _dispatch()
        position = 0
        for row in Event.objects.order_by("position").values_list("body", "prev_hash", "hash").iterator(chunk_size=5000):
            event = RecordedEvent.from_body(*row)
            position = event.position
            for projection in handlers[event.type]:
                projection.apply(event, scratch[projection.name])
            if progress and position % 100_000 == 0:
                progress(position)
        for projection in registered():
            projection.replace_all(scratch[projection.name].rows)
        ProjectionState.objects.all().delete()
        ProjectionState.objects.bulk_create([ProjectionState(name=p.name, last_position=position) for p in registered()])
    return position


def run_verification(run_id: int, progress: Progress | None = None, held: Iterable[Path] = ()) -> VerificationRun:
    """Carry out a queued VerificationRun; a finished one is returned unchanged (idempotent)."""
    run = VerificationRun.objects.get(pk=run_id)
    if run.status in (VerificationRun.Status.PASSED, VerificationRun.Status.FAILED):
        return run
    VerificationRun.objects.filter(pk=run_id).update(status=VerificationRun.Status.RUNNING)
    try:
        report = verify_ledger(progress, held=held)
    except LedgerError as exc:  # a witness or keys file that cannot be read: the run fails, it does not hang
        report = VerifyReport(problem=str(exc))
    if report.ok and report.ledger_id:
        witness.record_verified(report.ledger_id, report.head_position, report.head_hash)
    run.status = VerificationRun.Status.PASSED if report.ok else VerificationRun.Status.FAILED
    run.head_position, run.head_hash, run.summary = report.head_position, report.head_hash, report.summary()
    run.finished_at = timezone.now()
    run.save()
    return run


def request_verification(requested_by: str) -> VerificationRun:
    return VerificationRun.objects.create(requested_by=requested_by)
