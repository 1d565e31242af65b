"""The append service: the only code that writes events, and so the only writer of facts.

Appends are serialised (PostgreSQL advisory lock; SQLite IMMEDIATE transactions) so the
hash chain stays global and linear with any number of concurrent writers, and projections
are updated inline in the same transaction.
"""
from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone as dt_timezone
from typing import Any, Callable, Sequence

from django.db import transaction
from django.utils import timezone

from . import event_types
from .append_sql import Session
from .canonical import GENESIS_HASH, chain_hash, event_body
from .errors import ConcurrencyError, IdempotencyConflict, LedgerError
from .models import Event, ProjectionState
from .projection_base import Projection, TableRows, registered, request_rows
from .records import RecordedEvent

CHAIN_LOCK_KEY = 0x466F726765  # arbitrary, fixed: "Forge"
LOCK_SQL = f"SELECT pg_advisory_xact_lock({CHAIN_LOCK_KEY})"
STREAM_PATTERN = re.compile(r"^\S{1,255}$")


@dataclass(frozen=True)
class NewEvent:
    stream: str
    type: str
    payload: dict[str, Any]
    actor: str
    event_id: uuid.UUID | None = None  # the idempotency key; give one to make retries safe
    expected_version: int | None = None  # None: any; 0: the stream must not exist yet
    origin: dict[str, Any] | None = field(default=None)  # set only by import
    schema_version: int | None = None  # None: the type's latest; older only for imports


def lock_chain(session: Session | None = None) -> None:
    """Serialise writers. Call inside a transaction; released at commit or rollback. Given a
    session, the lock is queued before its reads and taken when they are sent."""
    if session is None:
        session = Session()
        if session.postgres:
            session.write(LOCK_SQL, [])
    elif session.postgres:
        session.read(LOCK_SQL, [])
    # SQLite: settings open every transaction IMMEDIATE, which takes the single write lock.


def head() -> tuple[int, str]:
    row = Event.objects.order_by("-position").values_list("position", "hash").first()
    return row if row else (0, GENESIS_HASH)


def record_from_row(event: Event) -> RecordedEvent:
    return RecordedEvent.from_body(event.body, event.prev_hash, event.hash)


def iso_utc(moment) -> str:
    return moment.astimezone(dt_timezone.utc).isoformat(timespec="microseconds")


def append(new: NewEvent) -> RecordedEvent:
    return append_many([new])[0]


def append_many(new_events: Sequence[NewEvent]) -> list[RecordedEvent]:
    """Append events atomically, in order: all are recorded or none is.

    Two round trips on PostgreSQL: the lock, the chain head with the stream versions, the
    events named by id and the projection rows the events touch are read in one (with BEGIN,
    outside any atomic block); the events are sealed and projected in memory; their INSERT,
    every projection write and the positions go as one statement with COMMIT in the second
    (ledger.append_sql.Session).
    Every read that decides something runs after the lock is granted, in the same transaction
    as the writes (docs/ledger_benchmarks.md measures it)."""
    validated = [_validate(new) for new in new_events]
    session = Session()
    with session.transaction():
        lock_chain(session)
        chain = _ChainState(session, {new.stream for new, _, _ in validated})
        known = _events_by_id(session, [new.event_id for new, _, _ in validated if new.event_id is not None])
        work = _read_projected_rows(session, [_unsealed(*each) for each in validated])
        session.send()
        recorded, fresh = _sequence(validated, chain(), known())
        if fresh:
            _insert(session, fresh)
            _project(session, work(), fresh)
            _record_positions(session, fresh, chain.states)
        session.finish()
    return recorded


def _sequence(
    validated: list[tuple[NewEvent, dict[str, Any], int]],
    chain: tuple[int, str, dict[str, int]],
    known: dict[uuid.UUID, RecordedEvent],
) -> tuple[list[RecordedEvent], list[RecordedEvent]]:
    """Seal the events in order after the chain head; an id already stored (or repeated in
    this batch) is a retry and returns the first. Returns (every event, the new ones)."""
    position, prev_hash, stream_versions = chain
    recorded: list[RecordedEvent] = []
    fresh: list[RecordedEvent] = []
    for new, payload, schema_version in validated:
        if new.event_id is not None and (existing := known.get(_uuid(new.event_id))) is not None:
            recorded.append(_same_or_refuse(existing, new, payload, schema_version))
            continue
        version = stream_versions[new.stream]
        if new.expected_version is not None and new.expected_version != version:
            raise ConcurrencyError(
                f"stream {new.stream!r} is at version {version}, but the writer expected "
                f"{new.expected_version}; re-read the stream and decide again"
            )
        position += 1
        version += 1
        stream_versions[new.stream] = version
        event = _seal(new, payload, schema_version, position, version, prev_hash)
        prev_hash = event.hash
        recorded.append(event)
        fresh.append(event)
        if new.event_id is not None:
            known[_uuid(new.event_id)] = event
    return recorded, fresh


