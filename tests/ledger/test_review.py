"""Reviewer actions on the ledger: sign-off rules, revisions resetting them, retraction, freezes."""
import pytest

from ledger import review
from ledger.models import Event
from ledger.review import (ReviewError, check_freeze, freeze, retract, sign_off, signoff_state, signoff_states)
from ledger.services import NewEvent, append
from ledger.verification import verify_ledger
from tests.conftest import downgrade

RESULT = "operator/cpu/star_1/16x16x16/f32"


def test_one_reviewer_twice_is_not_enough_two_reviewers_are(ledger):
    sign_off(RESULT, "user:alice")
    sign_off(RESULT, "user:alice", "again")
    state = signoff_state(RESULT)
    assert state == {"version": 1, "reviewers": ["user:alice"], "publishable": False}
    event = sign_off(RESULT, "user:bob", "checked the samples")
    assert event.actor == "user:bob" and event.stream == RESULT and event.data["result_version"] == 1
    assert signoff_state(RESULT) == {"version": 1, "reviewers": ["user:alice", "user:bob"], "publishable": True}
    assert verify_ledger().ok


def test_a_revision_resets_publishability(ledger):
    sign_off(RESULT, "user:alice")
    sign_off(RESULT, "user:bob")
    append(downgrade(RESULT, 1.9))
    assert signoff_state(RESULT) == {"version": 2, "reviewers": [], "publishable": False}
    sign_off(RESULT, "user:alice")
    assert signoff_state(RESULT)["reviewers"] == ["user:alice"] and not signoff_state(RESULT)["publishable"]
    sign_off(RESULT, "user:carol")
    assert signoff_state(RESULT)["publishable"]


def test_a_new_admitted_verdict_is_a_new_version_and_a_rejected_one_or_a_rerun_is_not(ledger):
    app_result = "app/cpu/smooth"

    def verdict(outcome: str, revises: str | None = None) -> NewEvent:
        return NewEvent(stream="app/smooth", type="AppGateVerdict", actor="agent:test", payload={
            "result": app_result, "app": "smooth", "run": "r", "verdict": outcome, "revises": revises,
            "reasons": [] if outcome == "admitted" else ["below_floor"], "architecture": "cpu"})

    append(verdict("admitted"))
    sign_off(app_result, "user:alice")
    sign_off(app_result, "user:bob")
    assert signoff_state(app_result) == {"version": 1, "reviewers": ["user:alice", "user:bob"], "publishable": True}
    first = append(verdict("rejected"))
    append(verdict("admitted", revises=str(first.event_id)))  # a re-run that holds: the same version
    assert signoff_state(app_result)["publishable"]
    append(verdict("admitted"))  # the gate admitted again, with a new headline
    assert signoff_state(app_result) == {"version": 2, "reviewers": [], "publishable": False}
    assert signoff_states([app_result])[app_result] == signoff_state(app_result)
    assert verify_ledger().ok


def test_retraction_needs_a_reason_and_ends_sign_offs(ledger):
    with pytest.raises(ReviewError, match="needs a reason"):
        retract(RESULT, "   ", "user:maintainer")
    sign_off(RESULT, "user:alice")
    sign_off(RESULT, "user:bob")
    event = retract(RESULT, "the CPU was throttled during the admission", "user:maintainer")
    assert event.type == "ResultRetracted" and event.actor == "user:maintainer" and event.stream == RESULT
    assert signoff_state(RESULT) == {"version": 2, "reviewers": [], "publishable": False}
    with pytest.raises(ReviewError, match="already retracted"):
        retract(RESULT, "again", "user:maintainer")
    with pytest.raises(ReviewError, match="retracted"):
        sign_off(RESULT, "user:alice")
    assert verify_ledger().ok


def between_read_and_append(monkeypatch, read: str, event: NewEvent) -> None:
    """Another writer appends `event` just after review's `read` (a function of the result) first
    returns: the interleaving two requests at once could make, made deterministic."""
    real = getattr(review, read)
    raced: list[NewEvent] = []

    def read_then_other_writer(result: str):
        value = real(result)
        if not raced:
            raced.append(event)
            append(event)
        return value

    monkeypatch.setattr(review, read, read_then_other_writer)


def test_a_sign_off_names_the_version_a_revision_made_while_it_was_being_recorded(ledger, monkeypatch):
    between_read_and_append(monkeypatch, "current_version", downgrade(RESULT, 1.9))
    event = sign_off(RESULT, "user:alice")
    assert event.data["result_version"] == 2  # decided again: version 1 was replaced before it was recorded
    assert signoff_state(RESULT) == {"version": 2, "reviewers": ["user:alice"], "publishable": False}
    assert verify_ledger().ok


def test_a_retraction_recorded_while_another_was_being_decided_is_refused(ledger, monkeypatch):
    between_read_and_append(monkeypatch, "_status", NewEvent(stream=RESULT, type="ResultRetracted", actor="user:other",
                                                           payload={"result": RESULT, "reason": "throttled"}))
    with pytest.raises(ReviewError, match="already retracted"):
        retract(RESULT, "noisy admission", "user:maintainer")
    assert list(Event.objects.filter(stream=RESULT).values_list("type", "actor")) == [("ResultRetracted", "user:other")]
    assert verify_ledger().ok


def test_bulk_states_agree_with_single_states(ledger):
    other = "app/cpu/heat3d"
    for reviewer in ("user:a", "user:b"):
        sign_off(RESULT, reviewer)
    sign_off(other, "user:a")
    append(downgrade(other, 1.2))
    sign_off(other, "user:b")
    bulk = signoff_states()
    assert bulk == {RESULT: signoff_state(RESULT), other: signoff_state(other)}
    assert signoff_states([RESULT, "app/cpu/none"])["app/cpu/none"] == signoff_state("app/cpu/none")
    assert signoff_states(prefix="app/") == {other: signoff_state(other)}


def test_a_freeze_records_each_table_and_checks_it_later(ledger):
    table = "result,speedup\noperator/cpu/a,2.0\noperator/cpu/b,1.5\n"
    event = freeze("user:maintainer", {"operator-cases": table, "applications": "result\n"})
    tables = event.data["tables"]
    assert tables["operator-cases"]["rows"] == 2 and tables["applications"]["rows"] == 0
    assert tables["operator-cases"]["csv"] == table
    check = check_freeze(event.position, {"operator-cases": table, "applications": "result\n"})
    assert all(entry["matches"] for entry in check["tables"].values())
    check = check_freeze(event.position, {"operator-cases": table.replace("1.5", "1.4"), "applications": "result\n"})
    assert not check["tables"]["operator-cases"]["matches"] and check["tables"]["applications"]["matches"]
    with pytest.raises(ReviewError, match="no publication freeze at position 1"):
        check_freeze(1, {})
    with pytest.raises(ReviewError):
        freeze("user:maintainer", {})
    assert verify_ledger().ok
