"""The Kernel Agent's loop on the CPU backend with scripted proposers: rounds, logs, rules,
convergence, the operator map, abandoned rounds, and rebuilding it all from the ledger."""
import pytest
from django.core.management import call_command

from tests.conftest import lift_speed_rule

from forge.models import CaseCampaign, IdeaEntry, MapCell, PerfEntry, RoundRow
from forge.services import abandon_stale_rounds, execute_round, start_campaign, start_round
from ledger.models import Event
from ledger.projection_base import registered
from ledger.records import RecordedEvent
from ledger.verification import rebuild_projections, verify_ledger
from tests.forge.fixtures import BROKEN, CASE, HONEST, QUICK, SLOW, Rewrite, Scripted, run_rounds


def test_non_improving_rounds_trigger_the_outside_history_rule_and_the_budget_converges(ledger):
    campaign = start_campaign([CASE], "cpu", "scripted", 5, "user:test")
    proposer = Scripted([BROKEN, None, BROKEN, BROKEN, BROKEN])
    outcomes = run_rounds(campaign, CASE, proposer)
    assert [o.state for o in outcomes] == ["compilation_failure", "generation_failure", "compilation_failure",
                                          "compilation_failure", "compilation_failure"]
    assert [c.must_leave_history for c in proposer.seen] == [False, False, False, True, False]
    rules = Event.objects.filter(type="RuleTriggered")
    assert rules.count() == 1
    state = CaseCampaign.objects.get(campaign=campaign)
    assert (state.rounds, state.converged, state.best) == (5, "budget_spent", None)
    assert PerfEntry.objects.filter(case=CASE).count() == 5
    assert "generation failure (malformed)" in PerfEntry.objects.get(round=outcomes[1].round).measurement
    assert not MapCell.objects.exists()  # nothing admitted: nothing to seal


def test_the_proposer_sees_the_logs_and_the_rulebook(ledger):
    campaign = start_campaign([CASE], "cpu", "scripted", 2, "user:test")
    proposer = Scripted([BROKEN, BROKEN])
    run_rounds(campaign, CASE, proposer)
    second = proposer.seen[1]
    assert "one change per round" in second.rulebook.lower()
    assert second.perf_log and "change 1" in second.perf_log[-1] and "compilation_failure" in second.perf_log[-1]
    assert second.idea_log == ["idea 1"] and second.recent_subjects == ["change 1"]


def test_an_ended_round_is_idempotent(ledger):
    campaign = start_campaign([CASE], "cpu", "scripted", 2, "user:test")
    proposer = Scripted([BROKEN, BROKEN])
    round_id = start_round(campaign, CASE, "scripted", "agent:test")
    first = execute_round(round_id, proposer, "agent:test", QUICK)
    events = Event.objects.count()
    assert execute_round(round_id, proposer, "agent:test", QUICK) == first
    assert Event.objects.count() == events and len(proposer.seen) == 1


def test_rounds_left_open_by_a_dead_worker_are_abandoned(ledger):
    campaign = start_campaign([CASE], "cpu", "scripted", 3, "user:test")
    round_id = start_round(campaign, CASE, "scripted", "agent:test")
    assert abandon_stale_rounds(campaign, "agent:resume") == 1
    assert RoundRow.objects.get(round=round_id).status == "abandoned"
    assert execute_round(round_id, Scripted([HONEST]), "agent:test", QUICK).status == "abandoned"
    assert abandon_stale_rounds(campaign, "agent:resume") == 0


@pytest.mark.one_database
def test_convergence_seals_a_cell_and_the_next_case_borrows_its_diagnosis_not_its_code(ledger, speed_rule_lifted):
    first = start_campaign([CASE], "cpu", "scripted", 1, "user:test")
    outcomes = run_rounds(first, CASE, Scripted([HONEST]))
    assert outcomes[0].status == "committed"
    cell = MapCell.objects.get(key=f"cpu|{CASE}")
    assert cell.source == HONEST and cell.diagnosis
    neighbour = "star_1/64x64x64/f64"
    second = start_campaign([neighbour], "cpu", "scripted", 1, "user:test")
    planned = CaseCampaign.objects.get(campaign=second)
    assert planned.borrowed_from == f"cpu|{CASE}" and planned.borrowed_diagnosis == cell.diagnosis
    proposer = Scripted([BROKEN])
    run_rounds(second, neighbour, proposer)
    context = proposer.seen[0]
    assert context.borrowed_diagnosis == cell.diagnosis
    assert context.current_source != HONEST  # borrowed the diagnosis, started from its own straightforward kernel


