"""Edge shapes (forge/edges.py, benchmarks/forge_edges.py): a kernel admitted for a matrix case is
gated unchanged on an edge shape of its type and precision on the CPU backend, recorded as a
generalisation measurement, and reported beside the matrix by benchmarks/operator_table.py."""
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from forge.edges import edge_measured, edge_up_to_date, lenders, measured_kernel, read_edges, standing_matrix_cases
from forge.events import EdgeShapeMeasured, edge_stream
from ledger.services import NewEvent, append
from ledger.checkpoints import public_key_text, signing_key
from ledger.models import Event
from ledger.selectors import stream_events
from ledger.transfer import export_ledger
from measurement.harness.cases import parse_case
from measurement.matrices import load_matrix, matrix_cases
from measurement.selectors import standing_operator_results
from measurement.services import result_key, source_hash
from tests.forge.fixtures import CASE, HONEST, QUICK

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import forge_edges  # noqa: E402
import operator_table  # noqa: E402

SLAB = "star_1/16x128x128/f32"  # cpu_edges' star_1 f32 edge; its lenders: 128^3 (no kernel here), then CASE
BOX_F64 = "box_1/256x32x32/f64"  # no box_1 f64 kernel is admitted in these tests


def export(tmp_path: Path) -> Path:
    path = tmp_path / "edges.jsonl"
    with path.open("w", encoding="utf-8") as handle:
        export_ledger(handle)
    return path


def test_every_type_and_precision_of_the_gpu_matrix_has_one_edge_no_round_targeted():
    edges = read_edges("gpu_edges")
    matrix = matrix_cases(edges.matrix)
    kinds = [(parse_case(e.case).type, parse_case(e.case).precision) for e in edges.edges]
    assert sorted(kinds) == sorted({(parse_case(c).type, parse_case(c).precision) for c in matrix})
    for edge in edges.edges:
        case = parse_case(edge.case)
        assert edge.case not in matrix and case.points <= 2**30 and edge.reason
        assert case.points * case.dtype.itemsize <= 2**31  # 2 GiB an array at most
        extents = sorted(case.shape)
        assert extents[-1] >= 8 * extents[0], f"{edge.case} is neither a thin slab, a long box nor a strip"
    # the cube first (the seed's "cube vs edge"), then the smaller cases of the type and precision
    ts8 = ["diamond_ts8/512x512x512/f32", "diamond_ts8/256x256x256/f32"]
    assert lenders("diamond_ts8/2048x256x256/f32", "gpu") == ts8
    assert lenders(SLAB, "cpu") == ["star_1/128x128x128/f32", CASE]


