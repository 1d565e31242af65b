import re
import uuid
from pathlib import Path

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from ledger import event_types
from ledger.canonical import GENESIS_HASH, canonical_json, chain_hash, event_body, HASHED_FIELDS
from ledger.errors import ConcurrencyError, IdempotencyConflict, InvalidPayload, LedgerError, UnknownEventType
from ledger.event_types import Payload, event_type
from ledger.models import Event, EventTypeCount, ProjectionState, ResultStatus, SignOff, StreamHead
from ledger.append_sql import Session, prepared_text
from ledger.projection_base import TableRows, read_rows, registered
from ledger.services import NewEvent, append, append_many, head
from ledger.transfer import import_ledger
from ledger.verification import verify_ledger
from tests.conftest import downgrade

ROOT = Path(__file__).resolve().parents[2]


def test_first_event_starts_the_chain_and_hash_covers_the_canonical_body(ledger):
    assert ledger.position == 1
    assert ledger.prev_hash == GENESIS_HASH
    fields = {name: getattr(ledger, name) for name in HASHED_FIELDS}
    assert ledger.body == event_body(fields) == canonical_json(fields)
    assert ledger.hash == chain_hash(GENESIS_HASH, ledger.body)
    stored = Event.objects.get(position=1)
    assert (stored.body, stored.hash) == (ledger.body, ledger.hash)


def test_each_event_links_to_the_previous_hash(ledger):
    second = append(downgrade("case/a", 1.9))
    third = append(downgrade("case/b", 1.8))
    assert (second.position, third.position) == (2, 3)
    assert second.prev_hash == ledger.hash and third.prev_hash == second.hash
    assert head() == (3, third.hash)


def test_unknown_type_is_refused_and_lists_the_known_ones(ledger):
    with pytest.raises(UnknownEventType, match="unknown event type 'ResultPolished'.*ResultRetracted"):
        append(NewEvent(stream="case/a", type="ResultPolished", payload={}, actor="user:x"))
    assert Event.objects.count() == 1


@pytest.mark.parametrize(
    "payload, field",
    [
        ({"result": "case/a", "from_value": 2.0, "to_value": 1.5}, "payload.reason"),
        ({"result": "case/a", "from_value": "fast", "to_value": 1.5, "reason": "r"}, "payload.from_value"),
        ({"result": "case/a", "from_value": 2.0, "to_value": 1.5, "reason": "r", "colour": "red"}, "payload.colour"),
        ({"result": "case/a", "from_value": 2.0, "to_value": 1.5, "reason": "   "}, "payload.reason"),
    ],
)
def test_invalid_payload_is_refused_naming_the_field(ledger, payload, field):
    with pytest.raises(InvalidPayload, match=field.replace(".", r"\.")):
        append(NewEvent(stream="case/a", type="ResultDowngraded", payload=payload, actor="user:x"))
    assert Event.objects.count() == 1


def test_stream_and_actor_are_checked(ledger):
    with pytest.raises(LedgerError, match="stream"):
        append(downgrade("case a", 1.0))
    with pytest.raises(LedgerError, match="actor"):
        append(NewEvent(stream="case/a", type="ResultRetracted", payload={"result": "case/a", "reason": "x"}, actor=" "))


def test_stale_expected_version_raises_a_concurrency_error(ledger):
    append(downgrade("case/a", 1.9, expected_version=0))
    append(downgrade("case/a", 1.8, expected_version=1))
    with pytest.raises(ConcurrencyError, match="stream 'case/a' is at version 2, but the writer expected 1"):
        append(downgrade("case/a", 1.7, expected_version=1))
    assert StreamHead.objects.get(stream="case/a").version == 2


def test_retrying_an_event_id_with_the_same_content_returns_the_stored_event(ledger):
    key = uuid.uuid4()
    first = append(downgrade("case/a", 1.9, event_id=key, expected_version=0))
    again = append(downgrade("case/a", 1.9, event_id=key, expected_version=0))
    assert again == first
    assert Event.objects.count() == 2
    assert EventTypeCount.objects.get(type="ResultDowngraded").count == 1


def test_reusing_an_event_id_for_different_content_is_refused(ledger):
    key = uuid.uuid4()
    append(downgrade("case/a", 1.9, event_id=key))
    with pytest.raises(IdempotencyConflict, match=f"event id {key} is already recorded at position 2"):
        append(downgrade("case/a", 1.5, event_id=key))


