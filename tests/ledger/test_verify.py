"""verify catches every out-of-band change; rebuild reproduces the live projections."""
import pytest
from django.core.management import call_command
from django.db import connection

from ledger.canonical import chain_hash
from ledger.checkpoints import sign_checkpoint
from ledger.db_guard import install_guards, remove_guards
from ledger.models import EventTypeCount, ProjectionState, ResultStatus, StreamHead
from ledger.projection_base import registered
from ledger.verification import rebuild_projections, verify_ledger
from tests.conftest import some_events


def tamper(sql: str, params=()) -> None:
    """What an attacker with database access does: drop the triggers, then edit the table."""
    remove_guards(connection)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
    install_guards(connection)


def body_of(position: int) -> tuple[str, str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT body, prev_hash FROM ledger_event WHERE position = %s", [position])
        return cursor.fetchone()


@pytest.fixture
def five(ledger):
    some_events(4)
    return 5


def test_intact_ledger_verifies(five):
    report = verify_ledger()
    assert report.ok, report.summary()
    assert report.summary().startswith("OK: 5 events, head #5")
    assert report.projections_compared == len(list(registered()))


def test_edited_body_is_caught_at_its_position(five):
    body, _ = body_of(3)
    tamper("UPDATE ledger_event SET body = %s WHERE position = 3", [body.replace('"to_value":1.51', '"to_value":9.99')])
    report = verify_ledger()
    assert (report.ok, report.bad_position) == (False, 3)
    assert "event edited" in report.problem


def test_edited_column_is_caught(five):
    tamper("UPDATE ledger_event SET actor = 'user:mallory' WHERE position = 4")
    report = verify_ledger()
    assert report.bad_position == 4 and "column actor" in report.problem


def test_edited_stream_column_is_caught(five):
    tamper("UPDATE ledger_event SET stream = 'case/other' WHERE position = 2")
    report = verify_ledger()
    assert report.bad_position == 2 and "column stream" in report.problem


def test_deleted_event_is_caught(five):
    tamper("DELETE FROM ledger_event WHERE position = 3")
    report = verify_ledger()
    assert report.bad_position == 3 and "missing" in report.problem


def test_deleted_tail_is_caught_by_the_projections(five):
    tamper("DELETE FROM ledger_event WHERE position = 5")
    report = verify_ledger()
    assert not report.ok and report.bad_position == 5
    assert "position 5 missing: the database ends at 4 but projection" in report.problem and "applied events up to 5" in report.problem
    assert "`ledger rebuild`" not in report.problem


def test_reordered_events_are_caught(five):
    tamper("UPDATE ledger_event SET position = position + 100 WHERE position IN (2, 3)")
    tamper("UPDATE ledger_event SET position = 2 WHERE position = 103")
    tamper("UPDATE ledger_event SET position = 3 WHERE position = 102")
    report = verify_ledger()
    assert report.bad_position == 2 and "chain broken" in report.problem


def test_event_inserted_out_of_band_is_caught(five):
    body, _ = body_of(5)
    forged = body.replace('"position":5', '"position":6')
    tamper(
        "INSERT INTO ledger_event (position, event_id, stream, version, type, schema_version, actor, recorded_at,"
        " body, prev_hash, hash) SELECT 6, %s, stream, 99, type, schema_version, actor, recorded_at, %s, hash, %s"
        " FROM ledger_event WHERE position = 5",
        ["0b7ab1a4-5f2b-4f55-9a2e-5c7b4fd1c0de", forged, "f" * 64],
    )
    report = verify_ledger()
    assert report.bad_position == 6 and "event edited" in report.problem


def test_rewritten_history_with_recomputed_hashes_is_caught_by_the_checkpoint(five):
    sign_checkpoint("user:test")
    # The attacker edits event 3 and recomputes every hash after it, so the chain is consistent again.
    body, prev = body_of(3)
    remove_guards(connection)
    with connection.cursor() as cursor:
        new_body = body.replace('"to_value":1.51', '"to_value":9.99')
        cursor.execute("SELECT position, body FROM ledger_event WHERE position >= 3 ORDER BY position")
        rows = cursor.fetchall()
        rows[0] = (3, new_body)
        for position, text in rows:
            new_hash = chain_hash(prev, text)
            cursor.execute("UPDATE ledger_event SET body = %s, prev_hash = %s, hash = %s WHERE position = %s",
                           [text, prev, new_hash, position])
            prev = new_hash
    install_guards(connection)
    ResultStatus.objects.filter(result="case/star_1/1x1x1/f32").update(value=9.99)
    report = verify_ledger()
    assert not report.ok
    assert report.bad_position == 5 and "differs from the checkpoint signed at position 6" in report.problem


def test_edited_projection_is_caught_by_replay(five):
    ResultStatus.objects.filter(result="case/star_1/2x2x2/f32").update(value=4.2)
    report = verify_ledger()
    assert not report.ok and "projection result_status differs" in report.problem and "4.2" in report.problem


def test_rebuild_restores_identical_projections(five):
    before = {p.name: p.live_rows() for p in registered()}
    ResultStatus.objects.all().delete()
    EventTypeCount.objects.filter(type="ResultDowngraded").update(count=1)
    StreamHead.objects.create(stream="bogus", version=1, first_position=1, last_position=1, last_type="x", last_recorded_at="")
    assert not verify_ledger().ok
    assert rebuild_projections() == 5
    assert {p.name: p.live_rows() for p in registered()} == before
    assert set(ProjectionState.objects.values_list("last_position", flat=True)) == {5}
    assert verify_ledger().ok


def test_verify_command_exit_codes(five, capsys):
    call_command("ledger", "verify")
    assert capsys.readouterr().out.startswith("OK: 5 events")
    tamper("UPDATE ledger_event SET actor = 'user:mallory' WHERE position = 2")
    with pytest.raises(SystemExit) as exited:
        call_command("ledger", "verify")
    assert exited.value.code == 1
    assert "FAILED at position 2" in capsys.readouterr().err
