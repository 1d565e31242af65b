"""When a fact was recorded: the time of record every page shows first.

An imported event keeps the time its first ledger recorded it in `origin.recorded_at` (an
export of an import keeps the first origin, ledger.transfer); its own `recorded_at` is only
when this ledger imported it. A reviewer asking "when was this measured" needs the first: the
import time is shown beside it as a secondary fact, never instead of it.
"""
from __future__ import annotations

from ledger.records import RecordedEvent


def time_of_record(event: RecordedEvent) -> str:
    """ISO 8601 UTC: the origin's time for an imported event, else the event's own."""
    return (event.origin or {}).get("recorded_at") or event.recorded_at


def imported_at(event: RecordedEvent) -> str | None:
    """When this ledger imported the event (None: it was recorded here)."""
    return event.recorded_at if event.origin else None


def day(event: RecordedEvent) -> str:
    return time_of_record(event)[:10]


def stamp_times(event: RecordedEvent) -> dict[str, str | None]:
    """The two times as the provenance chains and the API carry them."""
    return {"time_of_record": time_of_record(event), "imported_at": imported_at(event)}
