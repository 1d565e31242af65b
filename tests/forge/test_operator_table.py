"""benchmarks/operator_table.py: the operator table generated from a ledger export alone.

Plain pytest, no database: the facts asserted are read from the real H200 export
(docs/benchmarks/forge_h200_levers.jsonl) independently of the generator, and the revision
cases append real-shaped events (built from that export's verdict ids) to a copy of it, with
the hash chain recomputed so that the copy still verifies.
"""
from __future__ import annotations

import copy
import json
import math
import statistics
import sys
import uuid
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from ledger.canonical import chain_hash, event_body
from measurement.roofline import GEOMEAN_TARGET

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import operator_table  # noqa: E402

H200 = ROOT / "docs" / "benchmarks" / "forge_h200_levers.jsonl"
COMMITTED = ROOT / "docs" / "benchmarks" / "h200_operator_table.md"
CAMPAIGN = ROOT / "fixtures" / "ledgers" / "h200_campaign.jsonl"  # the 37-case H200 campaign and its re-run
BOX_1 = "box_1/256x256x256/f32"
BOX_2 = "box_2/256x256x256/f32"
STAR_1 = "star_1/256x256x256/f32"
STAR2D = "star2d_1/8192x8192/f32"


def read(path: Path = H200) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def admitted_verdicts(events: list[dict]) -> dict[str, list[dict]]:
    """Every admitting (not re-run) GateVerdict per case, in ledger order."""
    found: dict[str, list[dict]] = {}
    for e in events:
        if e["type"] == "GateVerdict" and e["payload"]["verdict"] == "admitted" and not e["payload"]["revises"]:
            found.setdefault(e["payload"]["case"], []).append(e)
    return found


def row(text: str, case: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(f"| {case} |"))


def rechain(events: list[dict]) -> list[dict]:
    """Positions, stream versions and hashes recomputed: an export `ledger.verify_export` accepts
    (its chain; the signed checkpoint of the real export no longer matches an edited copy: dropped)."""
    events = [e for e in events if e["type"] != "CheckpointSigned"]
    prev, versions = "0" * 64, Counter()
    for position, e in enumerate(events, start=1):
        versions[e["stream"]] += 1
        e.update(position=position, version=versions[e["stream"]], prev_hash=prev)
        e["hash"] = prev = chain_hash(prev, event_body(e))
    return events


def appended(events: list[dict], *new: tuple[str, str, dict]) -> list[dict]:
    events = copy.deepcopy(events)
    when = datetime.fromisoformat(events[-1]["recorded_at"])
    for offset, (kind, stream, payload) in enumerate(new, start=1):
        events.append({"position": 0, "event_id": str(uuid.uuid4()), "stream": stream, "version": 0, "type": kind,
                       "schema_version": 1, "payload": payload, "actor": "user:test",
                       "recorded_at": (when + timedelta(seconds=offset)).isoformat(), "origin": None})
    return rechain(events)


