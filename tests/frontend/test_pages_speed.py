"""What keeps the audit pages fast on a big ledger (issue 6: p95 <= 150 ms at 1M events),
checked without timing anything: the event browser pages by position (no COUNT, no OFFSET)
and keeps its filters; its filtered queries walk a (column, position) index; the case detail
and the dashboard issue a fixed number of queries whatever the ledger holds."""
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from ledger import selectors
from ledger.models import Event
from ledger.services import NewEvent, append_many
from tests.conftest import some_events


def _positions(html: str) -> list[int]:
    return [int(p) for p in re.findall(r'<td><a href="/events/(\d+)/">#', html)]


def _events(count: int, stream: str = "case/star_1/9x9x9/f32", type_: str = "ResultDowngraded", actor: str = "user:bulk"):
    from tests.conftest import downgrade

    events = []
    for n in range(count):
        event = downgrade(stream, 1.5 + n / 1000)
        events.append(NewEvent(stream=event.stream, type=event.type, payload=event.payload, actor=actor))
    return append_many(events)


def test_the_event_browser_pages_newest_first_by_position_without_counting(ledger, client):
    some_events(3)
    _events(120)  # positions 5..124
    with CaptureQueriesContext(connection) as queries:
        html = client.get("/events/", {"actor": "user:bulk"}).content.decode()
    assert not any("COUNT(" in q["sql"].upper() for q in queries.captured_queries)
    assert not any("OFFSET" in q["sql"].upper() for q in queries.captured_queries)
    first = _positions(html)
    assert first == list(range(124, 74, -1)) and "not counted" in html
    assert 'href="?actor=user%3Abulk&amp;before=75"' in html and "after=" not in html and ">newest<" not in html

    html = client.get("/events/", {"actor": "user:bulk", "before": "75"}).content.decode()
    second = _positions(html)
    assert second == list(range(74, 24, -1))
    assert 'href="?actor=user%3Abulk&amp;after=74"' in html and 'href="?actor=user%3Abulk&amp;before=25"' in html

    html = client.get("/events/", {"actor": "user:bulk", "before": "25"}).content.decode()
    assert _positions(html) == list(range(24, 4, -1)) and "before=" not in html.split("</form>")[1]  # the oldest page
    # back: the newer page of the oldest is the second page again
    html = client.get("/events/", {"actor": "user:bulk", "after": "24"}).content.decode()
    assert _positions(html) == second
    html = client.get("/events/", {"actor": "user:bulk", "after": "74"}).content.decode()
    assert _positions(html) == first and "after=" not in html.split("</form>")[1]


def test_counts_come_from_projections_where_they_know_them(ledger, client):
    some_events(3)
    _events(5, stream="case/star_1/7x7x7/f32")
    html = client.get("/events/").content.decode()
    assert "9 events" in html
    assert "1 events" in client.get("/events/", {"type": "LedgerInitialised"}).content.decode()
    assert "8 events" in client.get("/events/", {"type": "ResultDowngraded"}).content.decode()
    assert "5 events" in client.get("/events/", {"stream": "case/star_1/7x7x7/f32"}).content.decode()
    assert "8 events" in client.get("/events/", {"stream": "case/"}).content.decode()  # a prefix over four streams
    html = client.get("/events/", {"stream": "nothing/"}).content.decode()
    assert "0 events" in html and "no events match" in html


@pytest.mark.parametrize("prefix, expected", [
    ("case/star_1/7", {"case/star_1/7x7x7/f32"}),
    ("case/star_1/", {"case/star_1/0x0x0/f32", "case/star_1/1x1x1/f32", "case/star_1/2x2x2/f32", "case/star_1/7x7x7/f32"}),
    ("Case/", set()),  # case-sensitive, as on PostgreSQL
    ("case/star_1/0x0x0/f32", {"case/star_1/0x0x0/f32"}),
])
def test_a_stream_filter_is_a_case_sensitive_prefix(ledger, prefix, expected):
    some_events(3)
    _events(2, stream="case/star_1/7x7x7/f32")
    events = selectors.filtered_events(selectors.EventFilters(stream=prefix))
    assert set(events.values_list("stream", flat=True)) == expected


def test_a_dense_stream_prefix_is_walked_by_position(ledger, monkeypatch):
    some_events(3)
    _events(30, stream="case/star_1/7x7x7/f32")
    monkeypatch.setattr(selectors, "DENSE_PREFIX", 10)
    filters = selectors.EventFilters(stream="case/star_1/")
    page = selectors.event_page(selectors.filtered_events(filters), size=10)
    assert [e.position for e in page.events] == list(range(34, 24, -1)) and page.older == 25
    everything = selectors.event_page(selectors.filtered_events(filters), size=100).events
    assert {e.stream for e in everything} == {f"case/star_1/{n}x{n}x{n}/f32" for n in (0, 1, 2, 7)} and len(everything) == 33


def test_prefix_end():
    assert selectors._prefix_end("round/") == "round0"
    assert selectors._prefix_end("a\U0010ffff") == "b"
    assert selectors._prefix_end("\U0010ffff") is None
    assert selectors._prefix_end("\ud7ff") == "\ue000"


def _plan(queryset) -> str:
    sql, params = queryset.query.sql_with_params()
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("EXPLAIN QUERY PLAN " + sql, params)
            return "\n".join(str(row[-1]) for row in cursor.fetchall())
        # a test ledger is tiny (a sort of one row is cheapest): ask whether an index *can* serve it in order
        cursor.execute("SET enable_seqscan = off; SET enable_sort = off")
        try:
            cursor.execute("EXPLAIN " + sql, params)
            return "\n".join(row[0] for row in cursor.fetchall())
        finally:
            cursor.execute("RESET enable_seqscan; RESET enable_sort")


