"""benchmarks/sweep_leaders.py: the kernels a device sweep measured ahead of the admitted ones, named so that the gate
that follows in the same warm minutes can take them. The names must be campaign candidates with the very source and
launch the sweep timed, or the gate would judge another kernel than the one measured ahead."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from forge.candidates import matrix_candidates
from forge.handwritten import render
from measurement.harness.cases import parse_case

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import sweep_leaders  # noqa: E402
from sweep_variants import pipelined_variants  # noqa: E402

SWEEP_S47 = ROOT / "docs" / "benchmarks" / "handwritten_pipelined_h200_s47.json"


def test_the_h200_sweep_of_session_47_leads_with_the_two_kernels_that_were_gated_after_it():
    sweep = json.loads(SWEEP_S47.read_text())
    found = sweep_leaders.leaders(sweep, 0.015)
    assert [(case_id, name) for case_id, name, _ in found] == [
        ("star_1/512x512x512/f16", "rows16+lean+pipelined"), ("star_1/512x512x512/f32", "rows16+alternate+lean+pipelined+mb")]
    assert all(ratio >= 1.015 for *_, ratio in found)
    assert sweep_leaders.leaders(sweep, 0.05) == []  # both led by 4-5%


def test_a_variant_the_campaign_does_not_offer_never_leads():
    sweep = json.loads(SWEEP_S47.read_text())
    box = next(row for row in sweep["cases"] if row["case"] == "box_1/512x512x512/f16")
    best = min(box["variants"], key=lambda name: box["variants"][name]["median_ms"])
    assert best.endswith("+own") and box["variants"][best]["median_ms"] < box["variants"]["admitted"]["median_ms"]
    assert sweep_leaders.leaders({"cases": [box]}, 0.0) == []  # box_1 is not offered `pipelined`


def test_a_case_without_an_admitted_kernel_in_the_sweep_has_no_leader():
    sweep = json.loads(SWEEP_S47.read_text())
    row = {**sweep["cases"][0], "variants": {k: v for k, v in sweep["cases"][0]["variants"].items() if k != "admitted"}}
    assert sweep_leaders.leaders({"cases": [row]}, 0.0) == []


@pytest.mark.parametrize("case_id", ["star_1/512x512x512/f16", "star_1/256x256x256/f32", "varcoef_star_1/512x512x512/f16",
                                     "varcoef_star_1/64x1024x1024/f32"])
def test_every_pipelined_sweep_variant_is_offered_with_the_source_the_sweep_timed(case_id):
    case = parse_case(case_id)
    offered = {label.split(":", 1)[0]: (source, launch) for label, launch, _, source in matrix_candidates(case)}
    swept = [(label, params) for label, params in pipelined_variants(case) if "pipelined" in label]
    assert len(swept) >= 12
    for label, params in swept:
        source, launch, _ = render(case, **params)
        assert offered[label] == (source, launch), label
