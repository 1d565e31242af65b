"""Every page of the audit UI in a real browser: it loads, its script runs without errors and
its plots are drawn (plotly is served by the app itself)."""
from pathlib import Path

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
    urls = ["/", "/operators/", "/operators/figures/", f"/cases/cpu/{CAMPAIGN_CASE}/", f"/cases/cpu/{CAMPAIGN_CASE}/history/",
            "/apps/", "/apps/heat3d-cpu/", "/ablations/", "/events/", "/events/?type=GateVerdict", "/events/2/",
            "/accounts/login/"]
    for url in urls:
        response = page.goto(url)
        assert response.status == 200, url
        plots = page.locator("div.plot")
        for index in range(plots.count()):
            plots.nth(index).locator(".main-svg").first.wait_for()  # drawn by plotly
    assert errors == []