@pytest.mark.parametrize("filters, index", [
    ({"type": "GateVerdict"}, "ledger_event_type_pos"),
    ({"actor": "user:test"}, "ledger_event_actor_pos"),
    ({"stream": "case/star_1/0x0x0/f32"}, "ledger_event_stream_pos"),
])
def test_filtered_pages_walk_a_column_position_index_in_order(ledger, filters, index):
    some_events(3)
    keys = selectors.filtered_events(selectors.EventFilters(**filters)).order_by("-position").values_list("position", flat=True)[:51]
    plan = _plan(keys)
    assert index in plan, plan
    assert "TEMP B-TREE" not in plan and "Sort" not in plan, plan  # the index gives the order: no sort of the matches


def test_the_composite_indexes_replace_the_single_column_ones(ledger):
    with connection.cursor() as cursor:
        indexes = connection.introspection.get_constraints(cursor, Event._meta.db_table)
    columns = {name: info["columns"] for name, info in indexes.items() if info["index"] and not info["primary_key"]}
    assert columns["ledger_event_type_pos"] == ["type", "position"]
    assert columns["ledger_event_stream_pos"] == ["stream", "position"]
    assert columns["ledger_event_actor_pos"] == ["actor", "position"]
    assert ["type"] not in columns.values() and ["actor"] not in columns.values()


def test_the_append_only_guards_survive_the_index_migration(ledger):
    from django.db import DatabaseError, transaction

    some_events(1)
    with pytest.raises(DatabaseError), transaction.atomic():
        Event.objects.filter(position=1).update(actor="someone else")


# ---- the case detail: its reads do not grow with the result stream ----------------------


def _gate_verdicts(key: str, template: dict, count: int, verdict: str) -> None:
    """`count` more verdicts of the result stream, like a forge campaign's (rejected ones never
    change the result; admitted ones make a new current verdict on the same evidence)."""
    reasons = ["not_faster_than_public_bound"] if verdict == "rejected" else []
    append_many([NewEvent(stream=key, type="GateVerdict", actor="agent:forge", payload={
        **template, "verdict": verdict, "reasons": reasons, "revises": None, "detail": f"{verdict} #{n}"})
        for n in range(count)])


def _chain_reads(monkeypatch, backend: str, case: str) -> tuple[dict, int, int]:
    """operator_chain's result, its SQL statements and how many event bodies it parsed."""
    from frontend import provenance
    from ledger.records import RecordedEvent

    parsed = []
    real = RecordedEvent.from_body.__func__
    monkeypatch.setattr(RecordedEvent, "from_body", classmethod(lambda cls, *a: parsed.append(1) or real(cls, *a)))
    with CaptureQueriesContext(connection) as queries:
        chain = provenance.operator_chain(backend, case)
    monkeypatch.undo()
    return chain, len(queries.captured_queries), len(parsed)


def test_the_case_detail_reads_as_much_with_a_thousand_rejected_candidates_as_with_none(ledger, speed_rule_lifted, monkeypatch, client, admit):
    from tests.frontend.test_tables import TINY

    outcome = admit()
    key, template = f"operator/cpu/{TINY}", dict(outcome.verdict_event.data)
    before, queries_before, parsed_before = _chain_reads(monkeypatch, "cpu", TINY)
    _gate_verdicts(key, template, 1000, "rejected")  # a forge campaign's candidates that lost
    after, queries_after, parsed_after = _chain_reads(monkeypatch, "cpu", TINY)
    assert (queries_after, parsed_after) == (queries_before, parsed_before)
    assert after["history"] == before["history"] and after["events"] == before["events"] and after["chain_verifies"]
    assert after["history_before"] is None
    assert client.get(f"/cases/cpu/{TINY}/").status_code == 200


def test_the_case_detail_shows_the_newest_history_and_links_to_the_rest(ledger, speed_rule_lifted, monkeypatch, client, admit):
    from frontend import provenance
    from tests.frontend.test_tables import TINY

    outcome = admit()
    key, template = f"operator/cpu/{TINY}", dict(outcome.verdict_event.data)
    for _ in range(3):
        _gate_verdicts(key, template, 1, "admitted")
        _gate_verdicts(key, template, 5, "rejected")
    monkeypatch.setattr(provenance, "HISTORY_WINDOW", 2)
    chain = provenance.operator_chain("cpu", TINY)
    from ledger.records import RecordedEvent

    rows = Event.objects.filter(stream=key, type="GateVerdict").order_by("position").values_list("body", "prev_hash", "hash")
    admitted = [e.position for e in (RecordedEvent.from_body(*row) for row in rows) if e.data["verdict"] == "admitted"]
    assert len(admitted) == 4  # the imported admission (an export now ends with its signed head) and the three above
    assert [h["position"] for h in chain["history"]] == admitted[-2:]
    assert chain["history_before"] == admitted[-2]
    html = client.get(f"/cases/cpu/{TINY}/").content.decode()
    assert f'href="/events/?stream={key.replace("/", "%2F")}&amp;before={admitted[-2]}"' in html
    monkeypatch.setattr(provenance, "HISTORY_WINDOW", 50)
    chain = provenance.operator_chain("cpu", TINY)
    assert [h["position"] for h in chain["history"]] == admitted and chain["history_before"] is None


def test_the_dashboard_counts_without_counting_events(ledger, client):
    some_events(3)
    with CaptureQueriesContext(connection) as queries:
        html = client.get("/").content.decode()
    assert not any('COUNT(*) AS "__count" FROM "ledger_event"' in q["sql"] for q in queries.captured_queries)
    assert "<strong>4</strong> in 4 streams" in html
    assert len(queries.captured_queries) <= 22
