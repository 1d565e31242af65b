"""Reads of the ledger and its projections, for views, the API and other apps."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from django.db import connection
from django.db.models import Count, Q, QuerySet, Sum
from django.db.models.functions import Substr

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


# ---- filtered, keyset-paginated event lists (the event browser) ---------------------------
# Newest first; a page is "the `size` newest events before position P" (or "after P", read
# oldest first and turned round), found by walking a (column, position) index: no OFFSET and
# no COUNT, so every page of a 1M-event ledger costs about the same as the first.

EVENT_PAGE_SIZE = 50
# A stream prefix matching more events than this (or more than MANY_STREAMS streams) is read by
# walking positions downwards (its matches are dense enough that a page is found within ~50 *
# head / DENSE_PREFIX rows); a smaller one through the (stream, position) index, its matches'
# positions then sorted.
DENSE_PREFIX = 20_000


def _prefix_end(prefix: str) -> str | None:
    """The least string greater than every string that starts with `prefix` (code point order,
    which is UTF-8 byte order): the prefix with its last character incremented."""
    for cut in range(len(prefix) - 1, -1, -1):
        code = ord(prefix[cut]) + 1
        if code == 0xD800:
            code = 0xE000  # surrogates are not characters
        if code <= 0x10FFFF:
            return prefix[:cut] + chr(code)
    return None


_CODE_POINT_ORDER: dict[str, bool] = {}


def _compares_by_code_point() -> bool:
    """Whether the database orders strings by code point: SQLite (BINARY collation) always;
    PostgreSQL when the database's collation is C / POSIX / C.UTF-8 (asked once per database)."""
    if connection.vendor == "sqlite":
        return True
    if connection.vendor != "postgresql":
        return False
    key = f"{connection.settings_dict['HOST']}:{connection.settings_dict['PORT']}/{connection.settings_dict['NAME']}"
    if key not in _CODE_POINT_ORDER:
        with connection.cursor() as cursor:
            cursor.execute("SELECT datcollate FROM pg_database WHERE datname = current_database()")
            collation = cursor.fetchone()[0]
        _CODE_POINT_ORDER[key] = collation.lower().replace("-", "") in ("c", "posix", "c.utf8")
    return _CODE_POINT_ORDER[key]


def _prefix_q(field: str, prefix: str) -> Q:
    """Rows whose `field` starts with `prefix` (case-sensitive), as an index range where the
    database orders strings by code point (SQLite always, PostgreSQL under a C collation), the
    range alone on SQLite (whose LIKE, what Django's `startswith` is, never uses an index and
    ignores ASCII case), with the LIKE on PostgreSQL (which uses a plain index for LIKE only
    under the exact "C" collation, not C.UTF-8). Elsewhere the LIKE alone."""
    end = _prefix_end(prefix)
    if end is None or not _compares_by_code_point():
        return Q(**{f"{field}__startswith": prefix})
    between = Q(**{f"{field}__gte": prefix, f"{field}__lt": end})
    return between if connection.vendor == "sqlite" else between & Q(**{f"{field}__startswith": prefix})


@dataclass
class EventFilters:
    stream: str = ""  # a prefix of the stream name
    type: str = ""
    actor: str = ""
    position_min: int | None = None
    position_max: int | None = None

    def only(self, name: str) -> bool:
        """Is `name` the one filter set?"""
        values = {"stream": self.stream, "type": self.type, "actor": self.actor,
                  "position_min": self.position_min is not None, "position_max": self.position_max is not None}
        return bool(values[name]) and not any(v for k, v in values.items() if k != name)

    def any(self) -> bool:
        return bool(self.stream or self.type or self.actor or self.position_min is not None or self.position_max is not None)


MANY_STREAMS = 1000  # a prefix over more streams than this is not summed up (nor counted)


@dataclass
class StreamMatch:
    streams: list[str]  # the matching stream, when exactly one matches (else empty)
    many: bool  # more than one stream matches
    events: int | None  # events in the matching streams; None past MANY_STREAMS streams


def match_streams(prefix: str) -> StreamMatch:
    """The streams starting with `prefix` and how many events they hold, from the stream-head
    projection (a stream's version is its event count): one aggregate over at most
    MANY_STREAMS + 1 heads, no event read."""
    matched = StreamHead.objects.filter(_prefix_q("stream", prefix)).order_by()
    totals = matched.values("version")[:MANY_STREAMS + 1].aggregate(n=Count("*"), events=Sum("version"))
    if totals["n"] > MANY_STREAMS:
        return StreamMatch(streams=[], many=True, events=None)
    one = list(matched.values_list("stream", flat=True)[:1]) if totals["n"] == 1 else []
    return StreamMatch(streams=one, many=totals["n"] > 1, events=totals["events"] or 0)


