"""Issue 7: a fresh clone, with no GPU, browses the real H200 campaign that fixtures/ledgers/
ships: the README's main command seeds it (seed_demo), the operator table lists its admitted
cuda results, and a case page leads down to the raw timing samples of the admitting run."""
import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command

CAMPAIGN = Path(__file__).resolve().parents[2] / "fixtures" / "ledgers" / "h200_campaign.jsonl"


def admitted_in_export() -> dict[str, float]:
    """Case -> speedup of the latest admitting GateVerdict, read from the export itself."""
    found = {}
    for line in CAMPAIGN.read_text().splitlines():
        event = json.loads(line)
        payload = event["payload"]
        if event["type"] == "GateVerdict" and payload["verdict"] == "admitted" and not payload["revises"]:
            found[payload["case"]] = payload["speedup"]
    return found


def test_a_fresh_clone_browses_the_h200_campaign(ledger, client):
    call_command("seed_demo", stdout=io.StringIO())
    expected = admitted_in_export()
    assert len(expected) >= 30  # the campaign of 2026-11-30 admitted 35 of the 37 cases

    rows = client.get("/api/tables/operator-cases/", {"backend": "cuda", "matrix": "gpu"}).json()
    rows = rows["rows"] if isinstance(rows, dict) else rows
    assert len(rows) == 37
    admitted = {row["case"]: row for row in rows if row["status"] == "admitted"}
    assert set(admitted) == set(expected)
    for case, speedup in expected.items():
        assert admitted[case]["speedup"] == pytest.approx(speedup)

    case, speedup = max(expected.items(), key=lambda item: item[1])
    page = client.get(f"/cases/cuda/{case}/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "NVIDIA H200" in html and f"{speedup:.2f}" in html
    assert "samples" in html.lower()
