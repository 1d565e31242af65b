"""The operator pages on a real forged result: one round of the Kernel Agent on the CPU backend
admits the honest kernel (gate speed rule lifted, every other check real), and the pages show
its whole provenance chain; raw samples are reached by following the links in the HTML."""
from __future__ import annotations

import json
import re
from html import unescape

import plotly.graph_objects as go

from forge.services import execute_round, start_campaign, start_round
from ledger.canonical import canonical_json
from ledger.models import Event
from ledger.records import RecordedEvent
from measurement.harness.plan import ProtocolSettings
from measurement.models import OperatorResult
from tests.forge.fixtures import BROKEN, Scripted

QUICK = ProtocolSettings(passes=2, launches=2, warmup=1, max_attempts=1)
CASE = "star_1/64x64x64/f32"
NEIGHBOUR = "star_1/64x64x64/f64"
CASE_URL = f"/cases/cpu/{CASE}/"


def run_campaign(case: str, sources: list, rounds: int) -> str:
    campaign = start_campaign([case], "cpu", "scripted", rounds, "user:test")
    proposer = Scripted(sources)
    while (round_id := start_round(campaign, case, proposer.name, "agent:test")) is not None:
        execute_round(round_id, proposer, "agent:test", QUICK)
    return campaign


def event_data(position: int) -> RecordedEvent:
    row = Event.objects.get(position=position)
    return RecordedEvent.from_body(row.body, row.prev_hash, row.hash)


def links(html: str) -> list[str]:
    return [unescape(href) for href in re.findall(r'href="([^"]+)"', html)]


def figures(html: str) -> list[dict]:
    return [json.loads(text) for text in re.findall(r'<script type="application/json" id="plot-\d+">(.*?)</script>', html, re.S)]


def raw_samples(measurement: RecordedEvent) -> list[float]:
    return [s for v in measurement.data["variants"] if v["timing"] for launches in v["timing"]["samples"] for s in launches]


def measurement_of(result: str) -> RecordedEvent:
    verdict = event_data(OperatorResult.objects.get(result=result).verdict_position)
    return RecordedEvent.from_body(*Event.objects.filter(event_id=verdict.data["measurement"]).values_list("body", "prev_hash", "hash")[0])


def test_raw_samples_are_reached_from_the_dashboard_and_the_operator_table_by_following_links(forged, client):
    measurement = measurement_of(forged)
    samples = raw_samples(measurement)
    timed = [v for v in measurement.data["variants"] if v["timing"]]
    assert len(timed) >= 4 and {"candidate", "straightforward"} <= {v["name"] for v in timed}
    assert len(samples) == len(timed) * QUICK.passes * QUICK.launches  # every launch of every pass of every variant

    def shows_samples(html: str) -> bool:
        return all(repr(s) in html for s in samples)

    # dashboard -> operator table (its cpu headline) -> case detail: two clicks
    dashboard = client.get("/").content.decode()
    table_link = next(link for link in links(dashboard) if link.startswith("/operators/?backend=cpu"))
    table = client.get(table_link).content.decode()
    case_link = next(link for link in links(table) if link == CASE_URL)
    page = client.get(case_link).content.decode()
    assert shows_samples(page) and not shows_samples(table) and not shows_samples(dashboard)
    # the verdict column of the table -> the verdict event -> the measurement event (its canonical JSON): two clicks
    verdict_link = next(link for link in links(table) if re.fullmatch(r"/events/\d+/", link))
    verdict_page = client.get(verdict_link).content.decode()
    assert "GateVerdict" in verdict_page and CASE_URL in links(verdict_page)
    measurement_link = next(link for link in links(verdict_page) if re.fullmatch(r"/events/\d+/", link)
                            and "CandidateMeasured" in client.get(link).content.decode())
    # the event page shows the canonical JSON, which writes 9.5e-05 as 0.000095 (RFC 8785): a sample under
    # 1e-4 s, a fast machine's, is there in that spelling, not in repr's
    assert all(canonical_json(s) in unescape(client.get(measurement_link).content.decode()) for s in samples)


