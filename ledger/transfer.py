"""Export to JSON Lines and import from it; imported events keep where they came from."""
from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import IO

from . import event_types
from .canonical import HASHED_FIELDS
from .errors import LedgerError
from .records import RecordedEvent
from .selectors import events, local_ledger_id
from .services import NewEvent, append_many, head
from .verify_export import ExportError, verify_export


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
    """
    local = local_ledger_id()
    try:
        with path.open(encoding="utf-8") as handle:
            summary = verify_export(handle, keep_events=True)
    except ExportError as exc:
        raise LedgerError(f"{path}: {exc}; nothing was imported") from None
    if summary.ledger_id == local:
        raise LedgerError(f"{path} is an export of this ledger itself; nothing was imported")
    new_events = []
    for number, record in enumerate(summary.events_list, start=1):
        try:
            event_types.validate(record["type"], record["schema_version"], record["payload"])
        except LedgerError as exc:
            raise LedgerError(f"{path}: line {number}: {exc}; nothing was imported") from None
        origin = record["origin"] or {
            "ledger_id": summary.ledger_id,
            "position": record["position"],
            "hash": record["hash"],
            "recorded_at": record["recorded_at"],
        }
        new_events.append(
            NewEvent(
                stream=record["stream"],
                type=record["type"],
                payload=record["payload"],
                actor=record["actor"],
                event_id=uuid.UUID(record["event_id"]),
                origin=origin,
                schema_version=record["schema_version"],
            )
        )
    before = head()[0]
    recorded = append_many(new_events)
    fresh = sum(1 for event in recorded if event.position > before)
    return fresh, len(recorded) - fresh
