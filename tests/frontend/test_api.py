"""The audit REST API: tables in JSON and CSV (same rows), provenance, sign-offs, retractions,
re-runs and freezes with their permissions and error bodies."""
import csv
import hashlib
import io

import pytest
from django.contrib.auth.models import Group, User
from rest_framework.test import APIClient

from frontend.tables import table_csv
from measurement.matrices import load_matrix
from tests.frontend.test_tables import TINY, register_apps

OPERATORS, APPS = "/api/tables/operator-cases/", "/api/tables/applications/"


def client_for(name: str | None, *groups: str) -> APIClient:
    client = APIClient()
    if name:
        user = User.objects.create_user(name, password="pw")
        user.groups.add(*Group.objects.filter(name__in=groups))
        client.force_authenticate(user)
    return client


def csv_rows(response) -> list[dict]:
    assert response["Content-Type"].startswith("text/csv") and "attachment" in response["Content-Disposition"]
    return list(csv.DictReader(io.StringIO(response.content.decode())))


def as_csv_cells(rows: list[dict]) -> list[dict]:
    return list(csv.DictReader(io.StringIO(table_csv(rows, list(rows[0])))))


@pytest.mark.parametrize("url", [OPERATORS, APPS])
def test_csv_rows_equal_json_rows(ledger, url):
    load_matrix("cpu", "user:test")
    register_apps(5)
    client = client_for(None)
    rows = client.get(url, {"sort": "-case" if url == OPERATORS else "-headline"}).json()
    assert len(rows) == (15 if url == OPERATORS else 5)
    exported = csv_rows(client.get(url, {"sort": "-case" if url == OPERATORS else "-headline", "format": "csv"}))
    assert exported == as_csv_cells(rows)
    assert exported[0]["status"] and all(row[link].startswith("http://testserver/") == (row["status"] != "none" or url == APPS)
                                         for row in exported for link in ("provenance_url", "api_provenance_url"))


def test_bad_queries_get_a_json_400_even_for_csv(ledger):
    response = client_for(None).get(OPERATORS, {"sort": "fastest", "format": "csv"})
    assert response.status_code == 400 and "cannot sort by 'fastest'" in response.json()["detail"]
    response = client_for(None).get(APPS, {"state": "FINISHED"})
    assert response.status_code == 400 and "unknown state" in response.json()["detail"]


def test_provenance_over_rest(ledger, speed_rule_lifted, admit):
    client = client_for(None)
    response = client.get(f"/api/provenance/case/cpu/{TINY}/")
    assert response.status_code == 404 and "no kernel was ever admitted" in response.json()["detail"]
    assert client.get("/api/provenance/kernel/x/").status_code == 404
    admit()
    row = client.get(OPERATORS).json()[0]
    chain = client.get(row["api_provenance_url"]).json()
    assert chain["result"] == row["result"] and chain["chain_verifies"]
    assert any(m["variant"] == "candidate" and m["samples"] for m in chain["measurements"])


def test_writes_need_login_and_the_permission(ledger):
    register_apps(1)
    anonymous = client_for(None)
    for url, body in (("/api/signoffs/", {"result": "app/cpu/app000"}), ("/api/reruns/", {"kind": "app", "target": "app000"}),
                      ("/api/retractions/", {"result": "app/cpu/app000", "reason": "x"}), ("/api/freezes/", {})):
        response = anonymous.post(url, body, format="json")
        assert response.status_code in (401, 403) and response.json()["detail"]
    reviewer = client_for("rita", "Reviewer")
    response = reviewer.post("/api/retractions/", {"result": "app/cpu/app000", "reason": "wrong"}, format="json")
    assert response.status_code == 403
    assert reviewer.post("/api/freezes/", format="json").status_code == 403
    nobody = client_for("nora")
    assert nobody.post("/api/signoffs/", {"result": "app/cpu/app000"}, format="json").status_code == 403


def test_retraction_needs_a_reason_and_a_known_result(ledger):
    register_apps(1)
    maintainer = client_for("mia", "Maintainer")
    response = maintainer.post("/api/retractions/", {"result": "app/cpu/app000"}, format="json")
    assert response.status_code == 400 and response.json() == {"reason": ["This field is required."]}
    response = maintainer.post("/api/retractions/", {"result": "app/cpu/app000", "reason": "  "}, format="json")
    assert response.status_code == 400
    response = maintainer.post("/api/retractions/", {"result": "app/cpu/nope", "reason": "x"}, format="json")
    assert response.status_code == 404 and "no result 'app/cpu/nope'" in response.json()["detail"]
    response = maintainer.post("/api/retractions/", {"result": "app/cpu/app000", "reason": "wrong input set"}, format="json")
    assert response.status_code == 201 and response.json()["reason"] == "wrong input set"
    assert client_for(None).get(APPS).json()[0]["status"] == "retracted"
    again = maintainer.post("/api/retractions/", {"result": "app/cpu/app000", "reason": "again"}, format="json")
    assert again.status_code == 400 and "already retracted" in again.json()["detail"]