def test_the_operator_table_filters_sorts_and_marks_revisions(forged, client):
    html = client.get("/operators/").content.decode()
    row = re.search(rf'<tr>\s*<td><a class="case-link" href="{CASE_URL}">.*?</tr>', html, re.S).group(0)
    result = OperatorResult.objects.get(result=forged)
    assert 'class="admitted"' in row and f"{result.speedup:.2f}×" in row and result.bound["name"] in row and "⟲" not in row
    assert f'href="/events/{result.verdict_position}/"' in row and f'href="/cases/cpu/{CASE}/history/"' in row
    assert CASE_URL in client.get("/operators/", {"status": "admitted", "search": "star_1/64"}).content.decode()
    for query in ({"status": "retracted"}, {"backend": "cuda"}, {"search": "box_2"}):
        assert CASE_URL not in client.get("/operators/", query).content.decode(), query
    sorted_page = client.get("/operators/", {"sort": "-speedup"}).content.decode()
    assert 'href="?sort=speedup"' in sorted_page and "▼" in sorted_page  # a second click sorts the other way
    bad = client.get("/operators/", {"status": "excellent"})
    assert bad.status_code == 400 and "unknown status &#x27;excellent&#x27;" in bad.content.decode()
    from ledger.review import retract

    retract(forged, "numbers from a noisy machine", "user:maintainer")
    row = re.search(rf'<tr>\s*<td><a class="case-link" href="{CASE_URL}">.*?</tr>', client.get("/operators/").content.decode(), re.S).group(0)
    assert 'class="retracted"' in row and "⟲" in row


def test_the_case_page_shows_the_chain_from_verdict_to_events(forged, client):
    result = OperatorResult.objects.get(result=forged)
    verdict = event_data(result.verdict_position)
    measurement = measurement_of(forged)
    html = client.get(CASE_URL).content.decode()
    # 1. verdict
    assert f'href="/events/{verdict.position}/"' in html and verdict.hash in html and f"{verdict.data['speedup']:.3f}×" in html
    # 2. measurements: the samples plot and the backend description
    plotted = [f for f in figures(html) if f["data"] and f["data"][0]["type"] == "box"]
    assert plotted and sorted(s for trace in plotted[0]["data"] for s in trace["y"]) == sorted(raw_samples(measurement))
    assert measurement.data["description"]["cpu_model"] in html and measurement.data["harness_version"] in html
    # 3. round and hypothesis
    assert "idea 1" in html and "change 1" in html and "scripted" in html
    # 4. source, highlighted server-side, and the diff against its parent (the straightforward kernel)
    assert 'class="highlight"' in html and "linenos" in html and "<script src=\"/assets/plotly.min.js\">" in html
    assert "parent " in html and "admitted " in html and 'class="gd"' in html and 'class="gi"' in html  # deleted / inserted lines
    # 5. events with positions and hashes, and the chain check
    assert measurement.hash in html and f"#{measurement.position}" in html and ">verifies<" in html
    assert f"admitted at {verdict.data['speedup']:.3f}×" in html  # the history line
    assert client.get("/cases/cpu/star_1/8x8x8/f32/").status_code == 404


def test_every_figure_on_the_operator_pages_is_a_valid_plotly_figure(forged, client):
    page = client.get("/operators/figures/").content.decode()
    found = figures(page)
    assert len(found) == 3
    for figure in found + figures(client.get(CASE_URL).content.decode()) + figures(client.get("/").content.decode()):
        go.Figure(figure)  # raises on any property plotly does not know
    bars = found[0]
    measurement = measurement_of(forged)
    timed = {v["name"]: v["timing"]["median"] for v in measurement.data["variants"] if v["timing"]}
    # one bar per public baseline timed in the measurement (the CPU backend's: straightforward, scipy, pystencils, ...)
    assert {trace["name"] for trace in bars["data"]} == set(timed) - {"candidate"} >= {"straightforward", "pystencils"}
    assert next(t for t in bars["data"] if t["name"] == "pystencils")["y"] == [timed["pystencils"] / timed["candidate"]]


def test_the_forging_history_shows_rounds_logs_rules_branches_and_the_map(forged, client):
    html = client.get(f"/cases/cpu/{CASE}/history/").content.decode()
    assert "change 1" in html and "idea 1" in html and "committed" in html
    assert "Cell <code>cpu|star_1/64x64x64/f32</code>" in html and "Diagnosis:" in html
    best_lines = [trace["y"] for trace in figures(html)[0]["data"] if trace["mode"] == "lines"]
    assert [OperatorResult.objects.get(result=forged).speedup] in best_lines
    # a neighbour borrows the sealed cell's diagnosis; four failing rounds fire the outside-history rule
    run_campaign(NEIGHBOUR, [BROKEN] * 4, 4)
    html = client.get(f"/cases/cpu/{NEIGHBOUR}/history/").content.decode()
    assert "borrowed the diagnosis of cell <code>cpu|star_1/64x64x64/f32</code>" in html
    assert "outside_history" in html and html.count("compilation_failure") >= 8  # rounds table + perf log
    assert "no branch was opened" in html
    assert client.get("/cases/cpu/star_1/3x3x3/f32/history/").status_code == 404
