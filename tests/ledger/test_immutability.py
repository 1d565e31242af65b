"""The database itself refuses to change history, whatever the application does."""
import pytest
from django.db import connection, transaction
from django.db.utils import DatabaseError

from tests.conftest import on_postgres, some_events


def _refused(sql: str, params=()) -> str:
    with pytest.raises(DatabaseError) as caught:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(sql, params)
    return str(caught.value)


def test_update_is_refused(ledger):
    some_events(2)
    assert "append-only: UPDATE refused" in _refused("UPDATE ledger_event SET actor = 'mallory' WHERE position = 2")
    assert "append-only" in _refused("UPDATE ledger_event SET body = body")


def test_delete_is_refused(ledger):
    some_events(2)
    assert "append-only: DELETE refused" in _refused("DELETE FROM ledger_event WHERE position = 3")
    assert "append-only" in _refused("DELETE FROM ledger_event")


@pytest.mark.skipif("not on_postgres()", reason="TRUNCATE exists only on PostgreSQL")
def test_truncate_is_refused_on_postgres(ledger):
    assert "append-only: TRUNCATE refused" in _refused("TRUNCATE ledger_event CASCADE")


@pytest.mark.skipif("on_postgres()", reason="INSERT OR REPLACE is SQLite syntax")
def test_insert_or_replace_is_refused_on_sqlite(ledger):
    sql = (
        "INSERT OR REPLACE INTO ledger_event (position, event_id, stream, version, type, schema_version, actor,"
        " recorded_at, body, prev_hash, hash) SELECT position, event_id, stream, version, type, schema_version,"
        " 'mallory', recorded_at, body, prev_hash, hash FROM ledger_event WHERE position = 1"
    )
    assert "INSERT OR REPLACE refused" in _refused(sql)


@pytest.mark.skipif("not on_postgres()", reason="ON CONFLICT DO UPDATE is the PostgreSQL upsert")
def test_upsert_is_refused_on_postgres(ledger):
    sql = (
        "INSERT INTO ledger_event (position, event_id, stream, version, type, schema_version, actor, recorded_at,"
        " body, prev_hash, hash) SELECT position, event_id, stream, version, type, schema_version, actor,"
        " recorded_at, body, prev_hash, hash FROM ledger_event WHERE position = 1"
        " ON CONFLICT (position) DO UPDATE SET actor = 'mallory'"
    )
    assert "append-only: UPDATE refused" in _refused(sql)


def test_history_is_unchanged_after_the_refusals(ledger):
    events = some_events(2)
    _refused("UPDATE ledger_event SET actor = 'mallory'")
    _refused("DELETE FROM ledger_event")
    with connection.cursor() as cursor:
        cursor.execute("SELECT position, actor, hash FROM ledger_event ORDER BY position")
        rows = cursor.fetchall()
    assert rows == [(1, "user:test", ledger.hash)] + [(e.position, e.actor, e.hash) for e in events]
