"""docs/benchmarks/baselines_h200.{json,md}: the public baselines of the 37 H200 cases, read from
the re-gate's events in the shipped export (benchmarks/baselines_from_export.py), and the table
both that and a baselines_matrix.py device run render (benchmarks/baselines_table.py).

Plain pytest, no database, no GPU: the committed files must be exactly what the export gives, and
the facts asserted about them are read from the export here, independently of the generator.
"""
from __future__ import annotations

import json
import sys
from argparse import Namespace
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import baselines_from_export  # noqa: E402
import baselines_matrix  # noqa: E402
from baselines_table import table  # noqa: E402

CAMPAIGN = ROOT / "fixtures" / "ledgers" / "h200_campaign.jsonl"
JSON = ROOT / "docs" / "benchmarks" / "baselines_h200.json"
TABLE = ROOT / "docs" / "benchmarks" / "baselines_h200.md"
RERUN = "gate re-run of the admitted kernel"


def rows(text: str) -> dict[str, dict[str, str]]:
    """The per-case table as {case: {column: cell}}."""
    lines = [line for line in text.splitlines() if line.startswith("| ")]
    header = next(line for line in lines if line.startswith("| case |"))
    names = [cell.strip() for cell in header.strip("|").split("|")]
    table_rows = {}
    for line in lines:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if len(cells) == len(names) and "/" in cells[0]:
            table_rows[cells[0]] = dict(zip(names, cells))
    return table_rows


@pytest.fixture(scope="module")
def latest() -> dict[str, dict]:
    """Per case, the latest re-run CandidateMeasured that timed every baseline, by time of record (an
    imported event's origin)."""
    found: dict[str, dict] = {}
    for line in CAMPAIGN.read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        if event["type"] != "CandidateMeasured" or event["payload"].get("hypothesis") != RERUN:
            continue
        if (event["payload"].get("description") or {}).get("left_out"):
            continue  # a re-run that timed the contenders alone (measurement/contenders.py): not every baseline
        when = (event["origin"] or {}).get("recorded_at") or event["recorded_at"]
        if event["payload"]["case"] not in found or when >= found[event["payload"]["case"]]["when"]:
            found[event["payload"]["case"]] = {"when": when, "event": event}
    return found


def test_the_committed_files_are_what_the_shipped_export_gives(capsys):
    assert baselines_from_export.main([str(CAMPAIGN), "--out", str(JSON), "--table", str(TABLE), "--check"]) == 0
    assert "differs" not in capsys.readouterr().err


def test_every_case_has_a_halide_cell_and_every_diamond_a_composed_cell_from_its_latest_regate(latest):
    data, table_rows = json.loads(JSON.read_text()), rows(TABLE.read_text())
    matrix = baselines_matrix.matrix_cases()
    assert len(matrix) == 37 and set(table_rows) == set(matrix) == set(data["cases"]) == set(latest)
    for case in matrix:
        event = latest[case]["event"]
        # the issue-15 re-gate or a later re-run (session 25's), never the 2026-11-30 re-runs before Halide
        assert latest[case]["when"][:10] >= "2026-12-01", case
        assert data["cases"][case]["event"]["position"] == event["position"]
        timed = {v["name"]: v["timing"] for v in event["payload"]["variants"]}
        halide = timed["halide"]
        assert table_rows[case]["halide"] == f"{halide['median'] * 1e3:.3f} ms · {halide['fraction_of_copy']:.0%}", case
        assert table_rows[case]["bound"].startswith(event["payload"]["bound"]["label"] + " (")
        assert "candidate" not in {v["name"] for v in data["cases"][case]["variants"]}
        if case.startswith("diamond_ts"):
            steps = int(case.split("/")[0].removeprefix("diamond_ts"))
            composed = timed[f"composed(star_1 admitted x{steps})"]
            assert table_rows[case]["composed(star_1 admitted xT)"] == (
                f"{composed['median'] * 1e3:.3f} ms · {composed['fraction_of_copy']:.0%}"), case
            assert table_rows[case]["composed(straightforward xT)"].endswith("%")
        else:
            assert table_rows[case]["composed(star_1 admitted xT)"] == "–"
        if case.endswith("/f16"):
            assert table_rows[case]["straightforward_f16_scalar"].endswith("%"), case
    assert "halide 21.0.0 [gpu_32x8_zmarch8] (f32)" in table_rows["star_1/512x512x512/f32"]["bound"]
    assert "Coverage: 37 of the 37 cases" in TABLE.read_text()
    assert "not by a `baselines_matrix.py` device run" in TABLE.read_text()


