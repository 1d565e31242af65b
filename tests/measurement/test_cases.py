"""What may enter the gate (issue 14, points 8 and 9): one spelling per case id, sizes the
backend can hold, kernel sources of a bounded size; each refused with a message that says what
to do, at every entry, before anything is recorded, allocated or compiled."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db.models import Max

from frontend.reruns import RerunError, request_rerun
from ledger.models import Event
from measurement.backends import get_backend
from measurement.backends.base import MAX_SOURCE_BYTES, CompileError, Kernel, SourceTooLarge, Variant, check_source, ensure_fits
from measurement.harness.cases import MAX_POINTS, CaseError, CaseTooLarge, parse_case
from measurement.harness.plan import check_plan
from measurement.harness.protocol import check_variant
from measurement.services import MeasurementError, gate_candidate, measure

CASE = "star_1/32x32x32/f32"
HONEST = Path(__file__).parent / "cheats" / "honest.c"
LEDGERS = Path(__file__).resolve().parents[2] / "fixtures" / "ledgers"


def last_position() -> int:
    return Event.objects.aggregate(last=Max("position"))["last"] or 0


# ---------------------------------------------------------------- one spelling per case


@pytest.mark.parametrize(
    "alias, canonical",
    [
        ("star_1/0032x32x32/f32", CASE),
        (" star_1/32x32x32/f32", CASE),
        ("star_1/32x32x32/f32\n", CASE),
        ("star_1 /32x32x32/f32", CASE),
        ("diamond_ts04/32x32x32/f32", "diamond_ts4/32x32x32/f32"),
        ("star2d_1/0100x064/f64", "star2d_1/100x64/f64"),
    ],
)
def test_an_alias_of_a_case_id_is_refused_naming_the_canonical_spelling(alias, canonical):
    with pytest.raises(CaseError, match=f"not the canonical spelling.*use '{canonical}'"):
        parse_case(alias)
    assert parse_case(canonical).id == canonical


@pytest.mark.parametrize(
    "text, message",
    [
        ("star_1/+32x32x32/f32", "bad shape"),
        ("star_1/3_2x32x32/f32", "bad shape"),  # int() would read 32
        ("star_1/\u0663\u0662x32x32/f32", "bad shape"),  # Arabic-Indic digits: int() would read 32
        ("star_\u0661/32x32x32/f32", "unknown stencil type"),
        ("star_1/4294967296x4294967296x4/f32", "more than 2\\^31 - 1 points"),  # 2^66: wraps to 0 in int64
        ("star_1/2048x1024x1025/f32", "more than 2\\^31 - 1 points"),
        ("star_1/" + "9" * 60 + "x3x3/f32", "at most 64 characters"),
    ],
)
def test_malformed_overflowing_and_absurd_ids_are_refused(text, message):
    with pytest.raises(CaseError, match=message):
        parse_case(text)


def test_the_largest_case_kernels_can_index_is_accepted():
    assert parse_case("star2d_1/46341x46340/f32").points == 46341 * 46340 <= MAX_POINTS


def test_every_case_id_in_the_shipped_ledgers_is_canonical():
    """The ledgers in fixtures/ledgers/ import and replay under the canonical parser: no stream
    and no payload names a case by an alias."""
    ids: set[str] = set()
    for path in sorted(LEDGERS.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            event = json.loads(line)
            stream, payload = event["stream"], event["payload"]
            if stream.startswith("case/"):
                ids.add(stream.removeprefix("case/"))
            if stream.startswith("operator/"):
                ids.add(stream.split("/", 2)[2])
            if stream.startswith(("case/", "operator/")) or event["type"] in ("CasePlanned", "RoundStarted"):
                ids.update([payload["case"]] if "case" in payload else [])
            ids.update(payload.get("cases", []) if event["type"] == "CampaignStarted" else [])
    assert len(ids) >= 37
    assert [i for i in sorted(ids) if parse_case(i).id != i] == []


def test_the_gate_and_the_commands_refuse_an_alias_before_recording_anything(ledger, tmp_path):
    before = last_position()
    with pytest.raises(CaseError, match=f"use '{CASE}'"):
        gate_candidate("star_1/0032x32x32/f32", "cpu", Kernel(HONEST.read_text(), {"threads": 1}), "agent:alias")
    with pytest.raises(CommandError, match=f"use '{CASE}'"):
        call_command("measure", "--case", "star_1/0032x32x32/f32")
    with pytest.raises(CommandError, match=f"use '{CASE}'"):
        call_command("gate", "operator", "--case", "star_1/0032x32x32/f32")
    with pytest.raises(CommandError, match=f"use '{CASE}'"):
        call_command("forge", "submit", "--case", "star_1/0032x32x32/f32", "--source", str(HONEST), "--hypothesis", "alias")
    with pytest.raises(RerunError, match=f"use '{CASE}'"):
        request_rerun("case", "star_1/0032x32x32/f32", "user:reviewer")
    assert last_position() == before


# ---------------------------------------------------------------- memory


def test_a_case_the_backend_cannot_hold_is_refused_before_anything_is_allocated(db):
    """The first child of a measurement compares HARNESS_COPIES times the case's arrays with
    the backend's memory limit; nothing of the case is allocated (the arrays here would be
    17 GiB each). The parent reads the ledger first (a tuned schedule, a composed bound's parts)."""
    backend = get_backend("cpu")
    limit, _ = backend.memory_limit()
    huge = parse_case("varcoef_star_1/1290x1290x1290/f64")
    if 4 * huge.compulsory_bytes <= limit:
        pytest.skip(f"this machine could hold {huge.id} ({limit / 2**30:.0f} GiB for one case)")
    with pytest.raises(CaseTooLarge, match="Choose a smaller shape or precision"):
        ensure_fits(backend, huge)
    with pytest.raises(MeasurementError, match=r"varcoef_star_1/1290x1290x1290/f64 needs about \d+\.\d GiB on the cpu backend"):
        measure(huge.id, "cpu")
    ensure_fits(backend, parse_case(CASE))


# ---------------------------------------------------------------- kernel source size


def test_a_source_above_the_limit_is_refused_and_one_at_the_limit_is_not():
    check_source("x" * MAX_SOURCE_BYTES)
    with pytest.raises(SourceTooLarge, match=f"256.0 KiB; the gate takes at most {MAX_SOURCE_BYTES // 1024} KiB"):
        check_source("x" * MAX_SOURCE_BYTES + "é")  # counted in bytes: é is two


def test_the_gate_refuses_a_source_above_the_limit_before_compiling_it():
    source = HONEST.read_text() + "\n" + "/" * MAX_SOURCE_BYTES + "\n"  # a comment line: it would compile
    case = parse_case(CASE)
    with pytest.raises(CompileError, match="KiB"):
        check_variant("cpu", CASE, Variant("candidate", Kernel(source, {"threads": 1}), "candidate"), check_plan(case, "cpu", 1))


def test_the_commands_refuse_a_source_above_the_limit_before_recording_anything(ledger, tmp_path):
    big = tmp_path / "big.c"
    big.write_text(HONEST.read_text() + "/*" + "x" * MAX_SOURCE_BYTES + "*/\n")
    before = last_position()
    with pytest.raises(CommandError, match="the gate takes at most 256 KiB"):
        call_command("measure", "--case", CASE, "--source", str(big))
    with pytest.raises(CommandError, match="the gate takes at most 256 KiB"):
        call_command("forge", "submit", "--case", CASE, "--source", str(big), "--hypothesis", "a big one")
    assert last_position() == before
