"""Export to JSON Lines, import from it (imported events keep where they came from), and
restore an export as the ledger itself into an empty database."""
from __future__ import annotations

import json
import uuid
from datetime import datetime
from pathlib import Path
from typing import IO

from django.db import transaction

from . import event_types
from .canonical import HASHED_FIELDS, event_body
from .checkpoints import sign_checkpoint, trusted_public_keys
from .errors import LedgerError
from .models import Event
from .records import RecordedEvent
from .selectors import events, local_ledger_id, stream_events
from .services import NewEvent, append_many, head, lock_chain
from .trust import SERVICE_HOW_TO_TRUST, first_uncovered, origin_places, untrusted_message
from .verification import replay_projections
from .verify_export import ExportError, ExportSummary, read_export, require_signed_head, verify_export

# Ids for imported events whose own id this ledger already gives to another record (fixed, arbitrary).
IMPORTED_ID_NAMESPACE = uuid.UUID("5b0f3c1e-6a43-4b8e-9d0a-52a1d3c7e901")
# The largest file import or restore reads: both hold every event in memory before writing any.
# The largest shipped export is 35 MB (fixtures/ledgers/h200_campaign.jsonl, 4,126 events in session 33).
MAX_FILE_BYTES = 256 * 1024 * 1024
EXPORT_ACTOR = "system:ledger-export"
PLACES_STREAM = "ledger/imported-places"


