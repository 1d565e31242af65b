"""Issue 19, points 4 and 6: the operator table explains its public bound and carries, in the page,
the API and the CSV, the device, the case's flop/byte and class and the roofline ceiling, read
from the measurement behind the verdict; sign-off cells never read as signed off before two
reviewers have; exported links are absolute and no row links to a provenance page that does not
exist; filters are strict (a 400 naming the known values, any case accepted) and the CSV link
keeps them; a freeze made before columns were added still checks."""
from __future__ import annotations

import csv
import html
import io
import re

import pytest
from django.test import Client

from frontend import publication
from frontend.tables import OPERATOR_COLUMNS, operator_rows
from ledger import review
from ledger.models import Event
from ledger.services import record_from_row
from measurement.models import CaseRow
from measurement.matrices import load_matrix
from tests.frontend.test_tables import TINY

NEW_COLUMNS = {"device", "flop_per_byte", "bound_class", "roofline_ceiling", "signoffs"}


def text(response) -> str:
    return html.unescape(response.content.decode())


def row_cells(page: str, case: str) -> str:
    """The text of the table row whose first cell names `case`."""
    row = next(r for r in page.split("<tr>") if f">{case}</a>" in r or f"<td>{case}<br>" in r)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", row))


def test_rows_carry_device_class_and_roofline_ceiling_from_the_verdicts_measurement(ledger, speed_rule_lifted, admit,
                                                                                    django_assert_max_num_queries):
    admitted = admit()
    load_matrix("cpu", "user:test")
    with django_assert_max_num_queries(7):  # two more than before: the verdicts and their measurements, by id
        rows = operator_rows()
    row = next(r for r in rows if r["case"] == TINY)
    measured = admitted.measured_event.data
    defined = CaseRow.objects.get(case=TINY)
    bound_median = admitted.verdict_event.data["bound"]["median"]
    assert row["device"] == measured["description"]["device"] and row["device"]
    assert row["flop_per_byte"] == pytest.approx(defined.flops / defined.compulsory_bytes)
    assert row["bound_class"] == "unknown"  # no FP32 peak is computed for a CPU: no balance to class it against
    assert row["roofline_ceiling"] == pytest.approx(bound_median / (defined.compulsory_bytes / measured["copy_bandwidth"]))
    assert all(r["device"] == "" and r["roofline_ceiling"] is None for r in rows if r["status"] == "none")

    client = Client()
    page = text(client.get("/operators/"))
    assert 'id="bound-explained"' in page and "the fastest public baseline that was correct and timed" in page
    assert "<strong>halide</strong>: Halide, with the fastest schedule" in page  # every family is explained
    cells = row_cells(page, TINY)
    assert row["device"] in cells and f"{row['roofline_ceiling']:.2f}×" in cells and f"{row['flop_per_byte']:.1f} · unknown" in cells
    exported = list(csv.DictReader(io.StringIO(client.get("/api/tables/operator-cases/", {"format": "csv"}).content.decode())))
    mine = next(r for r in exported if r["case"] == TINY)
    assert NEW_COLUMNS <= set(mine) and mine["device"] == row["device"] and mine["bound_class"] == "unknown"
    assert float(mine["roofline_ceiling"]) == pytest.approx(row["roofline_ceiling"])
    assert mine["provenance_url"] == f"http://testserver/cases/cpu/{TINY}/"
    assert mine["api_provenance_url"] == f"http://testserver/api/provenance/case/cpu/{TINY}/"
    assert all(r["provenance_url"] == r["api_provenance_url"] == "" for r in exported if r["status"] == "none")

    # Every link of the table leads somewhere: none to the provenance page of a case without a result.
    links = set(re.findall(r'href="(/[^"?#]*)', client.get("/operators/").content.decode()))
    assert f"/cases/cpu/{TINY}/" in links and len(links) > 15
    for link in sorted(links - {"/assets/plotly.min.js"}):
        assert client.get(link).status_code == 200, link


