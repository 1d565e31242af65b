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
from typing import Any, Sequence

from django.db import transaction
from django.utils import timezone

from . import event_types
from .append_sql import Session
from .canonical import GENESIS_HASH, chain_hash, event_body
from .errors import ConcurrencyError, IdempotencyConflict, LedgerError
from .models import Event, ProjectionState
from .projection_base import TableRows, read_rows, registered
from .records import RecordedEvent

CHAIN_LOCK_KEY = 0x466F726765  # arbitrary, fixed: "Forge"
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
    """Serialise writers. Call inside a transaction; released at commit or rollback."""
    session = session or Session()
    if session.postgres:
        session.write("SELECT pg_advisory_xact_lock(%s)", [CHAIN_LOCK_KEY])
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

    On PostgreSQL the append is pipelined: after BEGIN (which psycopg sends alone), the lock,
    the chain head with the stream versions and the events named by id travel in one round
    trip; the new events and the projection rows they touch in a second; the projection writes
    in a third; then COMMIT. Every read that decides something runs after the lock is granted,
    in the same transaction as the writes (docs/ledger_benchmarks.md measures it)."""
    validated = [_validate(new) for new in new_events]
    session = Session()
    with transaction.atomic():
        with session.pipelined():
            lock_chain(session)
            chain = _chain_state(session, {new.stream for new, _, _ in validated})
            known = _events_by_id(session, [new.event_id for new, _, _ in validated if new.event_id is not None])
            recorded, fresh = _sequence(validated, chain, known)
            if fresh:
                _insert(session, fresh)
                _project(session, fresh)
        if fresh:
            _add_missing_states(session, fresh)
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


def _events_by_id(session: Session, event_ids: list[uuid.UUID | str]) -> dict[uuid.UUID, RecordedEvent]:
    """The stored events among these ids (idempotent retries), read in one statement per 500."""
    found: dict[uuid.UUID, RecordedEvent] = {}
    ids = list({_uuid(event_id) for event_id in event_ids})
    field = Event._meta.get_field("event_id")
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        with session.read(
            f"SELECT body, prev_hash, hash FROM ledger_event WHERE event_id IN ({', '.join(['%s'] * len(chunk))})",
            [field.get_db_prep_value(event_id, session.connection) for event_id in chunk],
        ) as cursor:
            for body, prev, hash_ in cursor.fetchall():
                stored = RecordedEvent.from_body(body, prev, hash_)
                found[_uuid(stored.event_id)] = stored
    return found


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


def _chain_state(session: Session, streams: set[str]) -> tuple[int, str, dict[str, int]]:
    """The chain head (last position and hash) and the current version of each stream (0 for
    a new one), in one statement per 200 streams.

    Each stream is one `ORDER BY version DESC LIMIT 1` probe of the (stream, version) index,
    where a GROUP BY with MAX() would read every event of the stream and slow appends as the
    ledger grows; the head is one probe of the primary key."""
    names = sorted(streams)
    probe = "SELECT %s, (SELECT version FROM ledger_event WHERE stream = %s ORDER BY version DESC LIMIT 1), NULL"
    chain_head = "SELECT NULL, position, hash FROM (SELECT position, hash FROM ledger_event ORDER BY position DESC LIMIT 1) h"
    cursors = []
    for start in range(0, max(len(names), 1), 200):
        chunk = names[start : start + 200]
        parts = ([chain_head] if start == 0 else []) + [probe] * len(chunk)
        cursors.append(session.read(" UNION ALL ".join(parts), [v for name in chunk for v in (name, name)]))
    position, prev_hash = 0, GENESIS_HASH
    versions = dict.fromkeys(streams, 0)
    for cursor in cursors:
        with cursor:
            for stream, number, hash_ in cursor.fetchall():
                if stream is None:
                    position, prev_hash = number, hash_
                else:
                    versions[stream] = number or 0
    return position, prev_hash, versions


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
    session.write_many(sql.insert, [sql.params(_row(event), session.connection) for event in events])


def _project(session: Session, events: list[RecordedEvent]) -> None:
    """Apply the events to every projection that wants them: the rows they touch, of all
    projections, are read in one statement, then changed in memory and written back, and every
    projection's position moves to the last event."""
    work = []
    for projection in registered():
        wanted = [event for event in events if projection.wants(event)]
        if wanted:
            work.append((projection, wanted, TableRows(projection.model, projection.key_field, session)))
    read_rows(session, [(rows, [key for key in map(projection.key, wanted) if key is not None])
                        for projection, wanted, rows in work])
    for projection, wanted, rows in work:
        for event in wanted:
            projection.apply(event, rows)
        rows.flush()
    session.write("UPDATE ledger_projectionstate SET last_position = %s", [events[-1].position])


def _add_missing_states(session: Session, events: list[RecordedEvent]) -> None:
    """A projection first seen on a non-empty ledger has not applied the history: record it
    at 0 so verify reports it until `ledger rebuild` fills it. Reads the row count of
    `_project`'s last write, which a pipeline delivers only at its end."""
    projections = list(registered())
    if session.written_rows() >= len(projections):
        return
    known = set(ProjectionState.objects.values_list("name", flat=True))
    start = events[-1].position if events[0].position == 1 else 0
    ProjectionState.objects.bulk_create(
        [ProjectionState(name=p.name, last_position=start) for p in projections if p.name not in known]
    )


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
