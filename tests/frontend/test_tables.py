"""The operator and application tables: every matrix case listed, statuses, filters, sort,
publishability from sign-offs, figures, and a bounded number of queries for 100+ rows."""
import math
from pathlib import Path

import pytest

from frontend.tables import (OPERATOR_COLUMNS, APPLICATION_COLUMNS, TableQueryError, application_rows, figures,
                             headline_figures, operator_rows)
from ledger.review import retract, sign_off
from ledger.services import NewEvent, append, append_many
from measurement.harness.plan import ProtocolSettings
from measurement.matrices import load_matrix
from tests.conftest import downgrade

HONEST = (Path(__file__).parents[1] / "measurement" / "cheats" / "honest.c").read_text()
QUICK = ProtocolSettings(passes=2, launches=2, warmup=1, max_attempts=1)
TINY = "star_1/64x64x64/f32"  # smaller grids sink below the launch-overhead floor


def register_apps(count: int) -> None:
    """`count` applications with gate verdicts, recorded as events (the gate itself is tested in
    tests/appgate; here only the table's reading of the projection matters)."""
    events = []
    for n in range(count):
        name = f"app{n:03d}"
        events.append(NewEvent(stream=f"app/{name}", type="AppRegistered", actor="user:test", payload={
            "app": name, "architecture": "cpu", "manifest": {"domain": f"domain {n % 7}"}, "manifest_text": "",
            "manifest_hash": f"{n:064x}", "manifest_path": f"apps/{name}.yaml", "source_dir": "apps"}))
        events.append(NewEvent(stream=f"app/{name}", type="AppMilestoneReached", actor="user:test", payload={
            "app": name, "milestone": "M1", "detail": "hotspot found"}))
        events.append(NewEvent(stream=f"app/{name}", type="AppGateVerdict", actor="user:test", payload={
            "result": f"app/cpu/{name}", "app": name, "run": f"run-{n}", "verdict": "admitted", "reasons": [],
            "headline": 1.0 + n / 10, "headline_ci": [0.9 + n / 10, 1.1 + n / 10], "datasets": {"a": 1.0 + n / 10},
            "real": n % 2 == 0, "architecture": "cpu", "amdahl_ceiling": 3.0}))
    append_many(events)


def test_every_matrix_case_is_listed_and_the_admitted_one_carries_its_verdict(ledger, speed_rule_lifted, admit):
    outcome = admit()
    load_matrix("cpu", "user:test")
    rows = operator_rows()
    assert len(rows) == 15 and all(list(row) == OPERATOR_COLUMNS for row in rows)
    row = next(r for r in rows if r["case"] == TINY)
    data = outcome.verdict_event.data
    assert row["status"] == "admitted" and row["backend"] == "cpu" and not row["revised"] and row["version"] == 1
    assert row["speedup"] == data["speedup"] and [row["speedup_ci_low"], row["speedup_ci_high"]] == data["speedup_ci"]
    assert row["bound_name"] == data["bound"]["name"] and row["kernel_hash"] == data["candidate_source_hash"]
    assert row["verdict_position"] == outcome.verdict_event.position and row["publishable"] is False
    assert row["provenance_url"] == f"/cases/cpu/{TINY}/" and row["api_provenance_url"] == f"/api/provenance/case/cpu/{TINY}/"
    others = [r for r in rows if r["case"] != TINY]
    assert {r["status"] for r in others} == {"none"} and all(r["speedup"] is None for r in others)
    assert next(r for r in others if r["case"] == "star2d_1/1024x1024/f32")["shape"] == "1024x1024"


def test_filters_and_sort(ledger, speed_rule_lifted, admit):
    admit()
    load_matrix("cpu", "user:test")
    assert [r["case"] for r in operator_rows(status="admitted")] == [TINY]
    assert len(operator_rows(status="none")) == 14
    assert {r["case"] for r in operator_rows(search="BOX2D")} == {"box2d_1/512x512/f32"}
    assert operator_rows(backend="cuda") == [] and len(operator_rows(matrix="cpu")) == 15
    assert operator_rows(sort="-speedup")[0]["case"] == TINY and operator_rows(sort="speedup")[0]["case"] == TINY
    cases = [r["case"] for r in operator_rows(sort="-case")]
    assert cases == sorted(cases, reverse=True)
    for bad in ({"sort": "nope"}, {"status": "great"}, {"matrix": "tpu"}):
        with pytest.raises(TableQueryError):
            operator_rows(**bad)


def test_publishable_after_two_reviewers_and_reset_by_a_downgrade(ledger, speed_rule_lifted, admit):
    admit()
    key = f"operator/cpu/{TINY}"
    sign_off(key, "user:alice")
    sign_off(key, "user:alice")
    assert not operator_rows()[0]["publishable"]
    sign_off(key, "user:bob")
    assert operator_rows()[0]["publishable"]
    append(downgrade(key, 0.5))
    row = operator_rows()[0]
    assert (row["status"], row["revised"], row["version"], row["publishable"], row["speedup"]) == ("downgraded", True, 2, False, 0.5)
    retract(key, "noisy machine", "user:maintainer")
    assert operator_rows()[0]["status"] == "retracted"


def test_figures_are_the_median_geomean_and_a_fixed_bootstrap_ci():
    result = figures([1.0, 4.0, 2.0, None])
    assert result["n"] == 3 and result["median"] == 2.0 and math.isclose(result["geomean"], 2.0)
    assert result["ci_low"] <= result["geomean"] <= result["ci_high"] and result["ci_low"] >= 1.0 and result["ci_high"] <= 4.0
    assert figures([1.0, 4.0, 2.0]) == figures([1.0, 4.0, 2.0])
    assert figures([]) == {"n": 0, "median": None, "geomean": None, "ci_low": None, "ci_high": None}


def test_application_table_stays_fast_with_many_rows(ledger, django_assert_max_num_queries):
    register_apps(120)
    retract("app/cpu/app003", "wrong dataset", "user:maintainer")
    with django_assert_max_num_queries(5):
        rows = application_rows()
    assert len(rows) == 120 and all(list(row) == APPLICATION_COLUMNS for row in rows)
    row = rows[3]
    assert (row["app"], row["status"], row["revised"], row["version"], row["milestone"], row["datasets"]) == \
        ("app003", "retracted", True, 2, "M1", 1)
    assert row["provenance_url"] == "/apps/app003/" and row["api_provenance_url"] == "/api/provenance/app/app003/"
    assert [r["app"] for r in application_rows(sort="-headline")[:2]] == ["app119", "app118"]
    assert len(application_rows(search="domain 3")) == 17 and application_rows(state="DROPPED") == []
    with pytest.raises(TableQueryError):
        application_rows(state="FINISHED")
    figures_now = headline_figures()["applications"]
    assert figures_now["n"] == 60 and figures_now["not_real"] == 59  # app003 (odd: not real) is retracted


def test_operator_table_queries_do_not_grow_with_rows(ledger, django_assert_max_num_queries):
    load_matrix("gpu", "user:test")
    load_matrix("cpu", "user:test")
    with django_assert_max_num_queries(5):
        rows = operator_rows()
    assert len(rows) == 37 + 15 and {r["backend"] for r in rows} == {"cpu", "cuda"}