def test_an_event_id_repeated_in_one_batch_is_recorded_once(ledger):
    key = uuid.uuid4()
    first, again = append_many([downgrade("case/a", 1.9, event_id=key), downgrade("case/a", 1.9, event_id=key)])
    assert again == first and first.position == 2
    assert Event.objects.count() == 2
    other = uuid.uuid4()
    with pytest.raises(IdempotencyConflict, match=f"event id {other} is already recorded at position 3"):
        append_many([downgrade("case/b", 1.9, event_id=other), downgrade("case/b", 1.5, event_id=other)])
    assert Event.objects.count() == 2


def test_a_batch_is_all_or_nothing(ledger):
    with pytest.raises(ConcurrencyError):
        append_many([downgrade("case/a", 1.9), downgrade("case/b", 1.8, expected_version=5)])
    with pytest.raises(InvalidPayload):
        append_many([downgrade("case/a", 1.9), NewEvent(stream="x", type="ResultRetracted", payload={}, actor="u")])
    assert Event.objects.count() == 1
    assert not StreamHead.objects.filter(stream="case/a").exists()


def test_batch_versions_streams_in_order(ledger):
    events = append_many([downgrade("case/a", 1.9), downgrade("case/a", 1.8), downgrade("case/b", 1.7)])
    assert [(e.stream, e.version, e.position) for e in events] == [("case/a", 1, 2), ("case/a", 2, 3), ("case/b", 1, 4)]


def test_projections_are_updated_in_the_same_append(ledger):
    append(downgrade("case/a", 1.9))
    append(NewEvent(stream="case/a", type="ResultRetracted", payload={"result": "case/a", "reason": "oracle failed"}, actor="user:r"))
    status = ResultStatus.objects.get(result="case/a")
    assert (status.status, status.value, status.revisions, status.last_reason) == ("retracted", 1.9, 2, "oracle failed")
    signoff = {"result": "case/a", "result_version": 2, "reviewer": "alice"}
    append(NewEvent(stream="case/a", type="AuditSignedOff", payload=signoff, actor="user:alice"))
    append(NewEvent(stream="case/a", type="AuditSignedOff", payload=signoff, actor="user:alice"))
    assert SignOff.objects.filter(result="case/a").count() == 1
    assert set(ProjectionState.objects.values_list("last_position", flat=True)) == {5}
    assert StreamHead.objects.get(stream="case/a").version == 4


def test_old_schema_versions_are_upcast_for_readers(ledger):
    @event_type("TestWidgetMeasured", owner="ledger")
    class V1(Payload):
        seconds: float

    @event_type("TestWidgetMeasured", owner="ledger", version=2, upcast_from_previous=lambda p: {"ms": p["seconds"] * 1000})
    class V2(Payload):
        ms: float

    try:
        old = append(NewEvent(stream="w", type="TestWidgetMeasured", payload={"seconds": 0.25}, actor="u", schema_version=1))
        new = append(NewEvent(stream="w", type="TestWidgetMeasured", payload={"ms": 7.0}, actor="u"))
        assert (old.schema_version, old.payload, old.data) == (1, {"seconds": 0.25}, {"ms": 250.0})
        assert (new.schema_version, new.data) == (2, {"ms": 7.0})
    finally:
        event_types.unregister("TestWidgetMeasured")


def test_a_new_schema_version_needs_an_upcaster():
    following = event_types.get("ResultRetracted").latest_version + 1
    with pytest.raises(ValueError, match="needs an upcaster"):

        @event_type("ResultRetracted", owner="ledger", version=following)
        class Broken(Payload):
            result: str


def round_trips(captured) -> list[list[str]]:
    """Each captured query (one round trip) as its statements, each 'VERB table…' (every table a
    SELECT reads, in order; a statement of data-modifying CTEs as 'WITH | VERB table | …'); an
    `EXECUTE` of a prepared statement as that statement; savepoints of the test's own
    transaction and the PREPAREs of a statement's first use on a connection left out."""
    trips = []
    for query in captured.captured_queries:
        sql = re.sub(r"^\d+ times: ", "", query["sql"])  # how Django logs an executemany
        kinds = []
        for part in re.split(r"; (?=BEGIN|COMMIT|SELECT|EXECUTE|WITH|INSERT|UPDATE)", sql):
            if part.startswith(("SAVEPOINT", "RELEASE SAVEPOINT", "PREPARE")):
                continue
            if part.startswith("EXECUTE "):
                part = prepared_text(part.split()[1].split("(")[0])
            kinds.append(_kind(part))
        if kinds:
            trips.append(kinds)
    return trips


