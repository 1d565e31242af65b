"""Every page of the audit UI in a real browser: it loads, its script runs without errors and
its plots are drawn (plotly is served by the app itself)."""
from pathlib import Path

import re

import pytest

from ledger.services import head
from ledger.transfer import import_ledger

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
CAMPAIGN_CASE = "star_4/64x64x64/f32"  # admitted in the committed CPU campaign, with branches and rules


def test_dashboard_loads_with_the_ledger_head(page):
    position, _ = head()
    page.goto("/")
    assert page.locator("h1").inner_text() == "test ledger"  # the ledger's name, once (it was "Ledger test ledger")
    assert f"#{position}" in page.locator(".card", has_text="Head").inner_text()


def test_every_page_loads_without_script_errors(page, live_server):
    for export in ("docs/benchmarks/forge_cpu_levers.jsonl", "docs/benchmarks/appgate_cpu.jsonl"):
        import_ledger(ROOT / export, "user:test")
    errors = []
    page.on("pageerror", lambda error: errors.append(f"{page.url}: {error}"))
    page.on("console", lambda message: message.type == "error" and errors.append(f"{page.url}: {message.text}"))
    requested = []  # base.html names an inline icon: a /favicon.ico request's 404 reached the console at times
    page.on("request", lambda request: requested.append(request.url))
    urls = ["/", "/operators/", "/operators/figures/", f"/cases/cpu/{CAMPAIGN_CASE}/", f"/cases/cpu/{CAMPAIGN_CASE}/history/",
            "/apps/", "/apps/heat3d-cpu/", "/ablations/", "/events/", "/events/?type=GateVerdict", "/events/2/",
            "/campaigns/", "/reruns/", "/accounts/login/"]
    for url in urls:
        response = page.goto(url)
        assert response.status == 200, url
        plots = page.locator("div.plot")
        for index in range(plots.count()):
            plots.nth(index).locator(".main-svg").first.wait_for()  # drawn by plotly
    assert errors == []
    assert requested and not [url for url in requested if url.endswith("/favicon.ico")]


def test_what_a_reviewer_sees_is_true_at_a_glance(page):
    """Issue 19 in a real browser, on the committed CPU campaign and bundled-app exports: dates
    are the time of record, source line numbers stay in step with their lines, a noisy badge says
    why, the dashboard keeps backends apart, and campaigns have pages."""
    import json

    export = ROOT / "docs/benchmarks/forge_cpu_levers.jsonl"
    for path in (export, ROOT / "docs/benchmarks/appgate_cpu.jsonl"):
        import_ledger(path, "user:test")
    verdict = [event for event in map(json.loads, export.read_text().splitlines())
               if event["type"] == "GateVerdict" and event["payload"]["case"] == CAMPAIGN_CASE
               and event["payload"]["verdict"] == "admitted"][-1]  # the standing one: the campaign's best
    page.goto(f"/cases/cpu/{CAMPAIGN_CASE}/")
    stamp = page.locator("#verdict tr", has=page.locator("th", has_text="event")).inner_text()
    assert f"recorded {verdict['recorded_at'][:19].replace('T', ' ')} UTC (imported here" in stamp, stamp

    # Source listing: one number per line of the source, none wrapped (from 10 on the gutter wrapped
    # under pre-wrap), so the gutter and the code are the same height, line for line.
    listing = page.locator("#source .highlighttable").first
    numbers = listing.locator("td.linenos span.normal")
    source_lines = page.locator("#source td.code pre").first.inner_text().rstrip("\n").split("\n")
    assert numbers.count() == len(source_lines) > 10
    heights = {round(numbers.nth(n).bounding_box()["height"]) for n in range(numbers.count())}
    assert len(heights) == 1, heights  # a wrapped number would be two lines tall
    gutter, code = (listing.locator(f"td.{cell} pre").bounding_box()["height"] for cell in ("linenos", "code"))
    assert abs(gutter - code) <= 1, (gutter, code)  # a wrapped code line would make the code taller

    page.goto("/apps/heat3d-cpu/")
    badges = page.locator("#datasets h3 .noise").all_inner_texts()
    assert badges and all(re.fullmatch(r"noisy: (baseline|candidate) spread \d+\.\d% > the 2\.0% band", b) for b in badges), badges

    page.goto("/")
    assert page.locator("tr.backend-cpu").count() == 3 and page.locator("tr.backend-cuda").count() == 0
    page.locator("#operator-counts").get_by_text("15 cpu").wait_for()
    page.get_by_role("link", name="Forging campaigns").click()
    page.locator("a.campaign-link").first.click()
    assert page.locator("#campaign-cases tr").count() == 16  # the CPU campaign's 15 cases
