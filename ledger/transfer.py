"""Export to JSON Lines and import from it; imported events keep where they came from."""
from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import IO

from . import event_types
from .canonical import HASHED_FIELDS
from .errors import LedgerError
from .models import Event
from .records import RecordedEvent
from .selectors import events, local_ledger_id
from .services import NewEvent, append_many, head
from .verify_export import ExportError, verify_export

# Ids for imported events whose own id this ledger already gives to another record (fixed, arbitrary).
IMPORTED_ID_NAMESPACE = uuid.UUID("5b0f3c1e-6a43-4b8e-9d0a-52a1d3c7e901")


def export_ledger(out: IO[str]) -> int:
    count = 0
    for row in events().values_list("body", "prev_hash", "hash").iterator(chunk_size=5000):
        event = RecordedEvent.from_body(*row)
        line = {name: getattr(event, name) for name in HASHED_FIELDS}
        line["prev_hash"], line["hash"] = event.prev_hash, event.hash
        out.write(_json_line(line))
        count += 1
    return count


def _json_line(record: dict) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"


def import_ledger(path: Path, actor: str) -> tuple[int, int]:
    """Verify the whole file, then append its events; returns (new, already present).

    Nothing is imported when any line is bad. Each event keeps its event id (so importing
    the same file twice adds nothing) and records its origin: the source ledger, its
    original position, hash and time.

    Ids derived from content are shared between ledgers: every ledger that loaded a matrix
    holds CaseDefined events with the same ids, and their payloads may differ (coefficients
    drawn on another CPU differ in the last bit). Such an event is still imported, whole,
    under an id derived from its source ledger and original id (kept in its origin), so
    several ledgers combine into one without losing any event and every imported
    checkpoint still finds the hash it signed.
    """
    local = local_ledger_id()
    try:
        with path.open(encoding="utf-8") as handle:
            summary = verify_export(handle, keep_events=True)
    except ExportError as exc:
        raise LedgerError(f"{path}: {exc}; nothing was imported") from None
    if summary.ledger_id == local:
        raise LedgerError(f"{path} is an export of this ledger itself; nothing was imported")
    recorded_here = _recorded([record["event_id"] for record in summary.events_list])
    new_events = []
    for number, record in enumerate(summary.events_list, start=1):
        try:
            payload = event_types.validate(record["type"], record["schema_version"], record["payload"])
        except LedgerError as exc:
            raise LedgerError(f"{path}: line {number}: {exc}; nothing was imported") from None
        origin = record["origin"] or {
            "ledger_id": summary.ledger_id,
            "position": record["position"],
            "hash": record["hash"],
            "recorded_at": record["recorded_at"],
        }
        event_id = uuid.UUID(record["event_id"])
        existing = recorded_here.get(record["event_id"])
        fields = (record["stream"], record["type"], record["schema_version"], payload, record["actor"], origin)
        if existing is not None and fields != (
            existing.stream, existing.type, existing.schema_version, existing.payload, existing.actor, existing.origin
        ):
            origin = {**origin, "event_id": record["event_id"]}
            event_id = uuid.uuid5(IMPORTED_ID_NAMESPACE, f"{origin['ledger_id']}/{record['event_id']}")
        new_events.append(
            NewEvent(
                stream=record["stream"],
                type=record["type"],
                payload=record["payload"],
                actor=record["actor"],
                event_id=event_id,
                origin=origin,
                schema_version=record["schema_version"],
            )
        )
    before = head()[0]
    recorded = append_many(new_events)
    fresh = sum(1 for event in recorded if event.position > before)
    return fresh, len(recorded) - fresh


def _recorded(event_ids: list[str]) -> dict[str, RecordedEvent]:
    """The events of this ledger that carry any of these ids, by id."""
    found: dict[str, RecordedEvent] = {}
    for start in range(0, len(event_ids), 500):
        rows = Event.objects.filter(event_id__in=event_ids[start : start + 500]).values_list("body", "prev_hash", "hash")
        for row in rows:
            event = RecordedEvent.from_body(*row)
            found[event.event_id] = event
    return found
