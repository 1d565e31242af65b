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

from django.db import connection, transaction
from django.utils import timezone

from . import event_types
from .canonical import GENESIS_HASH, chain_hash, event_body
from .errors import ConcurrencyError, IdempotencyConflict, LedgerError
from .models import Event, ProjectionState
from .projection_base import TableRows, registered
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


def lock_chain() -> None:
    """Serialise writers. Call inside a transaction; released at commit or rollback."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [CHAIN_LOCK_KEY])
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
    """Append events atomically, in order: all are recorded or none is."""
    validated = [_validate(new) for new in new_events]
    with transaction.atomic():
        lock_chain()
        position, prev_hash = head()
        stream_versions = _stream_versions({new.stream for new, _, _ in validated})
        recorded: list[RecordedEvent] = []
        fresh: list[RecordedEvent] = []
        for new, payload, schema_version in validated:
            if new.event_id is not None:
                existing = _existing_event(new, payload, schema_version)
                if existing is not None:
                    recorded.append(existing)
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
        if fresh:
            Event.objects.bulk_create([_row(event) for event in fresh])
            _project(fresh)
    return recorded


def _validate(new: NewEvent) -> tuple[NewEvent, dict[str, Any], int]:
    if not isinstance(new.stream, str) or not STREAM_PATTERN.match(new.stream):
        raise LedgerError(f"stream must be 1-255 characters without whitespace, got {new.stream!r}")
    if not isinstance(new.actor, str) or not new.actor.strip():
        raise LedgerError("actor must name the user, agent or worker that caused the event")
    schema_version = new.schema_version or event_types.get(new.type).latest_version
    return new, event_types.validate(new.type, schema_version, new.payload), schema_version


def _existing_event(new: NewEvent, payload: dict[str, Any], schema_version: int) -> RecordedEvent | None:
    row = Event.objects.filter(event_id=new.event_id).first()
    if row is None:
        return None
    stored = record_from_row(row)
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


def _stream_versions(streams: set[str]) -> dict[str, int]:
    """Current version of each stream (0 for a new one).

    One `ORDER BY version DESC LIMIT 1` per stream, UNION ALL'd into one query per 200
    streams: each is a single probe of the (stream, version) index, where a GROUP BY with
    MAX() would read every event of the stream and slow appends as the ledger grows."""
    versions = dict.fromkeys(streams, 0)
    names = sorted(streams)
    table = Event._meta.db_table
    probe = f"SELECT %s, (SELECT version FROM {table} WHERE stream = %s ORDER BY version DESC LIMIT 1)"
    for start in range(0, len(names), 200):
        chunk = names[start : start + 200]
        with connection.cursor() as cursor:
            cursor.execute(" UNION ALL ".join([probe] * len(chunk)), [v for name in chunk for v in (name, name)])
            versions.update((name, version or 0) for name, version in cursor.fetchall())
    return versions


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


def _row(event: RecordedEvent) -> Event:
    return Event(
        position=event.position,
        event_id=event.event_id,
        stream=event.stream,
        version=event.version,
        type=event.type,
        schema_version=event.schema_version,
        actor=event.actor,
        recorded_at=datetime.fromisoformat(event.recorded_at),
        body=event.body,
        prev_hash=event.prev_hash,
        hash=event.hash,
    )


def _project(events: list[RecordedEvent]) -> None:
    projections = list(registered())
    for projection in projections:
        wanted = [event for event in events if projection.wants(event)]
        if not wanted:
            continue
        rows = TableRows(projection.model, projection.key_field)
        rows.prefetch(key for key in (projection.key(event) for event in wanted) if key is not None)
        for event in wanted:
            projection.apply(event, rows)
        rows.flush()
    last = events[-1].position
    updated = ProjectionState.objects.update(last_position=last)
    if updated < len(projections):
        known = set(ProjectionState.objects.values_list("name", flat=True))
        # A projection first seen on a non-empty ledger has not applied the history:
        # record it at 0 so verify reports it until `ledger rebuild` fills it.
        start = last if events[0].position == 1 else 0
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