def filtered_events(filters: EventFilters, streams: StreamMatch | None = None) -> QuerySet[Event]:
    """The events that pass the filters (a stream prefix, exact type and actor, a position
    range), unordered: `event_page` orders and cuts them."""
    queryset = Event.objects.all()
    if filters.stream:
        streams = streams or match_streams(filters.stream)
        if streams.events == 0:
            return queryset.none()
        if not streams.many:  # the usual case, a link from a page: one stream, in (stream, position) order
            queryset = queryset.filter(stream=streams.streams[0])
        elif streams.events is not None and streams.events <= DENSE_PREFIX:
            queryset = queryset.filter(_prefix_q("stream", filters.stream))
        else:  # the prefix as an expression no index answers: positions are walked downwards
            queryset = queryset.alias(prefix=Substr("stream", 1, len(filters.stream))).filter(prefix=filters.stream)
    if filters.type:
        queryset = queryset.filter(type=filters.type)
    if filters.actor:
        queryset = queryset.filter(actor=filters.actor)
    if filters.position_min is not None:
        queryset = queryset.filter(position__gte=filters.position_min)
    if filters.position_max is not None:
        queryset = queryset.filter(position__lte=filters.position_max)
    return queryset


@dataclass
class EventPage:
    events: list[Event]
    older: int | None  # ?before= for the next older page, None when there is none
    newer: int | None  # ?after= for the next newer page, None when there is none


def event_page(queryset: QuerySet[Event], before: int | None = None, after: int | None = None,
               size: int = EVENT_PAGE_SIZE) -> EventPage:
    """The `size` newest events of `queryset` below position `before` (or the oldest above
    `after`), newest first, with the keys of the neighbouring pages. Positions first (an
    index-only walk where an index covers the filter), then the rows of just those; each probe
    for a neighbour is one LIMIT 1 query on the same index."""
    if after is not None:
        keys = list(queryset.filter(position__gt=after).order_by("position").values_list("position", flat=True)[:size + 1])
        has_newer = len(keys) > size
        keys = keys[:size][::-1]
        has_older = bool(keys) and queryset.filter(position__lte=after).exists()
    else:
        bounded = queryset.filter(position__lt=before) if before is not None else queryset
        keys = list(bounded.order_by("-position").values_list("position", flat=True)[:size + 1])
        has_older = len(keys) > size
        keys = keys[:size]
        has_newer = bool(keys) and before is not None and queryset.filter(position__gte=before).exists()
    rows = list(Event.objects.filter(position__in=keys).order_by("-position")) if keys else []
    return EventPage(events=rows, older=keys[-1] if has_older else None, newer=keys[0] if has_newer else None)


def count_events(filters: EventFilters, streams: StreamMatch | None = None) -> int | None:
    """How many events match, where a projection knows it without reading the events: all of
    them or one type (event-type counts), one stream prefix (its streams' heads). None
    otherwise: counting would read every match."""
    if not filters.any():
        return EventTypeCount.objects.aggregate(n=Sum("count"))["n"] or 0
    if filters.only("type"):
        return EventTypeCount.objects.filter(type=filters.type).values_list("count", flat=True).first() or 0
    if filters.only("stream"):
        return (streams or match_streams(filters.stream)).events
    return None


def stream_events(stream: str) -> list[RecordedEvent]:
    return [RecordedEvent.from_body(e.body, e.prev_hash, e.hash) for e in events().filter(stream=stream)]


def events_at(positions: Iterable[int | None]) -> dict[int, RecordedEvent]:
    """The events at these positions, in one query: a page listing many re-runs reads each one's
    verdict by the position its outcome names, without a query per row."""
    wanted = sorted({p for p in positions if p is not None})
    rows = Event.objects.filter(position__in=wanted).values_list("body", "prev_hash", "hash", "position")
    return {position: RecordedEvent.from_body(body, prev, hash_) for body, prev, hash_, position in rows}


def status() -> dict:
    position, head_hash = head()
    last_run = VerificationRun.objects.exclude(finished_at=None).order_by("-finished_at").first()
    known = KnownLedger.objects.filter(imported=False).first()
    return {
        "ledger_id": known.ledger_id if known else None,
        "name": known.name if known else None,
        "head_position": position,
        "head_hash": head_hash,
        # Positions are dense (1..head, events are never deleted), so the head is the count:
        # no COUNT(*) over the event table.
        "event_count": position,
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


def stream_version(stream: str) -> int:
    """The stream's current version (0 when it has no event): what an append that decides on
    what it read passes as `expected_version`."""
    return StreamHead.objects.filter(stream=stream).values_list("version", flat=True).first() or 0
