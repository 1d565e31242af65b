"""Issue 7: a fresh clone, with no GPU, browses the real H200 campaign that fixtures/ledgers/
ships: the README's main command seeds it (seed_demo), the operator table lists its admitted
cuda results, and a case page leads down to the raw timing samples of the admitting run."""
import io
import json
import re
from pathlib import Path

import pytest
from django.core.management import call_command
from django.utils import timezone

from ledger.models import Event

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


def generated_table() -> dict[str, dict[str, str]]:
    """The per-case rows of the committed markdown table generated from CAMPAIGN, by column name."""
    path = CAMPAIGN.parents[2] / "docs" / "benchmarks" / "h200_operator_table.md"
    lines = path.read_text().splitlines()
    assert f"from the ledger export `fixtures/ledgers/{CAMPAIGN.name}`" in "\n".join(lines[:5]), \
        f"{path} is no longer generated from {CAMPAIGN.name}: compare with the table of the export the seed imports"
    start = next(n for n, line in enumerate(lines) if line.startswith("| case | status"))
    columns = [cell.strip() for cell in lines[start].strip("|").split("|")]
    rows = {}
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
        rows[cells[0]] = dict(zip(columns, cells))
    return rows


def iso_day() -> str:
    return timezone.now().date().isoformat()


def test_a_fresh_clone_browses_the_h200_campaign(db, client, capsys):
    call_command("seed_demo")
    # Issue 19, point 5 and 9: what the seed prints is true (one case is in both matrices)
    printed = capsys.readouterr().out
    assert re.search(r"^ledger \S+ \(ForgeStencil Ledger\) initialised at position 1$", printed, re.M), printed
    assert "matrix gpu: 37 cases, 36 of them new to the case table (1 defined already)" in printed
    again = io.StringIO()
    call_command("ledger", "init", stdout=again)
    assert "already initialised at position 1" in again.getvalue()
    expected = standing_in_export()
    assert len(expected) == 37  # the campaigns of 2026-11-30 admitted all 37 cases; the re-run downgraded 2
    assert sum(status == "downgraded" for status, _ in expected.values()) == 2

    ts8 = "diamond_ts8/512x512x512/f32"
    rows = client.get("/api/tables/operator-cases/", {"backend": "cuda", "matrix": "gpu"}).json()
    rows = rows["rows"] if isinstance(rows, dict) else rows
    assert len(rows) == 37
    shown = {row["case"]: row for row in rows}
    for case, (status, speedup) in expected.items():
        assert shown[case]["status"] == status, case
        assert shown[case]["speedup"] == pytest.approx(speedup), case

    # Issue 19: the device, flop/byte, class and roofline ceiling of every row are what the generated
    # table of the same export states (docs/benchmarks/h200_operator_table.md, made from this file).
    generated = generated_table()
    for case, row in shown.items():
        assert row["device"] == "NVIDIA H200", case
        assert (f"{row['roofline_ceiling']:.2f}x", f"{row['flop_per_byte']:.1f} · {row['bound_class']}") == \
            (generated[case]["roofline ceiling"], generated[case]["flop/byte · class"]), case

    # The dashboard: figures per backend, never the CPU and CUDA results pooled; counts that add up.
    dashboard = client.get("/").content.decode()
    assert "<h1>ForgeStencil Ledger</h1>" in dashboard
    cpu_rows = client.get("/api/tables/operator-cases/", {"backend": "cpu"}).json()
    standing = {backend: sum(r["status"] in ("admitted", "downgraded") for r in rows_)
                for backend, rows_ in (("cpu", cpu_rows), ("cuda", rows))}
    for backend, n in standing.items():
        block = re.findall(rf'<tr class="backend-{backend}">(.*?)</tr>', dashboard, re.S)
        assert len(block) == 3 and all(f"n = <strong>{n}</strong>" in cell for cell in block[:2]), block
    assert f"n = <strong>{sum(standing.values())}</strong>" not in dashboard  # no pooled figure
    counts = re.sub(r"\s+", " ", dashboard.split('id="operator-counts"')[1].split("</div>")[0])
    assert f"<strong>{len(cpu_rows) + 37}</strong> rows ({len(cpu_rows)} cpu + 37 cuda)" in counts
    assert f"{len(cpu_rows) + 36} distinct cases, 1 of them in a matrix of each backend" in counts

    campaigns = client.get("/campaigns/").content.decode()
    started = [json.loads(line)["payload"]["campaign"] for line in CAMPAIGN.read_text().splitlines()
               if '"type":"CampaignStarted"' in line]
    assert started and all(f'href="/campaigns/{c}/"' in campaigns for c in started)
    one = client.get(f"/campaigns/{started[0]}/").content.decode()
    assert f'href="/cases/cuda/{ts8}/history/"' in one and client.get("/campaigns/nope/").status_code == 404

    admitted = {case: speedup for case, (status, speedup) in expected.items() if status == "admitted"}
    case, speedup = max(admitted.items(), key=lambda item: item[1])
    page = client.get(f"/cases/cuda/{case}/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "NVIDIA H200" in html and f"{speedup:.2f}" in html
    assert "samples" in html.lower()

    # Issue 19: the history line of the downgraded diamond_ts8 case says when it was measured (the
    # export's own times), not when the seed imported it.
    events = {event["type"]: event for event in map(json.loads, CAMPAIGN.read_text().splitlines())
              if event["stream"] == f"operator/cuda/{ts8}" and event["type"] in ("GateVerdict", "ResultDowngraded")}
    days = {kind: event["recorded_at"][:10] for kind, event in events.items()}
    history = client.get(f"/cases/cuda/{ts8}/").content.decode().split('<section id="history">')[1].split("</section>")[0]
    assert f"downgraded to 1.851× on {days['ResultDowngraded']} by re-run" in history
    assert "re-run #" in history and f" on {days['GateVerdict']}: reconfirmed" in history
    assert iso_day() not in history or iso_day() in days.values()  # the import's day only where it is also the measurement's
    downgrade = Event.objects.get(event_id=events["ResultDowngraded"]["event_id"])
    page = client.get(f"/events/{downgrade.position}/").content.decode()
    measured = events["ResultDowngraded"]["recorded_at"][:19].replace("T", " ")
    assert f'<td id="time-of-record"><time class="of-record">{measured} UTC</time>' in page
    assert f"where it was recorded at {measured} UTC at position {events['ResultDowngraded']['position']}" in page
