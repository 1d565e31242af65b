"""Reads of the ledger and its projections, for views, the API and other apps."""
from __future__ import annotations

from django.db.models import QuerySet

from .errors import LedgerNotInitialised
from .models import Event, EventTypeCount, KnownLedger, ProjectionState, StreamHead, VerificationRun
from .records import RecordedEvent
from .services import head


def local_ledger_id() -> str:
    ledger_id = KnownLedger.objects.filter(imported=False).values_list("ledger_id", flat=True).first()
    if ledger_id is None:
        raise LedgerNotInitialised("this ledger has no LedgerInitialised event yet: run `manage.py ledger init`")
    return ledger_id


def events() -> QuerySet[Event]:
    return Event.objects.order_by("position")


def stream_events(stream: str) -> list[RecordedEvent]:
    return [RecordedEvent.from_body(e.body, e.prev_hash, e.hash) for e in events().filter(stream=stream)]


def status() -> dict:
    position, head_hash = head()
    last_run = VerificationRun.objects.exclude(finished_at=None).order_by("-finished_at").first()
    known = KnownLedger.objects.filter(imported=False).first()
    return {
        "ledger_id": known.ledger_id if known else None,
        "name": known.name if known else None,
        "head_position": position,
        "head_hash": head_hash,
        "event_count": Event.objects.count(),
        "stream_count": StreamHead.objects.count(),
        "event_types": dict(EventTypeCount.objects.order_by("type").values_list("type", "count")),
        "projections": dict(ProjectionState.objects.order_by("name").values_list("name", "last_position")),
        "last_verification": (
            {
                "id": last_run.pk,
                "status": last_run.status,
                "finished_at": last_run.finished_at,
                "head_position": last_run.head_position,
                "summary": last_run.summary,
            }
            if last_run
            else None
        ),
    }
