"""An App Agent (or triage) whose process died mid-run: the reaper closes its gate run, and the
application leaves IN_PROGRESS for the state it had before (appgate/services.py abandon_run). On
the H200 a forge call cut by its time limit left five programs IN_PROGRESS in the shipped export
(docs/benchmarks/hecbench_forged_h200_3.jsonl, and so in every later export, which continues it); the table must not
show work that nobody does. Imported, their runs have no lease here: `appgate settle` closes them."""
from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.conf import settings
from django.core.management import call_command
from django.db.models.functions import Now

from appgate.agent import _state
from appgate.models import AppRow
from appgate.services import gate_run_held, register
from ledger.models import Lease
from ledger.selectors import stream_events
from ledger.transfer import import_ledger
from ledger.verification import verify_ledger
from tests.appgate.fixtures import SHIPPED_FORGED, clocked_app



def die_mid_run(name: str, agent: bool = True) -> str:
    """What the agent does before its gate (a reviewer's re-run sets no state), then the worker goes
    silent past WORKER_LEASE_S (as a process killed on another host would): its lease stays, its
    heartbeats stop."""
    if agent:
        _state(name, "IN_PROGRESS", "the App Agent started", "agent:test")
    with gate_run_held(name) as (gate_run, _):
        Lease.objects.update(host="device-1.example", pid=4242,
                             heartbeat_at=Now() - timedelta(seconds=settings.WORKER_LEASE_S + 5))
    assert Lease.objects.filter(pid=4242).exists()  # a holder ends only its own lease (its pid)
    return gate_run


@pytest.mark.parametrize("earlier", [("RESEARCH", "in_scope", "M1: in scope, not yet forged"), None])
def test_a_dead_agent_leaves_its_application_in_the_state_it_had_before(transactional_ledger, tmp_path, earlier):
    name = register(clocked_app(tmp_path), "agent:test")[0].name
    if earlier:
        _state(name, earlier[0], earlier[2], "agent:test", earlier[1])
    gate_run = die_mid_run(name)
    assert AppRow.objects.get(name=name).state == "IN_PROGRESS"

    out = StringIO()
    call_command("reap", stdout=out)
    assert out.getvalue().rstrip().endswith("reaped 1 lease(s) of dead workers")
    closed, back = stream_events(f"app/{name}")[-2:]
    assert (closed.type, closed.data["run"]) == ("AppGateAbandoned", gate_run)
    assert back.type == "AppStateChanged" and back.actor == "system:reaper"
    row = AppRow.objects.get(name=name)
    assert (row.state, row.state_code) == ((earlier[0] if earlier else "BLOCKED"), "abandoned")
    assert row.state_reason.startswith(f"gate run {gate_run} abandoned (its worker device-1.example pid 4242 "
                                       "sent no heartbeat since")
    assert row.state_reason.endswith(f"back to its state before it: {earlier[2]}" if earlier else "no state before it")
    assert verify_ledger().ok


def test_a_dead_gate_re_run_changes_no_state(transactional_ledger, tmp_path):
    """A gate run that did not set IN_PROGRESS (a reviewer's re-run) is closed and nothing else."""
    name = register(clocked_app(tmp_path), "agent:test")[0].name
    _state(name, "INTEGRATED", "the candidate patch is the application's optimisation", "agent:test", "admitted")
    gate_run = die_mid_run(name, agent=False)
    call_command("reap", stdout=StringIO())
    events = stream_events(f"app/{name}")
    assert [event.type for event in events][-2:] == ["AppStateChanged", "AppGateAbandoned"]
    assert events[-1].data["run"] == gate_run
    row = AppRow.objects.get(name=name)
    assert (row.state, row.state_code) == ("INTEGRATED", "admitted")


def test_settle_closes_the_runs_an_imported_ledger_left_open_and_no_run_a_live_process_holds(ledger, tmp_path):
    import_ledger(SHIPPED_FORGED, "user:test")
    cut = {"hecbench-adam-cuda", "hecbench-asmooth-cuda", "hecbench-binomial-cuda", "hecbench-knn-cuda",
           "hecbench-marchingcubes-cuda"}  # cut by `timeout` in session 18, before the script reaped
    assert set(AppRow.objects.filter(state="IN_PROGRESS", state_reason="the App Agent started")
               .values_list("name", flat=True)) == cut
    live = register(clocked_app(tmp_path), "agent:test")[0].name
    with gate_run_held(live) as (gate_run, _):
        _state(live, "IN_PROGRESS", "the App Agent started", "agent:test")
        ledger_append_build(live, gate_run)  # began, under this process's live lease
        out = StringIO()
        call_command("appgate", "--actor", "user:test", "settle", stdout=out)
        assert AppRow.objects.get(name=live).state == "IN_PROGRESS"
    assert "gate runs left open by a process that died elsewhere, closed: 5" in out.getvalue()
    for name in cut:
        closed, back = stream_events(f"app/{name}")[-2:]
        assert closed.type == "AppGateAbandoned" and closed.data["worker"] is None and closed.actor == "user:test"
        row = AppRow.objects.get(name=name)
        assert row.state != "IN_PROGRESS" and row.state_code == "abandoned", (name, row.state, row.state_reason)
    assert verify_ledger().ok
    out = StringIO()  # the live run's holder let go without a verdict: now it is left open too
    call_command("appgate", "--actor", "user:test", "settle", stdout=out)
    assert f"closed: 1\n  {live}/{gate_run}\n" in out.getvalue()
    out = StringIO()
    call_command("appgate", "--actor", "user:test", "settle", stdout=out)  # idempotent: nothing left open
    assert "closed: 0" in out.getvalue()


def ledger_append_build(app: str, gate_run: str) -> None:
    from ledger.services import NewEvent, append

    append(NewEvent(stream=f"app/{app}", type="AppVariantBuilt", actor="agent:test", payload={
        "app": app, "run": gate_run, "variant": "baseline", "ok": True, "command": ["cc"], "seconds": 0.1}))
