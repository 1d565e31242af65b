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
from measurement.matrices import matrix_cases

CAMPAIGN = Path(__file__).resolve().parents[2] / "fixtures" / "ledgers" / "h200_campaign.jsonl"


def standing_in_export() -> dict[str, tuple[str, float]]:
    """Matrix case -> (status, speedup) read from the export itself: the latest admitting GateVerdict,
    then any ResultDowngraded or ResultRetracted of it (a re-run that measured it slower, or no
    longer faster than its bound); a retracted result keeps the speedup it was admitted with.
    The edge shapes' verdicts (benchmarks/forge_edges.py) are not rows of the matrix."""
    matrix = set(matrix_cases("gpu"))
    found = {}
    for line in CAMPAIGN.read_text().splitlines():
        event = json.loads(line)
        payload = event["payload"]
        if event["type"] == "GateVerdict" and payload["verdict"] == "admitted" and not payload["revises"]:
            found[payload["case"]] = ("admitted", payload["speedup"])
        elif event["type"] == "ResultDowngraded":
            found[payload["result"].split("/", 2)[2]] = ("downgraded", payload["to_value"])
        elif event["type"] == "ResultRetracted":
            case = payload["result"].split("/", 2)[2]
            found[case] = ("retracted", found[case][1])
    return {case: standing for case, standing in found.items() if case in matrix}


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
    # The campaigns of 2026-11-30 admitted all 37 cases, a re-run downgraded 2; the issue-15 re-gate
    # against every public baseline (docs/benchmarks/h200_regate_*.json) downgraded 24 and retracted 8;
    # issue 16's `pipe` campaign admitted diamond_ts4 (both shapes, superseding two downgraded results)
    # and diamond_ts8/256^3 (retracted before) over their composed bounds (docs/benchmarks/h200_campaign_pipe.log);
    # session 25's `planes` round admitted star_4/512^3 in f32 (superseding a downgraded result) and f16
    # (retracted before), and its re-run downgraded diamond_ts8/256^3 (docs/benchmarks/h200_matrix_rerun_s25.log);
    # session 26's re-run retracted diamond_ts8/256^3 (0.998x) and downgraded diamond_ts4/256^3 and
    # varcoef_star_1/256^3 (docs/benchmarks/h200_matrix_rerun_s26.log); session 27's `pipe` with shuffles
    # admitted all four diamonds (both diamond_ts8 retracted before, diamond_ts4/256^3 downgraded before;
    # docs/benchmarks/h200_campaign_pipe2_s27.log) and its re-run reconfirmed all 32 standing results;
    # then both diamond_ts8 were retracted by a re-run against two launches of the admitted diamond_ts4
    # kernel, a composed bound since session 27 (0.739x, docs/benchmarks/h200_rerun_ts8_s27.log), and
    # diamond_ts4/256^3 admitted again with 96x32 tiles (1.698x, h200_campaign_pipe3_s27.log); session 28's
    # round admitted 7 over downgraded or admitted results (odd chunks marching down on star_1 256^3/512^3 and
    # box_1 256^3/512^3 f32; rows8 on star_1/128^3; short4 on star2d_1 and box2d_1 f16;
    # docs/benchmarks/h200_campaign_march_s28.log), 5 of them downgraded before; session 29's re-run downgraded
    # diamond_ts4/512^3 (1.592x, h200_matrix_rerun_s29.log) and its round admitted 7 with the marching change
    # the sweep had pointed at (star2d_1 and box2d_1 in f32 and f16, varcoef_star_1/256^3, star_1 128^3 and
    # 256^3; h200_campaign_s29.log), 3 of them downgraded before; session 31's round admitted the `lean`
    # variant its sweep pointed at on 16 cases (h200_campaign_lean_s31.log), 3 retracted before (star_1 f16 both
    # shapes, varcoef_star_1/512^3 f16) and 7 downgraded before, and its re-run downgraded diamond_ts4/256^3
    # (1.641x, h200_matrix_rerun_s31.log); session 32's round admitted several rows a thread on box_1 512^3 and
    # 64x1024^2 f32 and star_1/64x1024^2 f32, downgraded before (h200_campaign_rows_s32.log); session 33's round
    # admitted their launch-fixed kernels on box_1 512^3 and 64x1024^2 f32 and star_1/512^3 f32, admitted before
    # (h200_campaign_rows_s33.log), and then `planes+bulk+producer` on star_2/512^3 f64, admitted before
    # (h200_campaign_producer_s33.log); session 41's `pair` admitted both diamond_ts4, downgraded before
    # (h200_campaign_pair_s41.log); session 42's `burst` admitted star2d_1/8192^2 f64, retracted before, and six
    # more admitted before (h200_campaign_burst_s42.log).
    assert len(expected) == 37
    statuses = [status for status, _ in expected.values()]
    assert (statuses.count("admitted"), statuses.count("downgraded"), statuses.count("retracted")) == (30, 4, 3)

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
    # the 23 edge shapes of fixtures/matrices/gpu_edges.json (6 gated in session 25) are counted apart
    assert "beside them 23 edge shapes" in counts
    # a retracted result is counted apart from the standing ones, never as "admitted"
    retracted = {backend: sum(r["status"] == "retracted" for r in rows_) for backend, rows_ in (("cpu", cpu_rows), ("cuda", rows))}
    assert f"{sum(standing.values())} with a standing result (admitted or downgraded), {sum(retracted.values())} retracted" in counts

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

    # Issue 19: the history of diamond_ts8 says when each step was measured (the time of record:
    # the original ledger's, kept in `origin` when the export was re-imported), not when the seed
    # imported it. Downgraded by the re-run of 2026-11-30, retracted by the issue-15 re-gate.
    stream = [event for event in map(json.loads, CAMPAIGN.read_text().splitlines())
              if event["stream"] == f"operator/cuda/{ts8}"]
    downgrade = next(e for e in stream if e["type"] == "ResultDowngraded")
    retraction = next(e for e in stream if e["type"] == "ResultRetracted")
    reconfirmed = next(e for e in stream if e["type"] == "GateVerdict" and e["payload"]["verdict"] == "reconfirmed")
    of_record = {id(e): (e["origin"] or e)["recorded_at"] for e in (downgrade, retraction, reconfirmed)}
    days = {name: of_record[id(e)][:10] for name, e in
            (("downgrade", downgrade), ("retraction", retraction), ("reconfirmed", reconfirmed))}
    history = client.get(f"/cases/cuda/{ts8}/").content.decode().split('<section id="history">')[1].split("</section>")[0]
    assert f"downgraded to 1.851× on {days['downgrade']} by re-run" in history
    assert f"retracted on {days['retraction']} by re-run" in history
    assert "re-run #" in history and f" on {days['reconfirmed']}: reconfirmed" in history
    recorded = {(e["origin"] or e)["recorded_at"][:10] for e in stream}
    assert iso_day() not in history or iso_day() in recorded  # the import's day only where it is also a measurement's
    page = client.get(f"/events/{Event.objects.get(event_id=downgrade['event_id']).position}/").content.decode()
    measured = of_record[id(downgrade)][:19].replace("T", " ")
    origin = downgrade["origin"]
    assert f'<td id="time-of-record"><time class="of-record">{measured} UTC</time>' in page
    assert f"where it was recorded at {measured} UTC at position {origin['position']}" in page