def export_ledger(out: IO[str], actor: str = EXPORT_ACTOR) -> int:
    """Sign the head, then write every event up to that checkpoint: an export always ends with
    its ledger's signed head (the witness a copy held elsewhere keeps), and appends made while
    it is written wait for the next export."""
    checkpoint = sign_checkpoint(actor)
    count = 0
    rows = events().filter(position__lte=checkpoint.position).values_list("body", "prev_hash", "hash")
    for row in rows.iterator(chunk_size=5000):
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
    original position, hash and time (and, for one the source had imported, the source's
    position and hash as `via`).

    Ids derived from content are shared between ledgers: every ledger that loaded a matrix
    holds CaseDefined events with the same ids, and their payloads may differ (coefficients
    drawn on another CPU differ in the last bit). Such an event is still imported, whole,
    under an id derived from its source ledger and original id (kept in its origin), so
    several ledgers combine into one without losing any event and every imported
    checkpoint still finds the hash it signed.
    """
    local = local_ledger_id()
    summary = _read_signed(path, "imported")
    if summary.ledger_id == local:
        raise LedgerError(f"{path} is an export of this ledger itself; nothing was imported")
    recorded_here = _recorded([record["event_id"] for record in summary.events_list])
    known_places = _known_places() if recorded_here else set()
    new_events, places = [], []
    for number, record in enumerate(summary.events_list, start=1):
        try:
            payload = event_types.validate(record["type"], record["schema_version"], record["payload"])
        except LedgerError as exc:
            raise LedgerError(f"{path}: line {number}: {exc}; nothing was imported") from None
        origin = _origin(record, summary.ledger_id)
        event_id = uuid.UUID(record["event_id"])
        existing = recorded_here.get(record["event_id"])
        here = _origin_here(existing, local) if existing is not None else None
        fields = (record["stream"], record["type"], record["schema_version"], payload, record["actor"], _first(origin))
        if existing is not None and fields == (
            existing.stream, existing.type, existing.schema_version, existing.payload, existing.actor, _first(here)
        ):
            # the same event, here already; reached by another way, its places on this way are recorded apart
            places += _new_places(existing.event_id, here, origin, known_places)
            origin = existing.origin
        elif existing is not None:
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
    recorded = append_many(new_events + ([NewEvent(stream=PLACES_STREAM, type="ImportedPlacesRecorded",
                                                    payload={"places": places}, actor=actor)] if places else []))
    fresh = sum(1 for event in recorded[:len(new_events)] if event.position > before)
    return fresh, len(new_events) - fresh


def _origin(record: dict, source_ledger: str) -> dict:
    """Where an imported event came from. One the source had imported itself keeps its first
    origin and adds the source's position and hash to `via`: a checkpoint the source signed with
    that event as its head (an export right after an import) must still find the hash it signed."""
    place = {"ledger_id": source_ledger, "position": record["position"], "hash": record["hash"]}
    if record["origin"] is None:
        return {**place, "recorded_at": record["recorded_at"]}
    return {**record["origin"], "via": [*record["origin"].get("via", []), place]}


def _known_places() -> set[tuple[str, str, int]]:
    """(event id, ledger, position) of the places earlier imports recorded apart."""
    return {(place["event_id"], place["ledger_id"], place["position"])
            for event in stream_events(PLACES_STREAM) for place in event.data["places"]}


def _new_places(event_id: str, here: dict, origin: dict, known: set[tuple[str, str, int]]) -> list[dict]:
    """The places this way (`origin`) gives an event already here that neither its origin here
    (`here`) nor an earlier record holds: a checkpoint of the ledger that passed it on may sign one."""
    held = {place for place, _ in origin_places(here)}
    return [{"event_id": event_id, "ledger_id": ledger, "position": position, "hash": hash_}
            for (ledger, position), hash_ in origin_places(origin)
            if (ledger, position) not in held and (event_id, ledger, position) not in known]


def _origin_here(event: RecordedEvent, local: str) -> dict:
    """An event's origin; for one of this ledger's own, the origin another ledger gives it on import
    (so an own event that comes back in another ledger's export is known as itself, not copied)."""
    return event.origin or {"ledger_id": local, "position": event.position, "hash": event.hash,
                            "recorded_at": event.recorded_at}


def _first(origin: dict | None) -> dict | None:
    """An origin less the ledgers it passed through: what makes two copies the same event."""
    return origin and {key: value for key, value in origin.items() if key != "via"}


def _read_signed(path: Path, what: str) -> ExportSummary:
    """The file verified whole, its head signed by a key this service trusts (ledger.trust)."""
    try:
        summary = verify_export(read_export(path, MAX_FILE_BYTES), keep_events=True)
        require_signed_head(summary, trusted_public_keys(), SERVICE_HOW_TO_TRUST)
    except ExportError as exc:
        raise LedgerError(f"{path}: {exc}; nothing was {what}") from None
    return summary


def restore_ledger(path: Path) -> int:
    """Make an empty database hold the exported ledger itself: the same positions, ids, bodies
    and hashes (an import would make a new ledger holding copies). For recovering a ledger from
    its export, and for signing an export with another key. Every checkpoint in the file by a
    key not trusted here must be covered by a trusted one, but the head need not be signed (a
    live ledger's newest events are not yet): the restorer vouches for it by checkpointing.
    Returns the number of events."""
    if head()[0] != 0:
        raise LedgerError("restore needs an empty ledger (no events); this database already holds one")
    try:
        summary = verify_export(read_export(path, MAX_FILE_BYTES), keep_events=True)
    except ExportError as exc:
        raise LedgerError(f"{path}: {exc}; nothing was restored") from None
    uncovered = first_uncovered(summary.signed, trusted_public_keys())
    if uncovered is not None:
        raise LedgerError(f"{path}: line {uncovered.local}: {untrusted_message(uncovered, SERVICE_HOW_TO_TRUST)}; nothing was restored")
    rows = []
    for number, record in enumerate(summary.events_list, start=1):
        try:
            event_types.validate(record["type"], record["schema_version"], record["payload"])
        except LedgerError as exc:
            raise LedgerError(f"{path}: line {number}: {exc}; nothing was restored") from None
        fields = {name: record[name] for name in HASHED_FIELDS if name not in ("payload", "origin")}
        fields["recorded_at"] = datetime.fromisoformat(record["recorded_at"])
        rows.append(Event(**fields, body=event_body(record), prev_hash=record["prev_hash"], hash=record["hash"]))
    with transaction.atomic():
        lock_chain()
        if head()[0] != 0:
            raise LedgerError("restore needs an empty ledger (no events); this database already holds one")
        Event.objects.bulk_create(rows, batch_size=1000)
        replay_projections()
    return len(rows)


def _recorded(event_ids: list[str]) -> dict[str, RecordedEvent]:
    """The events of this ledger that carry any of these ids, by id."""
    found: dict[str, RecordedEvent] = {}
    for start in range(0, len(event_ids), 500):
        rows = Event.objects.filter(event_id__in=event_ids[start : start + 500]).values_list("body", "prev_hash", "hash")
        for row in rows:
            event = RecordedEvent.from_body(*row)
            found[event.event_id] = event
    return found
