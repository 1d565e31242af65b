"""Issue 7: a fresh clone, with no GPU, browses the real H200 campaign that fixtures/ledgers/
ships: the README's main command seeds it (seed_demo), the operator table lists its admitted
cuda results, and a case page leads down to the raw timing samples of the admitting run."""
import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command

CAMPAIGN = Path(__file__).resolve().parents[2] / "fixtures" / "ledgers" / "h200_campaign.jsonl"


def standing_in_export() -> dict[str, tuple[str, float]]:
    """Case -> (status, speedup) read from the export itself: the latest admitting GateVerdict,
    then any ResultDowngraded of it (a whole-matrix re-run that measured it slower)."""
    found = {}
    for line in CAMPAIGN.read_text().splitlines():
        event = json.loads(line)
        payload = event["payload"]
        if event["type"] == "GateVerdict" and payload["verdict"] == "admitted" and not payload["revises"]:
            found[payload["case"]] = ("admitted", payload["speedup"])
        elif event["type"] == "ResultDowngraded":
            found[payload["result"].split("/", 2)[2]] = ("downgraded", payload["to_value"])
    return found


def test_a_fresh_clone_browses_the_h200_campaign(ledger, client):
    call_command("seed_demo", stdout=io.StringIO())
    expected = standing_in_export()
    assert len(expected) == 37  # the campaigns of 2026-11-30 admitted all 37 cases; the re-run downgraded 2
    assert sum(status == "downgraded" for status, _ in expected.values()) == 2

    rows = client.get("/api/tables/operator-cases/", {"backend": "cuda", "matrix": "gpu"}).json()
    rows = rows["rows"] if isinstance(rows, dict) else rows
    assert len(rows) == 37
    shown = {row["case"]: row for row in rows}
    for case, (status, speedup) in expected.items():
        assert shown[case]["status"] == status, case
        assert shown[case]["speedup"] == pytest.approx(speedup), case

    admitted = {case: speedup for case, (status, speedup) in expected.items() if status == "admitted"}
    case, speedup = max(admitted.items(), key=lambda item: item[1])
    page = client.get(f"/cases/cuda/{case}/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "NVIDIA H200" in html and f"{speedup:.2f}" in html
    assert "samples" in html.lower()
