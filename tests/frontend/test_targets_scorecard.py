"""The targets scorecard (frontend/targets.py): the dashboard, the operator page and /api/targets/
state each issue-16 target of each backend's matrix with its measured value and met / not met, the
same values and verdicts that the generated table of the shipped H200 export states
(docs/benchmarks/h200_operator_table.md, made from fixtures/ledgers/h200_campaign.jsonl): read from
that markdown here, not typed in."""
from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from measurement.reruns import RerunOutcome, record_matrix_rerun

ROOT = Path(__file__).resolve().parents[2]
GENERATED = ROOT / "docs" / "benchmarks" / "h200_operator_table.md"
CAMPAIGN = "fixtures/ledgers/h200_campaign.jsonl"
VERDICT = r"\*\*(met|not met)\*\*"


def stated_in_markdown() -> dict[str, dict]:
    """Each target's numbers and verdict as the generated H200 table states them."""
    text = GENERATED.read_text(encoding="utf-8")
    assert f"from the ledger export `{CAMPAIGN}`" in text, f"{GENERATED} is no longer generated from {CAMPAIGN}"

    def find(pattern: str) -> re.Match:
        match = re.search(pattern, text, re.M)
        assert match, f"{GENERATED} no longer states {pattern!r}"
        return match

    admitted = find(r"\*\*Admitted: (\d+) of (\d+) cases\*\*")
    sealed = find(r"^- Sealed: .*\(target: every case that converged with an admitted kernel is sealed: " + VERDICT)
    memory = find(r"^- f32 / f64: (\d+) of (\d+) memory-bound cases have a standing result: median (\d+)% of the copy "
                  r"bandwidth \(target ≥ 90%: " + VERDICT + r"\), minimum (\d+)% \((\S+)\); (\d+) below 80% "
                  r"\(target none: " + VERDICT + r"\).*$")
    f16 = find(r"^- f16 \(kept apart\): (\d+) of (\d+) memory-bound cases have a standing result: median (\d+)% of the "
               r"copy bandwidth \(target ≥ 85%: " + VERDICT + r"\).*$")
    geomean = find(r"^- Same precision, f32: geometric mean \*\*([\d.]+)x\*\* over (\d+) of the (\d+) f32 cases "
                   r"\(target ≥ [\d.]+x: " + VERDICT)
    temporal = find(r"^Temporal \(target: .*?\): " + VERDICT + r": (.*)\.$")
    rerun = find(r"^Whole-matrix re-run time \(target: .*?\): (not recorded|\*\*met\*\*|\*\*not met\*\*)"
                 r"(?:: the latest \(position \d+\) re-ran (\d+) of (\d+) standing results in ([\d.]+) s)?")

    def over_the_matrix(line: re.Match, verdict: str) -> str:
        return "not met" if "Over the matrix the targets are **not met**" in line.group(0) else verdict

    return {
        "admitted": {"value": int(admitted[1]), "scope": int(admitted[2]),
                     "verdict": "met" if admitted[1] == admitted[2] else "not met"},
        "sealed": {"verdict": sealed[1]},
        "memory_median": {"counted": int(memory[1]), "scope": int(memory[2]), "percent": int(memory[3]),
                          "verdict": over_the_matrix(memory, memory[4])},
        "memory_floor": {"percent": int(memory[5]), "lowest": memory[6], "failing": int(memory[7]),
                         "verdict": over_the_matrix(memory, memory[8])},
        "f16_memory_median": {"counted": int(f16[1]), "scope": int(f16[2]), "percent": int(f16[3]),
                              "verdict": over_the_matrix(f16, f16[4])},
        "geomean": {"value": geomean[1], "counted": int(geomean[2]), "scope": int(geomean[3]), "verdict": geomean[4]},
        "temporal": {"verdict": temporal[1], "measured": temporal[2]},
        "rerun_seconds": {"verdict": rerun[1].strip("*"),
                          "measured": f"{rerun[4]} s for {rerun[2]} of {rerun[3]} standing results" if rerun[4] else None},
    }


def gpu_card(client) -> dict:
    cards = client.get("/api/targets/").json()
    assert "gpu_edges" not in {card["matrix"] for card in cards}  # edge shapes are no matrix of their own
    (card,) = [card for card in cards if card["matrix"] == "gpu"]
    assert card["backend"] == "cuda"
    return card