@pytest.mark.one_database  # a real gate on the edge shape; the SQL is ordinary appends and reads
def test_an_admitted_kernel_is_gated_on_its_edge_shape_and_a_type_without_one_is_reported(ledger, speed_rule_lifted, admit,
                                                                                           tmp_path):
    admitted = admit()  # the honest kernel gated on CASE, measured once a session (tests/conftest.py)
    before = operator_table.render(export(tmp_path), backend="cpu")
    assert "## Edge shapes (generalisation)\n\nNot measured yet: the export holds no EdgeShapeMeasured event." in before

    said: list[str] = []
    counts = forge_edges.measure_edges(read_edges("cpu_edges"), "cpu", only={SLAB, BOX_F64}, protocol=QUICK,
                                       say=said.append)
    assert counts == {"measured": 1, "no_kernel": 1, "failed": 0, "skipped": 0}, said

    [measured] = [e.data for e in stream_events(edge_stream("cpu", SLAB))]
    assert measured["borrowed_from"] == CASE and measured["borrowed_verdict"] == str(admitted.verdict_event.event_id)
    assert measured["source_hash"] == source_hash(HONEST) and measured["state"] == "correct"
    verdict = next(e for e in stream_events(result_key("cpu", SLAB)) if e.type == "GateVerdict")
    assert str(verdict.event_id) == measured["verdict_event"] and verdict.data["case"] == SLAB
    assert verdict.data["candidate_source_hash"] == source_hash(HONEST)
    assert verdict.data["speedup"] == measured["speedup"]
    evidence = next(e for e in stream_events(result_key("cpu", SLAB)) if e.type == "CandidateMeasured")
    wanted = f"generalisation, no round targeted {SLAB}: the kernel admitted for {CASE}"
    assert evidence.data["hypothesis"].startswith(wanted)
    assert any(line.startswith(f"{SLAB}: the kernel of {CASE}") for line in said), said

    no_kernel = next(line for line in said if line.startswith(BOX_F64))
    assert no_kernel.startswith(f"{BOX_F64}: NO KERNEL: no admitted box_1 f64 kernel on cpu to measure on {BOX_F64}: "
                                "none of the matrix cpu's box_1/64x64x64/f64 has a standing one"), no_kernel
    assert not edge_measured(BOX_F64, "cpu") and not Event.objects.filter(stream=result_key("cpu", BOX_F64)).exists()

    events = Event.objects.count()  # a second run measures only what is left
    again = forge_edges.measure_edges(read_edges("cpu_edges"), "cpu", only={SLAB}, protocol=QUICK, say=said.append)
    assert again["skipped"] == 1 and Event.objects.count() == events
    assert measured_kernel(SLAB, "cpu") == source_hash(HONEST)
    assert edge_up_to_date(SLAB, "cpu", "cpu", measured_kernel(SLAB, "cpu"))
    # the edge's admitted verdict stands, but a whole-matrix re-run (benchmarks/matrix_rerun.py) leaves it out
    assert {row.case for row in standing_operator_results("cpu")} == {CASE, SLAB}, verdict.data["detail"]
    assert standing_matrix_cases("cpu") == [CASE]

    text = operator_table.render(export(tmp_path), backend="cpu")
    edges = text.split("## Edge shapes (generalisation)")[1].split("\n## ")[0]
    row = next(line for line in edges.splitlines() if line.startswith(f"| {SLAB} |"))
    ci = verdict.data["speedup_ci"]
    assert f"| {CASE} ({admitted.speedup:.2f}x, admitted) | admitted (correct) |" in row
    assert f"| {verdict.data['speedup']:.2f}x [{ci[0]:.2f}–{ci[1]:.2f}] over {verdict.data['bound']['label']} |" in row
    assert f"`{source_hash(HONEST)[:12]}`" in row and "Thin slab" in row
    mean = f"edge shapes **{verdict.data['speedup']:.2f}x**"
    assert f"- f32: geometric mean over 1 pair: matrix cases **{admitted.speedup:.2f}x**, {mean}" in edges
    matrix = text.split("## Edge shapes (generalisation)")[0]
    assert f"| {SLAB} |" not in matrix and "**Admitted: 1 of 1 cases**" in matrix  # beside the matrix, not in it


@pytest.mark.one_database
def test_an_edge_measured_with_an_earlier_kernel_is_measured_again(ledger, speed_rule_lifted, admit):
    """The newest measurement of the edge gated a kernel the matrix case no longer stands on (as the
    diamond_ts4 edge did after session 27's pipe): the next run gates the standing one, then skips."""
    admitted = admit()
    earlier = "0" * 64  # a kernel the matrix case stood on before: recorded as a measurement would record it
    append(NewEvent(stream=edge_stream("cpu", SLAB), type="EdgeShapeMeasured", actor="test", payload=EdgeShapeMeasured(
        case=SLAB, backend="cpu", reason="thin slab", borrowed_from=CASE, borrowed_verdict=str(admitted.verdict_event.event_id),
        source_hash=earlier, verdict_event=str(admitted.verdict_event.event_id), verdict="admitted", state="correct",
        speedup=1.0).model_dump()))
    assert not edge_up_to_date(SLAB, "cpu", "cpu", measured_kernel(SLAB, "cpu"))
    said: list[str] = []
    counts = forge_edges.measure_edges(read_edges("cpu_edges"), "cpu", only={SLAB}, protocol=QUICK, say=said.append)
    assert counts["measured"] == 1, said
    assert f"{SLAB}: measured before with `{earlier[:12]}`, whose matrix case has another kernel now: again" in said
    assert measured_kernel(SLAB, "cpu") == source_hash(HONEST) and edge_up_to_date(SLAB, "cpu", "cpu", source_hash(HONEST))
    again = forge_edges.measure_edges(read_edges("cpu_edges"), "cpu", only={SLAB}, protocol=QUICK, say=said.append)
    assert again["skipped"] == 1