def _validate(new: NewEvent) -> tuple[NewEvent, dict[str, Any], int]:
    if not isinstance(new.stream, str) or not STREAM_PATTERN.match(new.stream):
        raise LedgerError(f"stream must be 1-255 characters without whitespace, got {new.stream!r}")
    if not isinstance(new.actor, str) or not new.actor.strip():
        raise LedgerError("actor must name the user, agent or worker that caused the event")
    schema_version = new.schema_version or event_types.get(new.type).latest_version
    return new, event_types.validate(new.type, schema_version, new.payload), schema_version


def _uuid(value: uuid.UUID | str) -> uuid.UUID:
    return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))


def _events_by_id(session: Session, event_ids: list[uuid.UUID | str]) -> Callable[[], dict[uuid.UUID, RecordedEvent]]:
    """Queue the read of the stored events among these ids (idempotent retries), one statement
    per 500; returns what gives them once the session has sent its reads."""
    ids = list({_uuid(event_id) for event_id in event_ids})
    field = Event._meta.get_field("event_id")
    reads = []
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        reads.append(session.read(
            f"SELECT body, prev_hash, hash FROM ledger_event WHERE event_id IN ({', '.join(['%s'] * len(chunk))})",
            [field.get_db_prep_value(event_id, session.connection) for event_id in chunk],
        ))

    def fetch() -> dict[uuid.UUID, RecordedEvent]:
        found: dict[uuid.UUID, RecordedEvent] = {}
        for rows in reads:
            for body, prev, hash_ in rows:
                stored = RecordedEvent.from_body(body, prev, hash_)
                found[_uuid(stored.event_id)] = stored
        return found

    return fetch


def _same_or_refuse(stored: RecordedEvent, new: NewEvent, payload: dict[str, Any], schema_version: int) -> RecordedEvent:
    same = (stored.stream, stored.type, stored.schema_version, stored.payload, stored.actor, stored.origin) == (
        new.stream,
        new.type,
        schema_version,
        payload,
        new.actor,
        new.origin,
    )
    if not same:
        raise IdempotencyConflict(
            f"event id {new.event_id} is already recorded at position {stored.position} "
            f"({stored.type} on {stored.stream}) with different content; use a new event id"
        )
    return stored


class _ChainState:
    """The chain head (last position and hash), the current version of each stream (0 for a
    new one) and how many projections have a position row, read in one statement per 200
    streams: queued at construction, given by calling it once the session has sent its reads.

    Each stream is one `ORDER BY version DESC LIMIT 1` probe of the (stream, version) index,
    where a GROUP BY with MAX() would read every event of the stream and slow appends as the
    ledger grows; the head is one probe of the primary key."""

    HEAD, STATES, STREAM = 0, 1, 2

    def __init__(self, session: Session, streams: set[str]) -> None:
        self.streams = streams
        names = sorted(streams)
        probe = (f"SELECT {self.STREAM}, CAST(%s AS varchar), "
                 "(SELECT version FROM ledger_event WHERE stream = %s ORDER BY version DESC LIMIT 1), NULL")
        first = [f"SELECT {self.HEAD}, NULL, position, hash FROM (SELECT position, hash FROM ledger_event ORDER BY position DESC LIMIT 1) h",
                 f"SELECT {self.STATES}, NULL, COUNT(*), NULL FROM ledger_projectionstate"]
        self.reads = []
        for start in range(0, max(len(names), 1), 200):
            chunk = names[start : start + 200]
            parts = (first if start == 0 else []) + [probe] * len(chunk)
            self.reads.append(session.read(" UNION ALL ".join(parts), [v for name in chunk for v in (name, name)]))
        self.states = 0

    def __call__(self) -> tuple[int, str, dict[str, int]]:
        position, prev_hash = 0, GENESIS_HASH
        versions = dict.fromkeys(self.streams, 0)
        for rows in self.reads:
            for kind, stream, number, hash_ in rows:
                if kind == self.HEAD:
                    position, prev_hash = number, hash_
                elif kind == self.STATES:
                    self.states = number
                else:
                    versions[stream] = number or 0
        return position, prev_hash, versions



