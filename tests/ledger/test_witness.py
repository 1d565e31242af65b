"""The tail witness: a cut tail (its checkpoint included), a forged append and a rewrite re-signed
with the stolen key, each made with the triggers off, as an attacker with the database would.
`verify` names what is missing and never advises a rebuild; `rebuild` refuses and keeps the
evidence. Plain SQL behaviour: these run on both databases."""
import base64
import json
import os
import stat
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from ledger import review, witness
from ledger.canonical import chain_hash, checkpoint_message, event_body
from ledger.checkpoints import sign_checkpoint, signed_head, signing_key
from ledger.db_guard import install_guards, remove_guards
from ledger.errors import LedgerError
from ledger.models import Event, ProjectionState, VerificationRun
from ledger.projection_base import registered
from ledger.selectors import local_ledger_id
from ledger.services import record_from_row
from ledger.transfer import export_ledger
from ledger.trust import signature_valid
from ledger.verification import rebuild_projections, request_verification, run_verification, verify_ledger
from tests.conftest import some_events
from tests.ledger.test_verify import tamper


@pytest.fixture
def eight(ledger):
    """#1 LedgerInitialised, #2-#5 events, #6 the checkpoint of head 5, #7-#8 events."""
    some_events(4)
    sign_checkpoint("user:test")
    some_events(2)
    return 8


def cut_from(position: int) -> None:
    tamper("DELETE FROM ledger_event WHERE position >= %s", [position])


def live_projections() -> dict:
    return {p.name: p.live_rows() for p in registered()}


def rows_from(position: int) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT position, body, prev_hash, hash FROM ledger_event WHERE position >= %s ORDER BY position", [position])
        return cursor.fetchall()


def test_a_cut_tail_with_its_checkpoint_fails_verify_and_rebuild_keeps_the_evidence(eight, capsys):
    head_hash = rows_from(5)[0][3]
    before = live_projections()
    cut_from(4)  # events #4-#8, the checkpoint #6 among them
    report = verify_ledger()
    assert (report.ok, report.bad_position) == (False, 4)
    assert (f"positions 4-6 missing: the database ends at 3 but the witness signed head 5 (hash {head_hash[:16]}…) "
            "in the checkpoint at position 6") in report.problem
    assert "do not rebuild" in report.problem and "`ledger rebuild`" not in report.problem
    with pytest.raises(SystemExit):
        call_command("ledger", "verify")
    assert "FAILED at position 4: positions 4-6 missing" in capsys.readouterr().err

    with pytest.raises(CommandError, match="rebuild refused: positions 4-6 missing"):
        call_command("ledger", "rebuild")
    assert live_projections() == before  # the projections still show events #4-#8
    assert set(ProjectionState.objects.values_list("last_position", flat=True)) == {8}

    call_command("ledger", "--actor", "user:operator", "rebuild", "--override-tail-check", "events lost, accepted")
    logged = json.loads((Path(settings.VAR_DIR) / "witness" / "overrides.jsonl").read_text().splitlines()[-1])
    assert (logged["actor"], logged["reason"], logged["database_head"]) == ("user:operator", "events lost, accepted", 3)
    assert "positions 4-6 missing" in verify_ledger().problem  # the witness still says so


def test_a_cut_after_the_last_checkpoint_is_shown_by_the_projections(eight):
    cut_from(7)
    report = verify_ledger()
    assert report.bad_position == 7
    assert "positions 7-8 missing: the database ends at 6 but projection" in report.problem
    assert "applied events up to 8" in report.problem and "`ledger rebuild`" not in report.problem
    with pytest.raises(LedgerError, match="rebuild refused: positions 7-8 missing"):
        rebuild_projections()


def test_verify_s_own_earlier_run_is_a_witness_too(ledger):
    some_events(4)
    run = run_verification(request_verification("user:test").pk)
    assert (run.status, run.head_position) == ("passed", 5)
    cut_from(4)
    report = verify_ledger()
    assert "positions 4-5 missing: the database ends at 3 but verify passed at head 5" in report.problem
    witness.path_for(local_ledger_id()).unlink()  # the attacker removes the witness file too
    assert f"positions 4-5 missing: the database ends at 3 but verification run #{run.pk} passed at head 5" in verify_ledger().problem
    VerificationRun.objects.all().delete()  # and the runs
    assert "positions 4-5 missing: the database ends at 3 but projection" in verify_ledger().problem
    ProjectionState.objects.update(last_position=3)  # and the projections' positions, not their rows
    report = verify_ledger()
    assert report.bad_position == 4 and "positions 4-5 missing: the database ends at 3 but row" in report.problem
    assert "was written by the event at position 5" in report.problem
    with pytest.raises(LedgerError, match="rebuild refused: positions 4-5 missing: the database ends at 3 but row"):
        rebuild_projections()