def test_two_reviewers_make_a_row_publishable_and_a_freeze_checks_it(ledger):
    register_apps(2)
    alice, bob = client_for("alice", "Reviewer"), client_for("bob", "Reviewer")
    assert alice.post("/api/signoffs/", {"result": "app/cpu/app001"}, format="json").status_code == 201
    again = alice.post("/api/signoffs/", {"result": "app/cpu/app001"}, format="json")  # issue 19: not recorded twice
    assert again.status_code == 400 and "user:alice signed off version 1 of app/cpu/app001 already" in again.json()["detail"]
    assert not client_for(None).get(APPS, {"search": "app001"}).json()[0]["publishable"]
    response = bob.post("/api/signoffs/", {"result": "app/cpu/app001", "comment": "samples look fine"}, format="json")
    assert response.status_code == 201 and response.json()["state"] == {
        "version": 1, "reviewers": ["user:alice", "user:bob"], "publishable": True}
    assert client_for(None).get(APPS, {"search": "app001"}).json()[0]["publishable"]
    assert len(client_for(None).get("/api/signoffs/", {"result": "app/cpu/app001"}).json()) == 2  # one per reviewer
    maintainer = client_for("mia", "Maintainer")
    frozen = maintainer.post("/api/freezes/", format="json")
    assert frozen.status_code == 201 and frozen.json()["tables"]["applications"]["rows"] == 1
    position = frozen.json()["position"]
    check = client_for(None).get(f"/api/freezes/{position}/check/").json()
    assert all(t["matches"] for t in check["tables"].values())
    exported = client_for(None).get(f"/api/freezes/{position}/tables/applications/")
    assert hashlib.sha256(exported.content).hexdigest() == check["tables"]["applications"]["frozen"]
    assert [r["app"] for r in csv_rows(exported)] == ["app001"]
    maintainer.post("/api/retractions/", {"result": "app/cpu/app001", "reason": "changed input"}, format="json")
    check = client_for(None).get(f"/api/freezes/{position}/check/").json()
    assert not check["tables"]["applications"]["matches"] and check["tables"]["operator-cases"]["matches"]
    assert client_for(None).get("/api/freezes/1/check/").status_code == 404
    assert client_for(None).get(f"/api/freezes/{position}/tables/nope/").status_code == 404


def test_rerun_requests(ledger):
    register_apps(1)
    reviewer = client_for("rita", "Reviewer")
    response = reviewer.post("/api/reruns/", {"kind": "app", "target": "app000"}, format="json")
    assert response.status_code == 202
    body = response.json()
    assert (body["state"], body["result"], body["requested_by"]) == ("queued", "app/cpu/app000", "user:rita")
    assert client_for(None).get(f"/api/reruns/{body['id']}/").json()["id"] == body["id"]
    assert [r["id"] for r in client_for(None).get("/api/reruns/", {"result": "app/cpu/app000"}).json()] == [body["id"]]
    assert client_for(None).get("/api/reruns/no-such-id/").status_code == 404
    response = reviewer.post("/api/reruns/", {"kind": "case", "target": TINY}, format="json")
    assert response.status_code == 404 and "no kernel was ever admitted" in response.json()["detail"]
    response = reviewer.post("/api/reruns/", {"kind": "kernel", "target": TINY}, format="json")
    assert response.status_code == 400 and "kind" in response.json()


def test_the_endpoints_are_in_the_openapi_schema(db):
    schema = APIClient().get("/api/schema/", {"format": "json"}).json()
    for path in ("/api/tables/operator-cases/", "/api/tables/applications/", "/api/targets/",
                 "/api/provenance/{kind}/{id}/", "/api/reruns/", "/api/reruns/{rerun_id}/", "/api/signoffs/", "/api/retractions/", "/api/freezes/",
                 "/api/freezes/{position}/check/"):
        assert path in schema["paths"], path
    rows = schema["paths"]["/api/tables/operator-cases/"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    assert rows["type"] == "array"
    body = schema["paths"]["/api/retractions/"]["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    assert "reason" in schema["components"]["schemas"][body.rsplit("/", 1)[1]]["required"]