@pytest.mark.parametrize("edit, problem", [
    (lambda lines: lines[:200], "does not end with a signed checkpoint"),
    (lambda lines: lines[:99] + [lines[99].replace('"actor":"', '"actor":"x', 1)] + lines[100:200], "event edited"),
])
def test_an_export_that_does_not_verify_is_refused_and_nothing_written(tmp_path, capsys, edit, problem):
    export = tmp_path / "export.jsonl"
    with CAMPAIGN.open(encoding="utf-8") as handle:
        export.write_text("".join(edit([next(handle) for _ in range(200)])), encoding="utf-8")
    out, md = tmp_path / "b.json", tmp_path / "b.md"
    assert baselines_from_export.main([str(export), "--out", str(out), "--table", str(md)]) == 2
    error = capsys.readouterr().err
    assert "refused, the export does not verify against fixtures/keys/trusted_keys.txt" in error and problem in error
    assert not out.exists() and not md.exists()


def test_a_device_runs_json_renders_its_calls_and_a_column_per_baseline_present():
    def variant(name: str, median: float | None, precision: str = "f32", usable: bool = True, reason=None) -> dict:
        return {"name": name, "precision": precision, "median_s": median, "fraction_of_copy": 0.5, "usable": usable,
                "reason": reason, "spread": 0.01}

    case = {"copy_bandwidth": 4.2e12, "noisy": False, "environment": None,
            "bound": {"name": "pystencils", "precision": "f32", "fraction_of_copy": 0.5},
            "variants": [variant("torch.conv", 3e-3), variant("pystencils", 1e-3), variant("tvm", 2e-3),
                         variant("straightforward", None, usable=False, reason="wrong_result")]}
    data = {"matrix_order": ["star_1/8x8x8/f32", "box_1/8x8x8/f32"], "cases": {"star_1/8x8x8/f32": case},
            "parts": [{"started": "2026-11-29T13:46:00", "finished": "2026-11-29T13:50:55", "harness_version": "f0cc4f2bcb26aa",
                       "cases": ["star_1/8x8x8/f32"], "wall_seconds": 300.7, "command": "benchmarks/baselines_matrix.py"}],
            "repeatability": {"case": "star_1/8x8x8/f32", "medians_s": [1e-3, 1e-3], "difference": 0.0, "target": 0.01}}
    text = table(data)
    assert "**Coverage: 1 of the 2 cases**, measured in these calls:" in text
    assert "| 2026-11-29 13:46 | 13:50 | `f0cc4f2bcb26` | 1 | 301 s | `benchmarks/baselines_matrix.py` |" in text
    assert "| case | copy BW | straightforward | pystencils | torch.conv | tvm | bound |" in text
    assert rows(text)["star_1/8x8x8/f32"]["straightforward"] == "✗ wrong_result"
    assert rows(text)["star_1/8x8x8/f32"]["bound"] == "pystencils (f32)"
    assert rows(text)["box_1/8x8x8/f32"]["copy BW"] == "not measured"
    assert "difference 0.00% (target ≤ 1%)" in text


def test_a_device_run_does_not_resume_from_a_json_read_from_an_export(tmp_path):
    options = Namespace(out=str(tmp_path / "b.json"), resume=str(JSON), cases=None, deadline=None, repeat_case="")
    with pytest.raises(SystemExit, match="read from a ledger export .* resume from the JSON of this script's previous call"):
        baselines_matrix.run(options)
    assert not (tmp_path / "b.json").exists()
