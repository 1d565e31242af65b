"""An application re-run's revision is decided on the result as it stands when recorded (issue 21):
one admitted by another gate run while the re-run measured is not retracted by a measurement of the
result it replaced. The gate run is replaced by one that records its verdicts (a real ledger),
so the interleaving is made, not raced, and nothing is timed."""
import pytest

from appgate import services
from appgate.models import AppRow
from appgate.projections import result_key
from appgate.services import AppGateOutcome, register, rerun
from ledger.models import Event
from ledger.services import NewEvent, append
from ledger.verification import verify_ledger
from tests.appgate.fixtures import clocked_app

RESULT = result_key("cpu", "clocked")


def verdict(run: str, outcome: str, revises: str | None = None, headline: float = 1.4):
    admitted = outcome == "admitted"
    return append(NewEvent(stream="app/clocked", type="AppGateVerdict", actor="agent:test", payload={
        "result": RESULT, "app": "clocked", "run": run, "verdict": outcome, "revises": revises, "architecture": "cpu",
        "reasons": [] if admitted else ["candidate_incorrect"], "headline": headline if admitted else None,
        "headline_ci": [headline * 0.97, headline * 1.03] if admitted else None,
        "detail": f"{headline:.3f}x" if admitted else "one: candidate: wrong output"}))


def test_an_admitted_rerun_far_below_the_standing_headline_downgrades_it(ledger, tmp_path, monkeypatch):
    """The re-run's own admitted verdict stands in the row when the revision is decided: the standing
    headline it is held to is the one it re-checked."""
    register(clocked_app(tmp_path), "user:test")
    verdict("run-1", "admitted")

    def gate_run(path, actor, protocol, progress, revises, candidate):
        slower = verdict("rerun", "admitted", revises=revises, headline=1.1)
        return AppGateOutcome("admitted", [], slower.data["detail"], 1.1, {}, slower)

    monkeypatch.setattr(services, "run_gate", gate_run)
    _, revision = rerun("clocked", "user:reviewer")
    assert revision.type == "ResultDowngraded" and (revision.data["from_value"], revision.data["to_value"]) == (1.4, 1.1)
    assert AppRow.objects.get(name="clocked").status == "downgraded"
    assert verify_ledger().ok


@pytest.mark.parametrize("replaced", [False, True])
def test_a_failed_rerun_retracts_the_result_unless_another_admission_replaced_it_meanwhile(
        ledger, tmp_path, monkeypatch, replaced):
    register(clocked_app(tmp_path), "user:test")
    standing = verdict("run-1", "admitted")
    newer: list = []

    def gate_run(path, actor, protocol, progress, revises, candidate):
        if replaced:
            newer.append(verdict("run-2", "admitted"))  # another worker's gate run admits while this one measures
        failed = verdict("rerun", "rejected", revises=revises)
        return AppGateOutcome("rejected", failed.data["reasons"], failed.data["detail"], None, {}, failed)

    monkeypatch.setattr(services, "run_gate", gate_run)
    outcome, revision = rerun("clocked", "user:reviewer")
    row = AppRow.objects.get(name="clocked")
    if replaced:
        assert revision is None  # nothing stale: the re-run measured a result that no longer stands
        assert (row.status, row.verdict_event) == ("admitted", str(newer[0].event_id))
        assert not Event.objects.filter(type="ResultRetracted").exists()
    else:
        assert revision.type == "ResultRetracted" and revision.data["revises"] == str(standing.event_id)
        assert row.status == "retracted"
    assert verify_ledger().ok
