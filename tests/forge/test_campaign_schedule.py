"""benchmarks/forge_campaign.py --handwritten: which proposer a round gets. Over the shipped
H200 campaign (fixtures/ledgers/h200_campaign.jsonl), a new campaign submits only hand-written
candidates that ledger has not seen proposed for the case, then falls back to the levers."""
import sys
from pathlib import Path

import pytest


ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import forge_campaign  # noqa: E402

# forging logic over the shipped 4,126-event export, imported once (tests/conftest.py h200_campaign); its SQL is ordinary appends and reads
pytestmark = pytest.mark.one_database

LEVERS = object()


def subject(case: str, number: int, first: int = 2, subjects: list[str] | None = None) -> str:
    name, proposer = forge_campaign.scheduled(case, number, LEVERS, True, first, subjects)
    return "levers" if proposer is LEVERS else (name, proposer.subject.split(":")[0])


def test_untried_hand_written_candidates_come_first_then_the_levers(h200_campaign):
    # star_1/64x1024^2 f32: rows16 gated on the H200; rows8 and short4 were not
    assert subject("star_1/64x1024x1024/f32", 1, first=1) == ("external", "rows8")
    # star_1/512^3 f16: rows16, rows8, short4 and pipe (T = 1, session 16) all gated, and planes in
    # session 26 (docs/benchmarks/h200_campaign_star1f16_s26.log): session 28's odd chunks marching down next
    assert subject("star_1/512x512x512/f16", 1, first=1) == ("external", "short4+alternate")
    # star_1/512^3 f32: rows16, then rows8, short4 and planes in session 25's three rounds, short4+alternate
    # in session 28's (docs/benchmarks/h200_campaign_march_s28.log): rows8+alternate next
    assert subject("star_1/512x512x512/f32", 1, first=1) == ("external", "rows8+alternate")
    # star_4 and star_2: planes gated in session 25 (star_4 has no rows8: its x halo of 4 is wider than
    # a 2-lane vector), so every candidate before session 30's lean variants was seen; those come next
    for case in ("star_4/512x512x512/f32", "star_4/512x512x512/f16", "star_2/512x512x512/f32",
                 "star_2/256x256x256/f32", "star_2/512x512x512/f64"):
        assert subject(case, 1, first=1) == ("external", "rows16+lean"), case
    # star_1 f64: no rows8 (one double per 8 bytes) and no alternate (it lost on f64); short4 is next
    assert subject("star_1/512x512x512/f64", 1, first=1) == ("external", "short4")
    # diamond_ts8: octa, pipe and pipe with shuffles (session 27, h200_campaign_pipe2_s27.log) gated
    assert subject("diamond_ts8/512x512x512/f32", 1, first=1) == "levers"


def test_subjects_narrow_the_hand_written_candidates_to_those_a_sweep_pointed_at(h200_campaign):
    """star2d_1/8192^2 f32: short4 is next in order, which the march sweep measured level with the
    standing kernel (handwritten_march_h200_s28.json); --subjects skips to the named ones, in order.
    short4+alternate was gated in session 29 (h200_campaign_s29.log): named alone, the levers go on."""
    assert subject("star2d_1/8192x8192/f32", 1, first=1) == ("external", "short4")
    marching = ["rows8+alternate", "rows16+alternate"]
    assert subject("star2d_1/8192x8192/f32", 1, first=1, subjects=marching) == ("external", "rows8+alternate")
    assert subject("star2d_1/8192x8192/f32", 1, first=1, subjects=marching[1:]) == ("external", "rows16+alternate")
    assert subject("star2d_1/8192x8192/f32", 1, first=1, subjects=["short4+alternate"]) == "levers"


def test_a_subject_named_for_one_case_holds_for_that_case_alone(h200_campaign):
    """CASE=NAME: each case its own sweep's pick in one campaign; other cases fall to the levers."""
    # session 31 gated rows8+lean on both (h200_campaign_lean_s31.log); these two were not
    chosen = ["star_2/512x512x512/f32=rows16+lean", "star_4/512x512x512/f16=short4+lean"]
    assert subject("star_2/512x512x512/f32", 1, first=1, subjects=chosen) == ("external", "rows16+lean")
    assert subject("star_4/512x512x512/f16", 1, first=1, subjects=chosen) == ("external", "short4+lean")
    assert subject("star_2/256x256x256/f32", 1, first=1, subjects=chosen) == "levers"


def test_the_levers_go_on_when_every_hand_written_candidate_was_gated(h200_campaign, monkeypatch):
    import forge.candidates

    offered = forge.candidates.matrix_candidates
    monkeypatch.setattr(forge.candidates, "matrix_candidates", lambda case: offered(case)[:1])  # rows16 alone
    assert subject("star_1/512x512x512/f32", 1, first=1) == "levers"


def test_round_one_stays_with_the_levers_by_default(h200_campaign):
    assert subject("star_1/512x512x512/f32", 1) == "levers"
    # by default the hand-written candidates start at round 2: what round 1 gets when they start there
    assert subject("star_1/512x512x512/f32", 2) == subject("star_1/512x512x512/f32", 1, first=1) == ("external", "rows8+alternate")


def test_the_generator_still_renders_the_gated_sources():
    """The ledger knows a kernel by its source hash: every rows16 kernel the H200 campaign gated
    is rendered byte for byte again, so a new campaign does not measure it twice."""
    import hashlib
    import json

    from forge.candidates import matrix_candidates
    from measurement.harness.cases import parse_case

    gated = {}
    for line in (ROOT / "fixtures" / "ledgers" / "h200_campaign.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event["type"] == "CandidateProposed" and event["payload"]["subject"].startswith("rows16"):
            gated[event["payload"]["source_hash"]] = event["payload"]["subject"]
    assert len(gated) == 40  # 6 of them session 31's rows16 lean variants, 1 session 47's rows16+lean+pipelined
    rendered = {hashlib.sha256(c[3].encode()).hexdigest()
                for case in json.loads((ROOT / "fixtures" / "matrices" / "gpu.json").read_text())["cases"]
                for c in matrix_candidates(parse_case(case)) if c[0].startswith("rows16")}
    assert set(gated) <= rendered