def test_the_loop_history_rebuilds_from_the_ledger_alone(ledger, speed_rule_lifted):
    campaign = start_campaign([CASE], "cpu", "scripted", 4, "user:test")
    run_rounds(campaign, CASE, Scripted([BROKEN, Rewrite(HONEST), None, BROKEN]))
    assert Event.objects.filter(type__in=["BranchOpened", "BranchMerged"]).count() == 2
    forge_projections = [p for p in registered() if p.name.startswith("forge_")]
    before = {p.name: p.live_rows() for p in forge_projections}
    assert before["forge_perf_log"] and before["forge_idea_log"] and before["forge_operator_map"]
    for p in forge_projections:
        p.model.objects.all().delete()
    rebuild_projections()
    assert {p.name: p.live_rows() for p in forge_projections} == before
    assert verify_ledger().ok


def test_forge_submit_runs_one_round_on_an_external_candidate(ledger, tmp_path, capsys):
    source = tmp_path / "candidate.c"
    source.write_text(BROKEN)
    call_command("forge", "submit", "--case", CASE, "--source", str(source), "--hypothesis", "unrolled neighbour sum")
    assert "REVERTED (compilation_failure)" in capsys.readouterr().out
    entry = PerfEntry.objects.get()
    assert entry.change == "unrolled neighbour sum" and entry.state == "compilation_failure"
    assert IdeaEntry.objects.get().idea == "unrolled neighbour sum"


# ---------------------------------------------------------------- branches


def branch_events(campaign: str) -> list[RecordedEvent]:
    rows = Event.objects.filter(stream=f"campaign/{campaign}", type__startswith="Branch").order_by("position")
    return [RecordedEvent.from_body(row.body, row.prev_hash, row.hash) for row in rows]


@pytest.mark.one_database
def test_a_branch_without_progress_for_five_rounds_is_measured_and_dropped(ledger):
    """SLOW is correct but slower than the bound: it becomes the branch head without being
    admitted; five failed rounds later the head is gated again and dropped."""
    assert SLOW != HONEST
    campaign = start_campaign([CASE], "cpu", "scripted", 7, "user:test")
    proposer = Scripted([Rewrite(SLOW)] + [BROKEN] * 5 + [BROKEN])
    outcomes = run_rounds(campaign, CASE, proposer)
    assert outcomes[0].status == "committed" and RoundRow.objects.get(round=outcomes[0].round).speedup < 1
    assert [c.on_branch for c in proposer.seen] == [False] + [True] * 5 + [False]
    assert all(c.current_source == SLOW for c in proposer.seen[1:6])  # rounds build on the branch head
    assert proposer.seen[6].current_source != SLOW  # back on the main line
    opened, dropped = branch_events(campaign)
    assert opened.type == "BranchOpened" and dropped.type == "BranchDropped"
    data = dropped.data
    assert "not_faster_than_public_bound" in data["reason"] and data["verdict_event"]
    state = CaseCampaign.objects.get(campaign=campaign)
    assert state.branch is None and state.best is None and state.converged == "budget_spent"


@pytest.mark.one_database
def test_a_branch_head_admitted_by_the_gate_at_resolution_is_merged(ledger, monkeypatch):
    campaign = start_campaign([CASE], "cpu", "scripted", 2, "user:test")
    proposer = Scripted([Rewrite(SLOW), BROKEN])
    first = execute_round(start_round(campaign, CASE, "scripted", "agent:test"), proposer, "agent:test", QUICK)
    assert first.status == "committed" and not CaseCampaign.objects.get(campaign=campaign).best  # branch head only
    lift_speed_rule(monkeypatch)  # from here the head can pass the gate on this shared machine
    execute_round(start_round(campaign, CASE, "scripted", "agent:test"), proposer, "agent:test", QUICK)
    opened, merged = branch_events(campaign)
    assert merged.type == "BranchMerged" and merged.data["round"] is None  # a resolution measurement
    state = CaseCampaign.objects.get(campaign=campaign)
    assert state.best["source"] == SLOW and state.best["verdict"] == merged.data["verdict_event"]
    assert state.converged == "budget_spent" and MapCell.objects.get(key=f"cpu|{CASE}").source == SLOW


@pytest.mark.one_database
def test_a_branch_round_the_gate_admits_merges_at_once(ledger, speed_rule_lifted):
    campaign = start_campaign([CASE], "cpu", "scripted", 1, "user:test")
    run_rounds(campaign, CASE, Scripted([Rewrite(HONEST)]))
    opened, merged = branch_events(campaign)
    data = merged.data
    assert merged.type == "BranchMerged" and data["round"] == opened.data["round"]
    assert CaseCampaign.objects.get(campaign=campaign).best["source"] == HONEST