def test_geometric_means_pair_each_edge_with_its_matrix_case(tmp_path):
    """Two f32 pairs in a hand-built export: the means are over the pairs, per precision."""
    speedups = {"star_1": (2.0, 1.0), "box_1": (8.0, 4.0)}
    events = []
    for position, (kind, (cube, edge)) in enumerate(speedups.items()):
        lender, slab = f"{kind}/64x64x64/f32", f"{kind}/16x128x128/f32"
        events += [
            {"event_id": f"v{position}", "type": "GateVerdict", "payload": {
                "result": result_key("cpu", lender), "case": lender, "backend": "cpu", "verdict": "admitted",
                "speedup": cube, "revises": None, "candidate_source_hash": "ab" * 32}},
            {"event_id": f"e{position}", "type": "GateVerdict", "payload": {
                "result": result_key("cpu", slab), "case": slab, "backend": "cpu", "verdict": "rejected",
                "reasons": ["x"], "speedup": edge, "speedup_ci": [edge, edge], "bound": {"label": "scipy"},
                "revises": None, "candidate_source_hash": "ab" * 32}},
            {"event_id": f"m{position}", "type": "EdgeShapeMeasured", "payload": {
                "case": slab, "backend": "cpu", "reason": "thin", "borrowed_from": lender,
                "borrowed_verdict": f"v{position}", "source_hash": "ab" * 32, "verdict_event": f"e{position}",
                "verdict": "rejected", "state": "correct", "speedup": edge}},
        ]
    path = tmp_path / "pairs.jsonl"
    when = "2026-12-01T00:00:00+00:00"
    path.write_text("".join(json.dumps({**e, "stream": "s", "position": i + 1, "recorded_at": when}) + "\n"
                            for i, e in enumerate(events)), encoding="utf-8")
    text = operator_table.render(path, backend="cpu", verify=False)
    means = f"matrix cases **{math.sqrt(16):.2f}x**, edge shapes **{math.sqrt(4):.2f}x** over their own bounds"
    assert f"{means} (edge / matrix 0.50)" in text
    assert "| box_1/16x128x128/f32 | thin |" in text and "rejected (correct): x" in text


def test_a_later_call_continues_from_the_export_of_an_earlier_one(ledger, tmp_path):
    """The script's own advice ("give this export as --ledger to measure the rest") works: the second
    call imports an export that already defines the edge cases (session 25's second H200 call was
    refused with an IdempotencyConflict on CaseDefined: the import came before the edges' load)."""
    load_matrix("cpu", "user:test")
    first_in = export(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env["LEDGER_TRUSTED_PUBLIC_KEYS"] = public_key_text(signing_key())
    exports = [first_in]
    for call in ("first", "second"):
        out = tmp_path / f"{call}.jsonl"
        env["FORGESTENCIL_VAR_DIR"] = str(tmp_path / f"var-{call}")
        done = subprocess.run(
            [sys.executable, "benchmarks/forge_edges.py", "--backend", "cpu", "--ledger", str(exports[-1]), "--out", str(out),
             "--only", "no/such/edge"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        env["LEDGER_TRUSTED_PUBLIC_KEYS"] += "," + json.loads(out.read_text().splitlines()[-1])["payload"]["public_key"]
        exports.append(out)
    defined = [json.loads(line)["payload"]["case"] for line in exports[-1].read_text().splitlines()
               if '"type":"CaseDefined"' in line]
    assert defined.count(SLAB) == 2  # the second call's own, and the first call's imported with its origin


@pytest.mark.one_database
def test_an_edge_whose_library_could_not_be_tuned_is_not_measured(ledger, speed_rule_lifted, admit):
    """--tune names the library bound the edge is to be measured over; a tuning that fails (here:
    devito has no schedule family) leaves the edge failed, not measured over a weaker bound (as
    session 28's box_1 edge was, over the straightforward kernel, when Halide was not unpacked)."""
    admit()
    events = Event.objects.count()
    said: list[str] = []
    counts = forge_edges.measure_edges(read_edges("cpu_edges"), "cpu", tune="devito", only={SLAB}, protocol=QUICK,
                                       say=said.append)
    assert counts == {"measured": 0, "no_kernel": 0, "failed": 1, "skipped": 0}, said
    assert said[-1].startswith(f"{SLAB}: FAILED: devito not tuned, so not measured: no devito schedules for {SLAB} on cpu")
    assert Event.objects.count() == events and not edge_measured(SLAB, "cpu")