def test_signoff_cells_count_reviewers_and_never_read_as_signed_before_two(ledger, speed_rule_lifted, admit):
    admit()
    key, client = f"operator/cpu/{TINY}", Client()
    assert "0 of 2 on v1: not publishable yet" in row_cells(text(client.get("/operators/")), TINY)
    review.sign_off(key, "user:alice", "looked at every sample")
    review.sign_off(key, "user:alice")  # the same reviewer twice is still one
    cells = row_cells(text(client.get("/operators/")), TINY)
    assert "1 of 2 on v1: not publishable yet" in cells and "publishable " not in cells.replace("not publishable", "")
    assert operator_rows()[0]["signoffs"] == 1
    review.sign_off(key, "user:bob")
    assert "✓ publishable 2 of 2 on v1" in row_cells(text(client.get("/operators/")), TINY)


def test_filters_are_strict_any_case_and_the_csv_link_keeps_them(ledger, speed_rule_lifted, admit):
    admit()
    load_matrix("cpu", "user:test")
    client = Client()
    for query, message in (({"backend": "gpu"}, "unknown backend 'gpu'; known: cpu, cuda"),
                           ({"status": "standing"}, "unknown status 'standing'; known: admitted, downgraded, retracted, none"),
                           ({"matrix": "tpu"}, "unknown matrix 'tpu'; known: cpu, cpu_edges, gpu, gpu_edges")):
        response = client.get("/operators/", query)
        assert response.status_code == 400 and message in text(response) and "define a matrix" not in text(response)
        assert client.get("/api/tables/operator-cases/", query).json()["detail"] == message
    response = client.get("/apps/", {"architecture": "arm"})
    assert response.status_code == 400 and "unknown architecture 'arm'; known: cpu, cuda" in text(response)
    page = text(client.get("/operators/", {"backend": "CPU", "status": "Admitted", "sort": "-speedup"}))
    assert "1 rows." in page and '<option value="cpu" selected>' in page
    link = re.search(r'id="csv-link" href="([^"]+)"', page).group(1)
    assert link == "/api/tables/operator-cases/?backend=CPU&status=Admitted&sort=-speedup&format=csv"
    exported = list(csv.DictReader(io.StringIO(client.get(link).content.decode())))
    assert [r["case"] for r in exported] == [TINY]
    assert "no row matches these filters" in text(client.get("/operators/", {"status": "retracted"}))

    events = client.get("/events/", {"type": "gateverdict"})
    assert events.status_code == 200 and "#" in text(events) and "1 events" in text(events)  # GateVerdict, any case
    for query, message in (({"type": "GateVerdicts"}, "unknown type 'GateVerdicts'; known: "),
                           ({"position_min": "abc"}, "position_min must be a whole number (a ledger position), not 'abc'")):
        response = client.get("/events/", query)
        assert response.status_code == 400 and message in text(response)


def test_a_freeze_made_before_columns_were_added_still_checks(ledger, speed_rule_lifted, admit):
    admit()
    key = f"operator/cpu/{TINY}"
    review.sign_off(key, "user:alice")
    review.sign_off(key, "user:bob")
    before = [c for c in OPERATOR_COLUMNS if c not in NEW_COLUMNS]  # the table's columns before issue 19
    event = review.freeze("user:maintainer", {"operator-cases": publication.published_csv("operator-cases", before)})
    assert publication.check_freeze(event.position)["tables"]["operator-cases"]["matches"]
    review.retract(key, "the bound was built without -O3", "user:maintainer")  # a real change still shows
    assert not publication.check_freeze(event.position)["tables"]["operator-cases"]["matches"]
    assert record_from_row(Event.objects.get(position=event.position)).data["tables"]["operator-cases"]["rows"] == 1


def test_the_api_schema_documents_every_column_of_both_tables(db, client):
    from frontend.tables import APPLICATION_COLUMNS

    schemas = client.get("/api/schema/", {"format": "json"}).json()["components"]["schemas"]
    assert list(schemas["OperatorRow"]["properties"]) == OPERATOR_COLUMNS
    assert list(schemas["ApplicationRow"]["properties"]) == APPLICATION_COLUMNS
