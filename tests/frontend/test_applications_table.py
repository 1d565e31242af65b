"""Issue 18's application table on real data: the signed export of the H200 triage of HeCBench's
CUDA programs (every imported program registered, the triaged ones with their states and reason
codes), imported whole as the demo does. Expectations are read from the export and the triage's
committed report, never from the code under test."""
from __future__ import annotations

import csv
import io
import json
import re
from collections import Counter
from pathlib import Path

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils.html import escape

from frontend.plots import SPEEDUP_BINS
from frontend.tables import APP_STATES, application_rows
from ledger.transfer import import_ledger
from tests.appgate.fixtures import SHIPPED_FORGED
from tests.frontend.test_pages_case import figures

DOCS = Path(__file__).resolve().parents[2] / "docs" / "benchmarks"
TRIAGE = DOCS / "hecbench_triage_h200_4.jsonl"
REPORT = DOCS / "hecbench_triage_h200_4.json"
BUNDLED_H200 = DOCS / "appgate_h200_hardened.jsonl"


def export_records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def expected_apps() -> dict[str, dict]:
    """Per registered program, from the export: its registration's payload, and its last state
    change (REGISTERED with no code when the triage has not reached it)."""
    apps: dict[str, dict] = {}
    for record in export_records(TRIAGE):
        payload = record["payload"]
        if record["type"] == "AppRegistered":
            apps[payload["app"]] = {"registered": payload, "state": "REGISTERED", "code": "", "reason": None,
                                    "m1": None}
        elif record["type"] == "AppStateChanged":
            apps[payload["app"]].update(state=payload["state"], code=payload["code"] or "", reason=payload["reason"])
        elif record["type"] == "AppMilestoneReached" and payload["milestone"] == "M1":
            apps[payload["app"]]["m1"] = payload
    return apps


@pytest.fixture
def triaged(ledger) -> dict[str, dict]:
    import_ledger(TRIAGE, "user:test")
    return expected_apps()


def page_apps(html: str) -> list[str]:
    return re.findall(r'<tr data-app="([^"]+)">', html)


def test_every_registered_program_is_listed_once_with_its_state_and_reason(triaged, client):
    report = {row["app"]: row for row in json.loads(REPORT.read_text())["apps"]}
    rows = application_rows()
    assert sorted(row["app"] for row in rows) == sorted(triaged)  # each once, none added
    assert len(rows) >= 100 and set(report) < set(triaged)
    for row in rows:
        expected = triaged[row["app"]]
        assert (row["state"], row["reason_code"]) == (expected["state"], expected["code"]), row["app"]
        if expected["reason"] is not None:
            assert row["reason"] == expected["reason"]
        if row["app"] in report:  # the committed report of the same call says the same
            assert (row["state"], row["reason_code"], row["reason"]) == \
                (report[row["app"]]["state"], report[row["app"]]["code"], report[row["app"]]["reason"])
        declared = expected["registered"]["manifest"]
        assert (row["suite"], row["source_path"], row["upstream_version"]) == \
            (declared["source"]["root"], declared["source"]["path"], declared["provenance"]["version"])
        assert declared["provenance"]["upstream"].startswith(row["upstream_repo"] + "/tree/")
        assert row["baseline_quality"] is None and row["headline"] is None  # nothing gated, nothing invented
    assert Counter(row["state"] for row in rows if row["app"] in report) == Counter(json.loads(REPORT.read_text())["by_state"])

    html = client.get("/apps/").content.decode()
    listed = page_apps(html)
    assert sorted(listed) == sorted(triaged) and len(listed) == len(set(listed))
    states = Counter(expected["state"] for expected in triaged.values())
    for state in APP_STATES:
        assert re.search(rf'data-state="{state}" href="\?state={state}">{state} <strong>{states.get(state, 0)}</strong>', html)
    for (state, code), n in Counter((e["state"], e["code"] or "none") for e in triaged.values()).items():
        assert f'data-reason="{code}" href="?state={state}&amp;reason={code}">{code} {n}</a>' in html
    blocked = next(name for name, e in triaged.items() if e["code"] == "too_short")
    row_html = html.split(f'<tr data-app="{blocked}">')[1].split("</tr>")[0]
    assert '<td class="state">BLOCKED</td>' in row_html and '<code class="reason-code">too_short</code>' in row_html
    assert "not measured" in row_html