def write(tmp_path: Path, events: list[dict], name: str = "export.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def events() -> list[dict]:
    return read()


@pytest.fixture(scope="module")
def text() -> str:
    return operator_table.render(H200)


def test_h200_admitted_cases_and_kernels(events, text):
    admitted = admitted_verdicts(events)
    defined = [e["payload"]["case"] for e in events if e["type"] == "CaseDefined"]
    assert len(admitted) == 3 and len(defined) == 37
    assert f"**Admitted: {len(admitted)} of {len(defined)} cases**" in text
    for case, verdicts in admitted.items():
        latest = verdicts[-1]["payload"]
        line = row(text, case)
        assert line.split(" | ")[1].startswith("admitted")
        assert f"`{latest['candidate_source_hash'][:12]}`" in line
        assert f"{latest['speedup']:.2f}x [{latest['speedup_ci'][0]:.2f}–{latest['speedup_ci'][1]:.2f}]" in line
        assert f"{latest['fraction_of_copy']:.0%}" in line
    box = admitted[BOX_1][-1]["payload"]
    assert f"{box['speedup']:.2f}x" == "2.04x" and "2.04x" in row(text, BOX_1)
    assert "vector_x2" in row(text, BOX_1) and "levers" in row(text, BOX_1)
    # the cases never admitted still have their row, saying so
    assert row(text, BOX_2).split(" | ")[1] == "never admitted"
    assert sum(1 for line in text.splitlines() if line.startswith("| ") and "| never admitted |" in line) == 34


def test_h200_speedup_over_each_baseline_from_the_same_measurement(events, text):
    verdict = admitted_verdicts(events)[BOX_1][-1]["payload"]
    measured = next(e["payload"] for e in events if e["event_id"] == verdict["measurement"])
    variants = {v["name"]: v["timing"]["median"] for v in measured["variants"]}
    line = row(text, BOX_1)
    for name in ("straightforward", "cupyx.ndimage", "pystencils", "torch.conv"):
        assert f"| {variants[name] / variants['candidate']:.2f}x |" in line, name
    assert f"({measured['copy_bandwidth'] / 1e12:.2f} TB/s)" in line


def test_h200_classification_and_machine_balance(events, text):
    description = [e for e in events if e["type"] == "CandidateMeasured"][-1]["payload"]["description"]
    assert description["compute_capability"] == "9.0"
    peak = description["sm_count"] * 128 * 2 * description["clocks_max_mhz"]["sm"] * 1e6
    copies = [e["payload"]["copy_bandwidth"] for e in events if e["type"] == "CandidateMeasured"]
    balance = peak / statistics.median(copies)
    assert f"= {balance:.1f} flop/byte" in text and f"= {peak / 1e12:.1f} TFLOP/s" in text
    defined = {e["payload"]["case"]: e["payload"] for e in events if e["type"] == "CaseDefined"}
    for case in (BOX_1, STAR_1, STAR2D, BOX_2):
        intensity = defined[case]["flops"] / defined[case]["compulsory_bytes"]
        expected = "memory-bound" if intensity < balance else "compute-bound"
        assert f"| {intensity:.1f} · {expected} |" in row(text, case)
    assert "memory-bound" in row(text, BOX_1) and "compute-bound" in row(text, BOX_2)
    # the three admitted f32 cases are memory-bound: median and minimum of their fractions of copy
    fractions = [v[-1]["payload"]["fraction_of_copy"] for v in admitted_verdicts(events).values()]
    assert f"median {statistics.median(fractions):.0%} of the copy bandwidth (target ≥ 90%: **not met**)" in text
    assert f"minimum {min(fractions):.0%}" in text and "3 below 80% (target none: **not met**)" in text


def test_h200_geometric_mean_of_the_same_precision_f32_speedups(events, text):
    speedups = [v[-1]["payload"]["speedup"] for v in admitted_verdicts(events).values()
                if v[-1]["payload"]["same_precision"] and v[-1]["payload"]["case"].endswith("/f32")]
    assert len(speedups) == 3
    mean = math.exp(sum(math.log(s) for s in speedups) / len(speedups))
    assert f"geometric mean **{mean:.2f}x** over 3 of the 24 f32 cases (target ≥ {GEOMEAN_TARGET}x: **not met**" in text


def test_h200_roofline_ceiling_from_the_raw_events(events, text):
    """The bound's median over the roofline time (compulsory bytes at the admitting run's copy
    bandwidth, or CaseDefined flops at the FP32 peak, whichever is longer), recomputed here."""
    description = [e for e in events if e["type"] == "CandidateMeasured"][-1]["payload"]["description"]
    peak = description["sm_count"] * 128 * 2 * description["clocks_max_mhz"]["sm"] * 1e6
    defined = {e["payload"]["case"]: e["payload"] for e in events if e["type"] == "CaseDefined"}
    for case in (BOX_1, STAR_1, STAR2D):
        verdict = admitted_verdicts(events)[case][-1]["payload"]
        copy_bandwidth = next(e["payload"] for e in events if e["event_id"] == verdict["measurement"])["copy_bandwidth"]
        d = defined[case]
        ceiling = verdict["bound"]["median"] / max(d["compulsory_bytes"] / copy_bandwidth, d["flops"] / peak)
        assert ceiling > verdict["speedup"] > 1  # an admitted kernel cannot beat the roofline
        assert f"| {ceiling:.2f}x |" in row(text, case)
    assert "| – | – | – |" in row(text, BOX_2)  # never admitted: no bound measured for it, no ceiling


def test_h200_rounds_and_open_branch(text):
    assert "- **box_1/256x256x256/f32** (not converged): 1: z_march_4 1.58x admitted; 2: unroll_classes 1.65x admitted; " \
           "3: vector_x2 2.04x admitted" in text
    assert "3: z_march_16 1.30x head of branch-6d483712 (regresses_prior_best; branch still open)" in text
    assert "None: no round was reverted and no branch was dropped." in text
    assert "Whole-matrix re-run" not in text  # no re-run verdict in this export


def test_matrix_option_gives_the_same_rows(text):
    by_matrix = operator_table.render(H200, matrix="gpu")
    rows = lambda t: [line for line in t.splitlines() if line.startswith("| ") and "/" in line.split(" | ")[0]]  # noqa: E731
    assert rows(by_matrix) == rows(text)


def test_check_mode(tmp_path, text, capsys):
    target = tmp_path / "table.md"
    target.write_text(text, encoding="utf-8")
    assert operator_table.main([str(H200), "--check", str(target)]) == 0
    target.write_text(text.replace("2.04x", "2.40x", 1), encoding="utf-8")
    assert operator_table.main([str(H200), "--check", str(target)]) == 1
    assert "differs" in capsys.readouterr().err
    assert operator_table.main([str(H200), "--check", str(tmp_path / "missing.md")]) == 1


def test_committed_table_is_generated():
    """docs/benchmarks/h200_operator_table.md is the campaign export's table, never typed."""
    assert operator_table.main([str(CAMPAIGN), "--matrix", "gpu", "--check", str(COMMITTED)]) == 0


def test_each_case_without_a_standing_result_is_named_with_the_bound_that_revised_it():
    """Read from the campaign's revising events: every case whose result does not stand, its speedup over the bound of
    the event that revised it last; and diamond_ts1, whose bound is one launch of star_1's admitted kernel (the same
    computation), is said to be able to stand only with a kernel faster than that one."""
    text = operator_table.render(CAMPAIGN, matrix="gpu")
    cases = [line.split(" | ")[0][2:] for line in text.splitlines() if line.startswith("| ") and " | retracted (" in line]
    retracted = {}
    for e in read(CAMPAIGN):  # the last retraction of each: the one standing (a re-admission would be a later verdict)
        if e["type"] == "ResultRetracted" and e["payload"]["result"].split("/", 2)[2] in cases:
            retracted[e["payload"]["result"].split("/", 2)[2]] = e
    line = next(line for line in text.splitlines() if line.startswith("  - Without a standing result: "))
    assert len(retracted) == line.count("(retracted: ") == 3  # star2d_1 f64 stands again since session 42 (burst)
    for case, e in retracted.items():
        measured = e["payload"]["measured"]
        assert f"{case} (retracted: {measured['speedup']:.3f}x over {measured['bound']['label']}" in line
    assert ("diamond_ts1/512x512x512/f32 (retracted: 0.991x over composed(star_1 admitted x1), one launch of "
            "star_1/512x512x512/f32's admitted kernel: the same computation") in line
    assert line.count("the same computation") == 1


def test_the_cpu_regate_table_is_generated_and_counts_what_still_wins():
    """docs/benchmarks/cpu_operator_table.md is the CPU re-gate export's table (issue 15): the
    re-gate section counts, from the re-run verdicts, the results that still beat their bound."""
    regate, table = ROOT / "docs/benchmarks/cpu_regate.jsonl", ROOT / "docs/benchmarks/cpu_operator_table.md"
    assert operator_table.main([str(regate), "--backend", "cpu", "--check", str(table)]) == 0
    text = table.read_text()
    assert "## Re-gate against every public baseline" in text and "**1 of 8 still beat their bound**" in text


def test_an_edited_export_is_refused(tmp_path, events):
    edited = copy.deepcopy(events)
    verdict = next(e for e in edited if e["event_id"] == admitted_verdicts(events)[BOX_1][-1]["event_id"])
    verdict["payload"]["speedup"] = 3.0
    assert operator_table.main([str(write(tmp_path, edited))]) == 2


def test_downgrade_revising_the_latest_verdict(tmp_path, events):
    verdicts = admitted_verdicts(events)[BOX_1]
    latest, first = verdicts[-1], verdicts[0]
    lower = first["payload"]["speedup"]  # a real measured value of the case, as a re-run might find
    path = write(tmp_path, appended(events, ("ResultDowngraded", latest["stream"], {
        "result": latest["payload"]["result"], "from_value": latest["payload"]["speedup"], "to_value": lower, "unit": "x",
        "reason": "reviewer: test downgrade", "rerun": None, "revises": latest["event_id"]})))
    text = operator_table.render(path)
    line = row(text, BOX_1)
    assert line.split(" | ")[1].startswith(f"downgraded (ResultDowngraded {latest['payload']['speedup']:.2f}x → {lower:.2f}x")
    assert f"{lower:.2f}x (downgraded; admitted at {latest['payload']['speedup']:.2f}x" in line
    assert "**Admitted: 3 of 37 cases** have a standing admitted result (2 admitted, 1 downgraded)" in text
    others = [v[-1]["payload"]["speedup"] for c, v in admitted_verdicts(events).items() if c != BOX_1]
    mean = math.exp(sum(math.log(s) for s in others + [lower]) / 3)
    assert f"geometric mean **{mean:.2f}x** over 3" in text


def test_retraction_revising_the_latest_verdict(tmp_path, events):
    latest = admitted_verdicts(events)[BOX_1][-1]
    path = write(tmp_path, appended(events, ("ResultRetracted", latest["stream"], {
        "result": latest["payload"]["result"], "reason": "reviewer: test retraction", "rerun": None,
        "revises": latest["event_id"]})))
    text = operator_table.render(path)
    assert row(text, BOX_1).split(" | ")[1].startswith("retracted (ResultRetracted: reviewer: test retraction)")
    assert f"retracted; was {latest['payload']['speedup']:.2f}x" in row(text, BOX_1)
    assert "**Admitted: 2 of 37 cases**" in text and "1 retracted" in text
    others = [v[-1]["payload"]["speedup"] for c, v in admitted_verdicts(events).items() if c != BOX_1]
    assert f"geometric mean **{math.exp(sum(map(math.log, others)) / 2):.2f}x** over 2 of the 24" in text


def test_a_revision_of_a_superseded_verdict_leaves_the_current_one(tmp_path, events):
    first = admitted_verdicts(events)[BOX_1][0]
    path = write(tmp_path, appended(events, ("ResultRetracted", first["stream"], {
        "result": first["payload"]["result"], "reason": "reviewer: the first kernel", "rerun": None,
        "revises": first["event_id"]})))
    text = operator_table.render(path)
    assert row(text, BOX_1).split(" | ")[1].startswith("admitted")
    assert "**Admitted: 3 of 37 cases**" in text


def test_whole_matrix_rerun(tmp_path, events):
    admitted = admitted_verdicts(events)
    box, star2d = admitted[BOX_1][-1], admitted[STAR2D][-1]
    # star2d's rejected round-2 verdict: a real measurement that no longer clears the bound
    rejected = next(e["payload"] for e in events if e["type"] == "GateVerdict"
                    and e["payload"]["case"] == STAR2D and e["payload"]["verdict"] == "rejected")
    box_rerun = {**box["payload"], "verdict": "reconfirmed", "revises": box["event_id"]}
    star_rerun = {**rejected, "verdict": "revised", "revises": star2d["event_id"]}
    new = appended(events, ("GateVerdict", box["stream"], box_rerun), ("GateVerdict", star2d["stream"], star_rerun))
    star_rerun_id = new[-1]["event_id"]
    new = appended(new, ("ResultRetracted", star2d["stream"], {
        "result": star2d["payload"]["result"], "reason": f"gate re-run: not_faster_than_public_bound: {rejected['detail']}",
        "rerun": star_rerun_id, "revises": star2d["event_id"]}))
    text = operator_table.render(write(tmp_path, new))
    assert "## Whole-matrix re-run" in text
    assert "Re-run verdicts (GateVerdict with `revises`) of the admitted kernels: 2; 1 agree" in text
    box_line = next(line for line in text.split("## Whole-matrix re-run")[1].splitlines() if line.startswith(f"| {BOX_1} |"))
    assert "| 1.000 | yes | reconfirmed | none |" in box_line
    star_line = next(line for line in text.split("## Whole-matrix re-run")[1].splitlines() if line.startswith(f"| {STAR2D} |"))
    ratio = rejected["speedup"] / star2d["payload"]["speedup"]
    assert f"| {ratio:.3f} | no | revised | ResultRetracted: gate re-run" in star_line
    assert row(text, STAR2D).split(" | ")[1].startswith(f"retracted (re-run revised at {rejected['speedup']:.2f}x")
    assert "ResultRetracted: gate re-run: not_faster_than_public_bound" in row(text, STAR2D)
    assert "re-run reconfirmed" in row(text, BOX_1)
    assert "**Admitted: 2 of 37 cases**" in text
    # a re-run verdict never becomes the case's kernel by itself
    assert f"`{star2d['payload']['candidate_source_hash'][:12]}`" in row(text, STAR2D)


def test_compute_bound_case_reports_gflops(tmp_path, events):
    """box_1's CaseDefined given box_2's flops (both real numbers of the export): the admitted box_1
    kernel is then reported as a compute-bound case in GFLOP/s and as a fraction of the FP32 peak."""
    edited = copy.deepcopy(events)
    flops = next(e["payload"]["flops"] for e in edited if e["type"] == "CaseDefined" and e["payload"]["case"] == BOX_2)
    next(e for e in edited if e["type"] == "CaseDefined" and e["payload"]["case"] == BOX_1)["payload"]["flops"] = flops
    text = operator_table.render(write(tmp_path, rechain(edited)))
    assert "compute-bound" in row(text, BOX_1)
    median = admitted_verdicts(events)[BOX_1][-1]["payload"]["candidate_median"]
    description = [e for e in events if e["type"] == "CandidateMeasured"][-1]["payload"]["description"]
    peak = description["sm_count"] * 128 * 2 * description["clocks_max_mhz"]["sm"] * 1e6
    assert f"{flops / median / 1e9:,.0f} GFLOP/s, {flops / median / peak:.1%} of the FP32 peak" in text
    assert "f32 / f64: 2 of 25 memory-bound cases" in text


def test_cpu_export_has_no_machine_balance():
    text = operator_table.render(ROOT / "docs" / "benchmarks" / "forge_cpu_levers.jsonl")
    assert "Machine balance: unknown" in text and "15 unknown" in text
    assert "star_1/64x64x64/f32 round 3: tried `loop_tiled: loop_order`" in text  # a dropped branch's head is refuted
