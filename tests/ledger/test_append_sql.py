"""The append's transport (ledger.append_sql.Session): its own transaction outside atomic blocks on
PostgreSQL, in two round trips; what a failure leaves behind; statements prepared per connection;
the values that skip Django's conversion."""
import uuid

import pytest
from django.db import IntegrityError, connection
from django.test.utils import CaptureQueriesContext

from ledger.append_sql import PLAIN
from ledger.errors import ConcurrencyError
from ledger.models import Event, StreamHead
from ledger.projection_base import registered
from ledger.services import append, head
from ledger.verification import verify_ledger
from tests.conftest import downgrade
from tests.ledger.test_append import _signoff, expected_round_trips, round_trips

postgres_only = pytest.mark.skipif("connection.vendor != 'postgresql'", reason="the session's own transaction is PostgreSQL's")


def _idle_without_locks() -> bool:
    """No transaction open on the connection, and no advisory lock held by its server session."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()")
        locks = cursor.fetchone()[0]
    return connection.connection.info.transaction_status == 0 and locks == 0


@postgres_only
def test_an_append_outside_atomic_blocks_is_two_round_trips_from_begin_to_commit(transactional_ledger):
    append(_signoff("case/a", "alice"))  # the stream, its head row and the type count exist
    with CaptureQueriesContext(connection) as captured:
        event = append(_signoff("case/a", "bob"))
    reads, writes = expected_round_trips("AuditSignedOff")
    assert round_trips(captured) == [["BEGIN", *reads], [*writes, "COMMIT"]]
    assert _idle_without_locks()
    assert head() == (event.position, event.hash)


@postgres_only
def test_an_append_refused_between_the_round_trips_rolls_back_and_releases_the_lock(transactional_ledger):
    append(downgrade("case/a", 1.9))
    with pytest.raises(ConcurrencyError):
        append(downgrade("case/a", 1.8, expected_version=0))
    assert _idle_without_locks()
    assert append(downgrade("case/a", 1.7, expected_version=1)).version == 2


@postgres_only
def test_a_write_the_database_refuses_records_nothing_and_releases_the_lock(transactional_ledger):
    """The event INSERT and the projection writes are one statement: a refused projection row
    takes the event with it."""
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE ledger_streamhead ADD CONSTRAINT test_refused CHECK (stream <> 'case/refused')")
    try:
        before = head()
        with pytest.raises(IntegrityError, match="test_refused"):
            append(downgrade("case/refused", 1.9))
        assert _idle_without_locks()
        assert head() == before and not Event.objects.filter(stream="case/refused").exists()
    finally:
        with connection.cursor() as cursor:
            cursor.execute("ALTER TABLE ledger_streamhead DROP CONSTRAINT test_refused")
    append(downgrade("case/b", 1.9))
    assert verify_ledger().ok


@postgres_only
def test_statements_are_prepared_once_per_connection(transactional_ledger):
    def prepares(event) -> int:
        with CaptureQueriesContext(connection) as captured:
            append(event)
        return sum(query["sql"].startswith("PREPARE") for query in captured.captured_queries)

    prepares(downgrade("case/a", 1.9))
    assert prepares(downgrade("case/a", 1.8)) == 0
    connection.close()  # a new server session knows none of them
    assert prepares(downgrade("case/a", 1.7)) > 0
    assert prepares(downgrade("case/a", 1.6)) == 0
    assert StreamHead.objects.get(stream="case/a").version == 4
    assert verify_ledger().ok


def test_a_plain_value_is_what_django_would_write(db):
    """The append passes a value of its column's plain type as it is (ledger.append_sql.PLAIN),
    where Django would convert it: what goes to the database must be the same, for every column of
    every table the append writes (on PostgreSQL Django wraps integers in psycopg's Int4/Int8,
    which the client-side binding the append uses writes as the same digits)."""
    samples = {str: ["", "case/a", "ü \"'\\ %s", "x" * 300], int: [0, 1, -7, 2**31 - 1, 2**40],
               float: [0.0, 1.5, -2.5e300], bool: [True, False]}
    fields = [field for model in {Event, *(p.model for p in registered())} for field in model._meta.concrete_fields]
    checked = 0
    with connection.cursor() as cursor:
        def sent(value):
            return cursor.mogrify("%s", [value]) if connection.vendor == "postgresql" else (type(value), value)

        for field in fields:
            plain = PLAIN.get(field.get_internal_type())
            for value in samples.get(plain, []):
                assert sent(field.get_db_prep_save(value, connection)) == sent(value), (field, value)
                checked += 1
    assert checked > 100
    assert {field.get_internal_type() for field in fields} - set(PLAIN) >= {"UUIDField", "DateTimeField", "JSONField"}


def test_a_retried_event_id_outside_atomic_blocks_returns_the_stored_event(transactional_ledger):
    key = uuid.uuid4()
    first = append(downgrade("case/a", 1.9, event_id=key))
    assert append(downgrade("case/a", 1.9, event_id=key)) == first
    assert Event.objects.filter(event_id=key).count() == 1