def test_filters_are_strict_on_the_page_and_the_api(triaged, client):
    for name, bad, known in (("state", "HAPPY", "REGISTERED"), ("reason", "too_long", "too_short"), ("suite", "rodinia", "hecbench")):
        page = client.get("/apps/", {name: bad})
        assert page.status_code == 400 and f"unknown {name} &#x27;{bad}&#x27;" in page.content.decode()
        assert known in page.content.decode().split('class="error"')[1].split("</p>")[0]
        api = client.get("/api/tables/applications/", {name: bad, "format": "csv"})
        assert api.status_code == 400 and known in api.json()["detail"]
    research = {name for name, e in triaged.items() if e["state"] == "RESEARCH"}
    assert research and {r["app"] for r in application_rows(state="research")} == research  # any case
    assert {r["app"] for r in application_rows(reason="IN_SCOPE")} == research
    untriaged = {name for name, e in triaged.items() if e["state"] == "REGISTERED"}
    assert {r["app"] for r in application_rows(reason="none")} == untriaged
    assert len(application_rows(suite="hecbench")) == len(triaged)


@pytest.mark.parametrize("query", [
    {},
    {"state": "BLOCKED"},
    {"reason": "too_short", "sort": "-app"},
    {"suite": "HeCBench", "state": "research", "sort": "-hotspot_share"},
    {"search": "attention", "architecture": "cuda"},
])
def test_the_csv_link_gives_the_pages_rows_in_its_order(triaged, client, query):
    html = client.get("/apps/", query).content.decode()
    link = re.search(r'<a id="csv-link" href="([^"]+)">', html).group(1).replace("&amp;", "&")
    response = client.get(link)
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [row["app"] for row in rows] == page_apps(html) and rows  # every filter kept, same order
    for row in rows:
        expected = triaged[row["app"]]
        assert (row["state"], row["reason_code"]) == (expected["state"], expected["code"])
        assert row["baseline_quality"] == ""  # not measured: an empty cell, never a number


def test_a_blocked_programs_page_shows_its_reason_and_where_it_comes_from(triaged, client):
    name, expected = next((n, e) for n, e in sorted(triaged.items()) if e["code"] == "build_failed")
    html = client.get(f"/apps/{name}/").content.decode()
    assert '<code id="state-code">build_failed</code>' in html
    history = html.split('id="state-history"')[1].split("</table>")[0]
    assert "<code>build_failed</code>" in history and "the baseline does not build" in history
    declared = expected["registered"]["manifest"]
    assert f'<code id="upstream-version">{declared["provenance"]["version"]}</code>' in html
    assert f'href="{declared["provenance"]["upstream"]}"' in html and declared["source"]["path"] in html
    for path, digest in declared["source"]["baseline_files"].items():
        assert f"<code>{path}</code> <code class=\"muted\">{digest}</code>" in html
    assert 'id="no-hotspots"' in html


def test_a_research_programs_page_shows_its_hotspot_kernels_with_their_shares(triaged, client):
    name, expected = next((n, e) for n, e in sorted(triaged.items()) if e["state"] == "RESEARCH")
    html = client.get(f"/apps/{name}/").content.decode()
    kernels = html.split('id="hotspot-kernels"')[1].split("</table>")[0]
    top = expected["m1"]["evidence"]["profile"]["top"]
    assert top and kernels.count("<tr>") == len(top) + 1
    for kernel in top:
        assert f"{kernel['share'] * 100:.1f}%" in kernels and f"<td>{kernel['launches']}</td>" in kernels
    row = next(r for r in application_rows() if r["app"] == name)
    assert (row["hotspot_kernel"], row["hotspot_share"]) == (top[0]["name"], top[0]["share"])


def bin_of(value: float) -> str:
    return next(label for low, high, label in SPEEDUP_BINS if low <= value < high)


def test_the_bins_plot_counts_the_tables_standing_real_headlines(triaged, client):
    import_ledger(BUNDLED_H200, "user:test")  # the bundled apps' H200 gate: admitted REAL headlines
    for query in ({}, {"suite": "bundled"}, {"suite": "hecbench"}):
        html = client.get("/apps/", query).content.decode()
        table = list(csv.DictReader(io.StringIO(client.get(
            re.search(r'<a id="csv-link" href="([^"]+)">', html).group(1).replace("&amp;", "&")).content.decode())))
        standing = [float(r["headline"]) for r in table if r["status"] in ("admitted", "downgraded") and r["real"] == "true"]
        bars = next(f for f in figures(html) if f["data"][0]["type"] == "bar")["data"][0]
        assert dict(zip(bars["x"], bars["y"])) == {label: sum(bin_of(v) == label for v in standing) for *_, label in SPEEDUP_BINS}
        assert f"<strong>{len(standing)}</strong> standing REAL headline" in html
        integrated = [r for r in table if r["state"] == "INTEGRATED" and r["status"] in ("admitted", "downgraded")]
        assert f'<strong id="integrated-n">{len(integrated)}</strong>' in html
        # no application baseline's quality is measured: no scatter, the page says why
        assert 'id="quality-none"' in html and "no app has both yet" in html
        assert all(f["data"][0]["type"] != "scatter" for f in figures(html))
    assert sum(bars["y"]) == 0 and "bundled" not in {r["suite"] for r in table}  # the last query: hecbench only


