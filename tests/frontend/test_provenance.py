"""Provenance chains of real results: from the verdict down to every raw sample, the round, the
source and its parent, the events and whether they verify."""
import pytest
from django.db import connection

from forge.models import RoundRow
from frontend.provenance import UnknownResult, application_chain, operator_chain
from ledger.db_guard import install_guards, remove_guards
from ledger.models import Event
from ledger.review import sign_off
from measurement.reruns import rerun_gate
from tests.appgate.test_gate import QUICK as APP_QUICK, smooth_app
from tests.frontend.test_tables import HONEST, QUICK, TINY


def test_an_admitted_case_reaches_its_raw_samples(ledger, speed_rule_lifted, admit):
    outcome = admit()
    chain = operator_chain("cpu", TINY)
    measured = outcome.measured_event
    assert chain["verdict"]["position"] == outcome.verdict_event.position and chain["verdict"]["verdict"] == "admitted"
    assert chain["verdict"]["measurement_position"] == measured.position
    variants = {m["variant"]: m for m in chain["measurements"]}
    assert {"candidate", "straightforward"} <= set(variants)
    stored = {v["name"]: v["timing"]["samples"] for v in measured.data["variants"] if v["timing"]}
    for name, passes in stored.items():
        assert variants[name]["passes"] == passes and variants[name]["samples"] == [s for p in passes for s in p]
        assert len(variants[name]["samples"]) == QUICK.passes * QUICK.launches and all(s > 0 for s in variants[name]["samples"])
    assert variants["candidate"]["backend_description"]["backend"] == "cpu"
    assert variants["candidate"]["event_position"] == measured.position
    assert chain["source"] == HONEST and chain["round"] is None and chain["parent_source"] is None and chain["diff"] == ""  # no round
    assert [e["position"] for e in chain["events"]] == [measured.position, outcome.verdict_event.position]
    assert chain["chain_verifies"] and chain["history"][0]["verdict"] == "admitted"
    assert chain["signoff"] == {"version": 1, "reviewers": [], "publishable": False}


def test_a_forged_round_shows_its_hypothesis_parent_and_diff(forged):
    # the session's one real forged round (conftest.py `forged`: a scripted one-round campaign on TINY)
    [committed] = RoundRow.objects.filter(case=TINY, status="committed")
    chain = operator_chain("cpu", TINY)
    assert chain["round"]["round_id"] == committed.round and chain["round"]["campaign"] == committed.campaign
    assert chain["round"]["hypothesis"] == "idea 1"
    assert chain["round"]["proposer"] == "scripted" and chain["round"]["number"] == 1
    assert chain["parent_source"] and chain["parent_source"] != HONEST  # the straightforward kernel
    assert chain["diff"].startswith("--- parent ") and "+++ admitted " in chain["diff"]
    types = {e["type"] for e in chain["events"]}
    assert {"RoundStarted", "CandidateProposed", "RoundCommitted", "CandidateMeasured", "GateVerdict"} <= types


def test_rerun_and_sign_off_appear_in_the_chain(ledger, speed_rule_lifted, admit):
    admit()
    sign_off(f"operator/cpu/{TINY}", "user:alice")
    rerun, revision = rerun_gate(TINY, "cpu", "user:bob", QUICK)
    chain = operator_chain("cpu", TINY)
    assert [m["kind"] for m in chain["measurements"]].count("re-run") >= 2
    assert chain["history"][-1]["rerun"] == rerun.verdict_event.position
    # a re-run that holds keeps the sign-off; one that revises the result (a loaded CPU may
    # measure it slower) moves the version on, and the sign-off no longer counts
    assert chain["signoff"]["reviewers"] == ([] if revision else ["user:alice"])
    assert "AuditSignedOff" in {e["type"] for e in chain["events"]}


def test_an_edited_event_breaks_the_chain(ledger, speed_rule_lifted, admit):
    outcome = admit()
    position = outcome.verdict_event.position
    remove_guards(connection)
    try:
        with connection.cursor() as cursor:
            cursor.execute("UPDATE ledger_event SET body = REPLACE(body, '\"verdict\":\"admitted\"', '\"verdict\":\"admittee\"') "
                           "WHERE position = %s", [position])
    finally:
        install_guards(connection)
    chain = operator_chain("cpu", TINY)
    assert not chain["chain_verifies"]
    assert chain["verification"]["problem"].startswith(f"#{position}: stored hash does not match")


def test_unknown_results(ledger):
    with pytest.raises(UnknownResult, match="no kernel was ever admitted"):
        operator_chain("cpu", TINY)
    with pytest.raises(UnknownResult, match="no application named 'nope'"):
        application_chain("nope")


def test_an_application_chain_has_both_variants_samples_and_builds(ledger, tmp_path):
    from appgate.services import run_gate

    outcome = run_gate(smooth_app(tmp_path), "user:test", APP_QUICK)
    chain = application_chain("smooth")
    assert chain["verdict"]["position"] == outcome.verdict_event.position and chain["state"] == "REGISTERED"
    assert {d["dataset"] for d in chain["datasets"]} == {"small", "large"}
    for dataset in chain["datasets"]:
        assert len(dataset["samples"]["baseline"]) == len(dataset["samples"]["candidate"]) == APP_QUICK.passes
    assert {b["variant"] for b in chain["builds"]} == {"baseline", "candidate"} and all(b["ok"] for b in chain["builds"])
    assert chain["geomean"] == outcome.headline and chain["real"] == (outcome.verdict == "admitted")
    assert chain["amdahl"]["ceiling"] == outcome.verdict_event.data["amdahl_ceiling"]
    assert chain["chain_verifies"] and chain["manifest"]["position"] == Event.objects.filter(type="AppRegistered").get().position
    assert chain["history"][0]["verdict"] == outcome.verdict
