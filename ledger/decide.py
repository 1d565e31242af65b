"""Appends that rest on what was read (style rule 5): read the stream's version, then what the
decision needs, decide, and append at that version; when another writer's event lands in between
(ConcurrencyError), read again and decide again. docs/architecture.md lists every append site and
whether it carries an expected version."""
from __future__ import annotations

from dataclasses import replace
from typing import Callable

from .errors import ConcurrencyError, LedgerError
from .records import RecordedEvent
from .selectors import stream_version
from .services import NewEvent, append_many

# Each conflict is another writer's event landing on the stream between one read and its append:
# a few in a row means the stream is busy, not a state to loop on.
DECIDE_TRIES = 5


class StillMoving(LedgerError):
    """The stream moved on at every one of DECIDE_TRIES reads. Not a ConcurrencyError: workers take
    that one for the reaper having closed their work (frontend/reruns.py, forge/services.py)."""


def append_decided(stream: str, decide: Callable[[], list[NewEvent]]) -> list[RecordedEvent] | None:
    """Append `decide()`'s events (none: nothing to do, None returned), the first at `stream`'s
    version read just before `decide` reads what it decides on; the others follow it in the same
    transaction. StillMoving after DECIDE_TRIES conflicts."""
    for _ in range(DECIDE_TRIES):
        version = stream_version(stream)  # before what decide reads: an event between the two fails the append
        events = decide()
        if not events:
            return None
        if events[0].stream != stream:
            raise ValueError(f"the first event must be on {stream}, the stream whose version was read")
        try:
            return append_many([replace(events[0], expected_version=version), *events[1:]])
        except ConcurrencyError:
            continue
    raise StillMoving(f"{stream} changed {DECIDE_TRIES} times between a read and its append: try again")
