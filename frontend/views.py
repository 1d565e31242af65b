"""Server-rendered audit pages. Views only read (selectors and projections), never write."""
import uuid

from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, render

from ledger import selectors
from ledger.models import Event
from ledger.records import RecordedEvent


def dashboard(request):
    recent = [_record(e) for e in Event.objects.order_by("-position")[:20]]
    return render(request, "frontend/dashboard.html", {"status": selectors.status(), "recent": recent})


def event_browser(request):
    queryset = selectors.events()
    filters = {key: request.GET.get(key, "").strip() for key in ("stream", "type", "actor", "position_min", "position_max")}
    if filters["stream"]:
        queryset = queryset.filter(stream__startswith=filters["stream"])
    if filters["type"]:
        queryset = queryset.filter(type=filters["type"])
    if filters["actor"]:
        queryset = queryset.filter(actor=filters["actor"])
    if filters["position_min"].isdigit():
        queryset = queryset.filter(position__gte=int(filters["position_min"]))
    if filters["position_max"].isdigit():
        queryset = queryset.filter(position__lte=int(filters["position_max"]))
    page = Paginator(queryset, 50).get_page(request.GET.get("page"))
    return render(
        request,
        "frontend/events.html",
        {"page": page, "events": [_record(e) for e in page], "filters": filters},
    )


def event_detail(request, position: int):
    event = _record(get_object_or_404(Event, position=position))
    return render(request, "frontend/event.html", {"event": event})


def operator_table(request):
    """Every (backend, case) the gate has admitted a kernel for, with its current status."""
    from measurement.models import CaseRow, OperatorResult

    results = OperatorResult.objects.order_by("backend", "case")
    positions = dict(Event.objects.filter(event_id__in=[r.verdict_event for r in results]).values_list("event_id", "position"))
    rows = [{"result": r, "verdict_position": positions.get(uuid.UUID(r.verdict_event))} for r in results]
    return render(request, "frontend/operators.html", {"rows": rows, "case_count": CaseRow.objects.count()})


def _record(event: Event) -> RecordedEvent:
    return RecordedEvent.from_body(event.body, event.prev_hash, event.hash)