def _kind(sql: str) -> str:
    if sql.startswith(("BEGIN", "COMMIT")):
        return sql
    if sql.startswith("WITH "):
        parts = re.findall(r'\bw\d+ AS \((INSERT INTO|UPDATE) "?([a-z_][a-z0-9_]*)', sql)
        return " | ".join(["WITH", *(f"{verb.split()[0]} {table}" for verb, table in parts)])
    if "pg_advisory_xact_lock" in sql:
        return "SELECT pg_advisory_xact_lock"
    verb = sql.split()[0].upper()
    pattern = r'\bFROM\s+"?([a-z_][a-z0-9_]*)' if verb == "SELECT" else r'\b(?:INTO|UPDATE)\s+"?([a-z_][a-z0-9_]*)'
    tables = list(dict.fromkeys(re.findall(pattern, sql)))[: None if verb == "SELECT" else 1]
    return " ".join([verb, *tables])


def expected_round_trips(event_type: str) -> list[list[str]]:
    """The append's statements: the lock (PostgreSQL), the chain head with the stream versions and
    the count of projection positions, one read of the rows of every projection subscribed to the
    type; then the event INSERT, one upsert per projection that writes a row (every subscriber,
    for the events below) and the projection positions. On PostgreSQL in two round trips, the
    writes as one statement; on SQLite one statement at a time."""
    subscribed = [p.model._meta.db_table for p in registered() if p.handles is None or event_type in p.handles]
    reads = ["SELECT ledger_event ledger_projectionstate", " ".join(["SELECT", *subscribed])]
    writes = ["INSERT ledger_event", *(f"INSERT {t}" for t in subscribed), "UPDATE ledger_projectionstate"]
    if connection.vendor == "postgresql":
        return [["SELECT pg_advisory_xact_lock", *reads], [" | ".join(["WITH", *writes])]]
    return [[statement] for statement in reads + writes]


def _signoff(result: str, reviewer: str) -> NewEvent:
    payload = {"result": result, "result_version": 1, "reviewer": reviewer}
    return NewEvent(stream=result, type="AuditSignedOff", payload=payload, actor=f"user:{reviewer}")


def test_a_single_append_issues_a_fixed_set_of_statements(ledger):
    append(_signoff("case/a", "alice"))  # the stream, its head row and the type count exist
    with CaptureQueriesContext(connection) as captured:
        append(_signoff("case/a", "bob"))
    assert round_trips(captured) == expected_round_trips("AuditSignedOff")
    assert SignOff.objects.filter(result="case/a").count() == 2


def test_a_batch_issues_the_statements_of_one_append(ledger):
    """Rows are read and written per table, not per event: 40 events on 40 streams cost what one does."""
    with CaptureQueriesContext(connection) as captured:
        append_many([_signoff(f"case/{n}", "alice") for n in range(40)])
    assert round_trips(captured) == expected_round_trips("AuditSignedOff")
    assert StreamHead.objects.filter(stream__startswith="case/").count() == 40


def test_one_read_of_many_projection_tables_gives_the_rows_the_orm_gives(ledger):
    """`read_rows` reads several tables in one statement, every other table's columns NULL and
    typed: each row must come back as `.values()` gives it (JSON, floats, booleans, dates)."""
    for name in ("docs/benchmarks/appgate_cpu.jsonl", "docs/benchmarks/forge_h200_levers.jsonl"):
        import_ledger(ROOT / name, "user:importer")
    session = Session()
    tables = [(TableRows(p.model, p.key_field, session), p.live_rows()) for p in registered()]
    assert sum(bool(live) for _, live in tables) >= 12  # rows in most projections, of every column type
    absent = {rows: -1 if rows.sql.pk.get_internal_type().endswith("IntegerField") else "absent" for rows, _ in tables}
    with CaptureQueriesContext(connection) as captured:
        read_rows(session, [(rows, [*live, absent[rows]]) for rows, live in tables])
    assert len(captured.captured_queries) == 1
    for rows, live in tables:
        assert rows.cache == {**live, absent[rows]: None}
    assert verify_ledger().ok