def test_the_table_reads_a_fixed_number_of_queries_whatever_it_lists(ledger, client):
    import_ledger(BUNDLED_H200, "user:test")
    with CaptureQueriesContext(connection) as few:
        assert len(page_apps(client.get("/apps/").content.decode())) == 6
    import_ledger(TRIAGE, "user:test")
    with CaptureQueriesContext(connection) as many:
        assert len(page_apps(client.get("/apps/").content.decode())) == 6 + len(expected_apps())
    assert len(many) == len(few)


def last_verdicts(path: Path) -> dict[str, dict]:
    return {record["payload"]["app"]: record["payload"] for record in export_records(path)
            if record["type"] == "AppGateVerdict"}


def test_forged_programs_gated_on_the_h200_stand_with_their_verdicts_down_to_diff_and_samples(ledger, client):
    import_ledger(SHIPPED_FORGED, "user:test")
    verdicts = last_verdicts(SHIPPED_FORGED)
    rows = {row["app"]: row for row in application_rows(suite="hecbench")}
    assert len(rows) == len(expected_apps())  # the triage's programs, none lost or added by the forge calls
    for name, verdict in verdicts.items():
        row = rows[name]
        assert (row["status"], row["headline"], row["real"]) == (verdict["verdict"], verdict["headline"], verdict["real"])
        assert row["state"] == ("INTEGRATED" if verdict["verdict"] == "admitted" else row["state"])
    integrated = sorted(name for name, row in rows.items() if row["state"] == "INTEGRATED")
    assert integrated and all(verdicts[name]["real"] for name in integrated)

    name = integrated[0]
    html = client.get(f"/apps/{name}/").content.decode()
    patch = (Path(__file__).resolve().parents[2] / "fixtures" / "forged" / "hecbench" / name.removeprefix("hecbench-")
             / "candidate.patch").read_text()
    changed = next(line[1:].strip() for line in patch.splitlines() if line.startswith("+") and not line.startswith("+++")
                   and len(line.strip()) > 12)
    diff = html.split('id="candidate-diff">')[1].split("</pre>")[0]
    assert escape(changed) in diff  # as the template escapes it
    measured = [record["payload"] for record in export_records(SHIPPED_FORGED) if record["type"] == "AppDatasetMeasured"
                and record["payload"]["app"] == name and record["payload"]["run"] == verdicts[name]["run"]]
    assert measured
    for dataset in measured:
        for samples in dataset["samples"].values():
            assert " ".join(str(s) for s in samples) in html  # every raw sample of the standing verdict

    html = client.get("/apps/", {"suite": "hecbench"}).content.decode()
    bars = next(f for f in figures(html) if f["data"][0]["type"] == "bar")["data"][0]
    standing = [rows[n]["headline"] for n in integrated]
    assert dict(zip(bars["x"], bars["y"])) == {label: sum(bin_of(v) == label for v in standing) for *_, label in SPEEDUP_BINS}


def test_the_baseline_quality_is_the_m1_profiles_speed_of_light_and_the_page_shows_it(ledger, client, tmp_path, monkeypatch):
    """The table reads M1's profile as the triage recorded it (the profile handed in, as the
    triage hands a CUDA program ncu's: appgate.profiler's `speed_of_light`)."""
    from appgate.agent import triage
    from appgate.manifest import SUITE_ROOTS_ENV
    from appgate.suites import importer
    from tests.appgate.fixtures import write_suite
    from tests.appgate.test_forged_patch import STENCIL, TIMED, profiled

    root = write_suite(tmp_path / "suite", "omp", {"stencil": ({"regex": TIMED, "args": ["8"]}, STENCIL, "8")})
    monkeypatch.setenv(SUITE_ROOTS_ENV, f"synth={root}")
    monkeypatch.setattr(importer, "DECLARED", tmp_path / "declared")
    importer.import_suite(root, "hecbench", root_name="synth", model="omp", out=tmp_path / "m", actor="user:test")
    triage(tmp_path / "m" / "synth-stencil-omp.yaml", "agent:test", profile=lambda *run: {**profiled(*run), "speed_of_light": 0.4235})
    row = next(r for r in application_rows() if r["app"] == "synth-stencil-omp")
    assert row["baseline_quality"] == 0.4235
    cells = client.get("/apps/", {"suite": "synth"}).content.decode()
    row_html = re.search(r"<tr[^>]*>(?:(?!</tr>).)*synth-stencil-omp(?:(?!</tr>).)*</tr>", cells, re.S).group(0)
    assert "<td>42.4%</td>" in row_html