def scorecard_rows(page: str, table_id: str) -> dict[str, str]:
    """target name -> the text of its row in the scorecard table `table_id`."""
    table = page.split(f'id="{table_id}"')[1].split("</table>")[0]
    rows = re.findall(r'<tr class="target" data-target="([^"]+)">(.*?)</tr>', table, re.S)
    return {name: re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", row))).strip() for name, row in rows}


def test_the_api_states_each_target_as_the_generated_table_does(h200_campaign, client):
    stated = stated_in_markdown()
    card = gpu_card(client)
    targets = {t["name"]: t for t in card["targets"]}
    assert list(targets) == ["admitted", "sealed", "memory_median", "memory_floor", "f16_memory_median", "geomean",
                             "temporal", "rerun_seconds"]
    assert card["cases"] == stated["admitted"]["scope"]
    for name, facts in stated.items():
        assert targets[name]["verdict"] == facts["verdict"], name
    admitted = targets["admitted"]
    assert (admitted["value"], len(admitted["scope"])) == (stated["admitted"]["value"], stated["admitted"]["scope"])
    for name in ("memory_median", "f16_memory_median"):
        t = targets[name]
        assert (round(t["value"] * 100), len(t["counted"]), len(t["scope"])) == \
            (stated[name]["percent"], stated[name]["counted"], stated[name]["scope"]), name
        assert len(t["uncounted"]) == stated[name]["scope"] - stated[name]["counted"]
    floor = targets["memory_floor"]
    assert round(floor["value"] * 100) == stated["memory_floor"]["percent"]
    assert f"({stated['memory_floor']['lowest']})" in floor["measured"]
    assert len(floor["failing"]) == stated["memory_floor"]["failing"]
    geomean = targets["geomean"]
    assert (f"{geomean['value']:.2f}", len(geomean["counted"]), len(geomean["scope"])) == \
        (stated["geomean"]["value"], stated["geomean"]["counted"], stated["geomean"]["scope"])
    assert targets["temporal"]["measured"] == stated["temporal"]["measured"]
    if stated["rerun_seconds"]["measured"]:  # the shipped export's newest whole re-run
        assert targets["rerun_seconds"]["measured"] == stated["rerun_seconds"]["measured"]
    else:
        assert targets["rerun_seconds"]["value"] is None
        assert targets["rerun_seconds"]["measured"] == "not recorded: no MatrixRerunFinished of a whole re-run"


def test_the_operator_page_and_the_dashboard_show_the_scorecard(h200_campaign, client):
    targets = {t["name"]: t for t in gpu_card(client)["targets"]}
    operators = client.get("/operators/").content.decode()
    full = scorecard_rows(operators, "targets-cuda-gpu")
    assert list(full) == list(targets)
    for name, t in targets.items():
        assert full[name].startswith(f"{t['label']} {t['target']} {t['measured']} {t['verdict']}"), name
    assert full["memory_median"].count("not met") == 1  # the verdict, not a word of the value
    assert "without a value: " + ", ".join(targets["memory_median"]["uncounted"]) in full["memory_median"]
    assert "missing it: " + ", ".join(targets["memory_floor"]["failing"]) in full["memory_floor"]
    assert full["rerun_seconds"].endswith(" " + targets["rerun_seconds"]["verdict"])
    # the filters of the table below do not narrow the scorecard
    filtered = scorecard_rows(client.get("/operators/", {"status": "retracted"}).content.decode(), "targets-cuda-gpu")
    assert filtered == full

    dashboard = client.get("/").content.decode()
    compact = scorecard_rows(dashboard, "targets-cuda-gpu")
    for name, t in targets.items():
        assert compact[name] == f"{t['label']} {t['measured']} {t['verdict']}", name
    assert 'href="/api/targets/"' in dashboard
    assert "targets-cuda-gpu_edges" not in dashboard and "targets-cuda-gpu_edges" not in operators


def test_a_whole_rerun_recorded_states_its_time_and_the_newest_decides(h200_campaign, client):
    standing = [row["case"] for row in client.get("/api/tables/operator-cases/", {"backend": "cuda", "matrix": "gpu"}).json()
                if row["status"] in ("admitted", "downgraded")]
    outcomes = [RerunOutcome(case, 1.5, 6.0, verdict="reconfirmed") for case in standing]
    record_matrix_rerun("cuda", "user:test", standing, outcomes, 212.44, whole=True)
    rerun = {t["name"]: t for t in gpu_card(client)["targets"]}["rerun_seconds"]
    assert (rerun["verdict"], rerun["value"]) == ("met", 212.44)
    assert rerun["measured"] == f"212.4 s for {len(standing)} of {len(standing)} standing results"
    assert scorecard_rows(client.get("/").content.decode(), "targets-cuda-gpu")["rerun_seconds"].endswith(" met")

    record_matrix_rerun("cuda", "user:test", standing, outcomes[:-1], 250.0, whole=True, deadline=250.0)
    record_matrix_rerun("cuda", "user:test", standing[:2], outcomes[:2], 12.0, whole=False)  # a chosen few: no unit
    rerun = {t["name"]: t for t in gpu_card(client)["targets"]}["rerun_seconds"]
    assert (rerun["verdict"], rerun["value"]) == ("not met", 250.0)
    assert rerun["measured"].endswith("; 1 left by its deadline")