def _unsealed(new: NewEvent, payload: dict[str, Any], schema_version: int) -> RecordedEvent:
    """The event as projections' `key` sees it before it is sealed: no position, version, time
    or hashes yet."""
    return RecordedEvent(position=0, event_id=str(new.event_id or ""), stream=new.stream, version=0, type=new.type,
                         schema_version=schema_version, payload=payload, actor=new.actor, recorded_at="",
                         origin=new.origin, body="", prev_hash="", hash="")


def _seal(
    new: NewEvent, payload: dict[str, Any], schema_version: int, position: int, version: int, prev_hash: str
) -> RecordedEvent:
    fields = {
        "position": position,
        "event_id": str(new.event_id or uuid.uuid4()),
        "stream": new.stream,
        "version": version,
        "type": new.type,
        "schema_version": schema_version,
        "payload": payload,
        "actor": new.actor,
        "recorded_at": iso_utc(timezone.now()),
        "origin": new.origin,
    }
    body = event_body(fields)
    return RecordedEvent(**fields, body=body, prev_hash=prev_hash, hash=chain_hash(prev_hash, body))


def _row(event: RecordedEvent) -> dict[str, Any]:
    """The event's columns (attname -> value)."""
    return {
        "position": event.position,
        "event_id": event.event_id,
        "stream": event.stream,
        "version": event.version,
        "type": event.type,
        "schema_version": event.schema_version,
        "actor": event.actor,
        "recorded_at": datetime.fromisoformat(event.recorded_at),
        "body": event.body,
        "prev_hash": event.prev_hash,
        "hash": event.hash,
    }


def _insert(session: Session, events: list[RecordedEvent]) -> None:
    sql = session.model(Event)
    session.queue(sql.insert, sql.width, [sql.params(_row(event), session.connection) for event in events])


def _read_projected_rows(session: Session, events: list[RecordedEvent]) -> Callable[[], list[tuple[Projection, TableRows]]]:
    """Queue the read of the rows these events touch, of every projection that wants them, in
    one statement (keys asked of the unsealed events); returns what gives them once the session
    has sent its reads."""
    work = []
    for projection in registered():
        wanted = [event for event in events if projection.wants(event)]
        if wanted:
            work.append((projection, wanted, TableRows(projection.model, projection.key_field, session)))
    fetch = request_rows(session, [(rows, [key for key in map(projection.key, wanted) if key is not None])
                                   for projection, wanted, rows in work])

    def fetched() -> list[tuple[Projection, TableRows]]:
        fetch()
        return [(projection, rows) for projection, _, rows in work]

    return fetched


def _project(session: Session, work: list[tuple[Projection, TableRows]], events: list[RecordedEvent]) -> None:
    """Apply the events to every projection that wants them, on the rows read in advance (a key
    not read is read now), and queue the changed rows."""
    for projection, rows in work:
        for event in events:
            if projection.wants(event):
                projection.apply(event, rows)
        rows.flush()


def _record_positions(session: Session, events: list[RecordedEvent], states: int) -> None:
    """Every projection's position moves to the last event. A projection first seen on a
    non-empty ledger (no position row yet) has not applied the history: it is recorded at 0, so
    verify reports it until `ledger rebuild` fills it."""
    session.queue(lambda rows: "UPDATE ledger_projectionstate SET last_position = %s", 1, [[events[-1].position]])
    projections = list(registered())
    if states >= len(projections):
        return
    known = set(ProjectionState.objects.values_list("name", flat=True))
    start = events[-1].position if events[0].position == 1 else 0
    sql = session.model(ProjectionState)
    session.queue(sql.insert, sql.width, [sql.params({"name": p.name, "last_position": start}, session.connection)
                                          for p in projections if p.name not in known])


LEDGER_STREAM = "ledger"


def initialise_ledger(name: str, actor: str) -> RecordedEvent:
    """Give this ledger its identity (position 1). Idempotent: returns the existing one."""
    from .models import KnownLedger

    with transaction.atomic():
        lock_chain()
        known = KnownLedger.objects.filter(imported=False).first()
        if known is not None:
            return record_from_row(Event.objects.get(position=known.position))
        if head()[0] != 0:
            raise LedgerError("the ledger already holds events but no local LedgerInitialised; it cannot be initialised now")
        return append(
            NewEvent(
                stream=LEDGER_STREAM,
                type="LedgerInitialised",
                actor=actor,
                expected_version=0,
                payload={"ledger_id": str(uuid.uuid4()), "name": name},
            )
        )