def test_a_well_formed_event_appended_by_plain_insert_fails_verify(ledger):
    some_events(2)
    _, _, _, prev = rows_from(3)[0]
    fields = {"position": 4, "event_id": "0b7ab1a4-5f2b-4f55-9a2e-5c7b4fd1c0de", "stream": "case/forged/1x1x1/f32",
              "version": 1, "type": "ResultRetracted", "schema_version": 1,
              "payload": {"result": "case/forged/1x1x1/f32", "reason": "forged", "rerun": None, "revises": None},
              "actor": "user:mallory", "recorded_at": "2026-12-01T00:00:00.000000+00:00", "origin": None}
    body = event_body(fields)
    tamper("INSERT INTO ledger_event (position, event_id, stream, version, type, schema_version, actor, recorded_at, body,"
           " prev_hash, hash) VALUES (4, %s, %s, 1, 'ResultRetracted', 1, 'user:mallory', %s, %s, %s, %s)",
           [fields["event_id"], fields["stream"], "2026-12-01 00:00:00+00:00", body, prev, chain_hash(prev, body)])
    report = verify_ledger()
    assert report.bad_position == 4 and "events #4-4 were inserted out of band" in report.problem


def test_a_rewrite_re_signed_with_the_service_key_fails_against_the_witness(eight):
    """Issue 14's attack: a kernel read the key, events were rewritten, the checkpoint re-signed.
    The checkpoint verifies again; the witness written when it was first signed does not."""
    witnessed = rows_from(5)[0][3]
    rewrite_from_3(signing_key())
    report = verify_ledger()
    assert report.bad_position == 5
    assert "history differs from the witness" in report.problem and f"signed head 5 with hash {witnessed[:16]}…" in report.problem
    with pytest.raises(LedgerError, match="rebuild refused: history differs from the witness"):
        rebuild_projections()


def test_a_rewrite_by_root_is_caught_by_a_signed_head_held_elsewhere(eight, tmp_path, capsys):
    """Root on the service host re-signs the rewrite and rewrites the witness file and projections
    too: every local check passes. An export (or a witness file copy) kept elsewhere does not."""
    held = tmp_path / "kept-elsewhere.jsonl"
    with held.open("w") as handle:
        export_ledger(handle)  # #9: the checkpoint of head 8
    copy = tmp_path / "witness-copy.json"
    copy.write_text(witness.path_for(local_ledger_id()).read_text())
    rewrite_from_3(signing_key())
    witness.path_for(local_ledger_id()).unlink()
    rebuild_projections()  # nothing local is left to refuse it
    assert verify_ledger().ok  # the limit of what one host can show
    for kept in (held, copy):
        report = verify_ledger(held=[kept])
        assert report.bad_position == 8 and f"history differs from the witness {kept}: it signed head 8" in report.problem
    with pytest.raises(SystemExit):
        call_command("ledger", "verify", "--witness", str(held))
    assert "FAILED at position 8: history differs from the witness" in capsys.readouterr().err


def rewrite_from_3(key) -> None:
    """Edit event #3, then recompute every later hash, re-signing every later checkpoint over its new head."""
    rows = rows_from(3)
    prev = rows[0][2]
    hashes = {}
    remove_guards(connection)
    with connection.cursor() as cursor:
        for position, body, _, _ in rows:
            fields = json.loads(body)
            if position == 3:
                fields["payload"]["to_value"] = 9.99
            if fields["type"] == "CheckpointSigned":
                data = fields["payload"]
                data["head_hash"] = hashes[data["head_position"]]
                message = checkpoint_message(data["ledger_id"], data["head_position"], data["head_hash"])
                data["signature"] = base64.b64encode(key.sign(message)).decode()
            body = event_body(fields)
            hashes[position] = new_hash = chain_hash(prev, body)
            cursor.execute("UPDATE ledger_event SET body = %s, prev_hash = %s, hash = %s WHERE position = %s",
                           [body, prev, new_hash, position])
            prev = new_hash
    install_guards(connection)


def test_the_key_and_the_witness_are_the_service_user_s_alone(eight):
    var = Path(settings.VAR_DIR)
    key_file = Path(settings.LEDGER_SIGNING_KEY_FILE)
    mode = lambda path: stat.S_IMODE(path.stat().st_mode)  # noqa: E731
    assert (mode(var), mode(key_file)) == (0o700, 0o600)
    assert (mode(var / "witness"), mode(witness.path_for(local_ledger_id()))) == (0o700, 0o600)
    os.chmod(key_file, 0o644)
    try:
        with pytest.raises(LedgerError, match="readable or writable by other users"):
            sign_checkpoint("user:test")
    finally:
        os.chmod(key_file, 0o600)


def test_a_freeze_carries_the_signed_head(eight):
    event = review.freeze("user:maintainer", {"operator": "case,speedup\nstar_1,1.5\n"})
    checkpoint_position = event.position - 1
    head = event.data["witness"]
    assert head["checkpoint_position"] == checkpoint_position and head["head_position"] == 8
    assert head == signed_head(_event(checkpoint_position))
    assert verify_ledger().ok
    assert signature_valid(head["public_key"], head["signature"], head["ledger_id"], 8, head["head_hash"])
    assert review.check_freeze(event.position, {})["witness"] == head


def _event(position: int):
    return record_from_row(Event.objects.get(position=position))
