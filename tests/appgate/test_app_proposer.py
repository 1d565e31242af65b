"""The App Agent with the anthropic proposer, against a mocked HTTP transport (the real SDK code
runs, no network): the patch is recorded, the gate builds the candidate from it while the
baseline stays the original, a wrong patch ends in RESEARCH, a re-run rebuilds the same patch."""
from __future__ import annotations

import hashlib
import json

import httpx
import pytest

from appgate.agent import run_agent
from appgate.manifest import load_manifest
from appgate.proposers import AnthropicAppProposer, AppCandidate, parse_patch_reply
from appgate.services import record_candidate, rerun, run_gate
from ledger.models import Event
from tests.appgate.test_gate import PROGRAM, QUICK, smooth_app
from tests.forge.test_anthropic_proposer import Recorder, client_for, message_json

# One change to the shared smoothing loop: the two outer neighbours summed before one multiply.
GOOD_PATCH = PROGRAM.replace("b[i] = 0.25 * a[i - 1] + 0.5 * a[i] + 0.25 * a[i + 1];",
                             "b[i] = 0.25 * (a[i - 1] + a[i + 1]) + 0.5 * a[i];")
# A "faster" loop that no longer conserves mass: the program's own verification fails it.
WRONG_PATCH = PROGRAM.replace("0.25 * a[i + 1];", "0.3 * a[i + 1];")
META = {"subject": "Sum the outer neighbours before multiplying",
        "hypothesis": "One multiply fewer per point shortens the loop body, so the sweep runs faster."}


def reply(program: str, path: str = "src/main.c") -> str:
    return f"One change.\n\n```c file={path}\n{program}```\n\n```json\n{json.dumps(META)}\n```\n"


def proposer(handler) -> AnthropicAppProposer:
    return AnthropicAppProposer(model="claude-test-model-1", client=client_for(handler, max_retries=0))


def test_a_patch_from_claude_is_recorded_gated_and_rebuilt_on_rerun(ledger, tmp_path):
    assert GOOD_PATCH != PROGRAM
    # arrays past the L2 cache: the candidate's pointer swap saves a full memcpy per step
    path = smooth_app(tmp_path, datasets=[{"name": "large", "args": "400000 30"}])
    handler = Recorder(httpx.Response(200, json=message_json(reply(GOOD_PATCH))))

    row = run_agent(path, "agent:test", protocol=QUICK, proposer=proposer(handler))

    sent = json.dumps(handler.bodies()[0])
    for text in ("file=src/main.c", "memcpy(a, b, n * sizeof *a);", "-DFORGED", "star2d_1/64x64/f64", "400000 30"):
        assert json.dumps(text)[1:-1] in sent, text
    proposed = Event.objects.get(type="AppCandidateProposed")
    data = json.loads(proposed.body)["payload"]
    assert data["files"] == {"src/main.c": GOOD_PATCH} and data["proposer"] == "anthropic"
    assert "-        for (int i = 1; i < n - 1; i++) b[i] = 0.25 * a[i - 1]" in data["patch"]
    assert "+        for (int i = 1; i < n - 1; i++) b[i] = 0.25 * (a[i - 1] + a[i + 1])" in data["patch"]
    assert data["usage"]["input_tokens"] == 1234
    verdict = json.loads(Event.objects.get(type="AppGateVerdict").body)["payload"]
    assert verdict["candidate"] == str(proposed.event_id)
    built = {json.loads(e.body)["payload"]["variant"]: json.loads(e.body)["payload"] for e in Event.objects.filter(type="AppVariantBuilt")}
    assert built["candidate"]["source_hashes"]["src/main.c"] == hashlib.sha256(GOOD_PATCH.encode()).hexdigest()
    assert built["baseline"]["source_hashes"]["src/main.c"] == hashlib.sha256(PROGRAM.encode()).hexdigest()
    assert (tmp_path / "src" / "main.c").read_text() == PROGRAM  # the patch never touches the original
    assert [m["milestone"] for m in row.milestones][:4] == ["M1", "M2a", "M2b", "M3"]
    assert row.state in ("INTEGRATED", "DROPPED", "IN_PROGRESS")  # IN_PROGRESS: inconclusive (noisy here)
    if row.state != "INTEGRATED":
        pytest.skip(f"the patched candidate did not clear the floor on this machine this time: {row.state_reason}")
    outcome, _ = rerun(row.name, "user:reviewer", QUICK)
    assert outcome.verdict_event.data["candidate"] == str(proposed.event_id)


def test_a_wrong_patch_is_rejected_by_the_programs_own_check_and_ends_in_research(ledger, tmp_path):
    path = smooth_app(tmp_path, datasets=[{"name": "small", "args": "20000 40"}])
    row = run_agent(path, "agent:test", protocol=QUICK,
                    proposer=proposer(Recorder(httpx.Response(200, json=message_json(reply(WRONG_PATCH))))))
    verdict = json.loads(Event.objects.get(type="AppGateVerdict").body)["payload"]
    assert verdict["reasons"] == ["candidate_incorrect"] and "reported failure" in verdict["detail"]
    assert row.state == "RESEARCH" and not Event.objects.filter(type="AppDatasetMeasured").exists()


@pytest.mark.parametrize("text, kind", [
    (reply(GOOD_PATCH, path="src/other.c"), "malformed"),
    ("no blocks at all", "malformed"),
])
def test_a_reply_that_does_not_parse_records_no_candidate(ledger, tmp_path, text, kind):
    path = smooth_app(tmp_path)
    row = run_agent(path, "agent:test", protocol=QUICK, proposer=proposer(Recorder(httpx.Response(200, json=message_json(text)))))
    assert row.state == "RESEARCH" and f"({kind})" in row.state_reason
    assert not Event.objects.filter(type__in=["AppCandidateProposed", "AppGateVerdict"]).exists()


def test_an_api_error_after_retries_is_research_not_a_crash(ledger, tmp_path):
    path = smooth_app(tmp_path)
    handler = Recorder(httpx.Response(529, json={"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}))
    row = run_agent(path, "agent:test", protocol=QUICK, proposer=proposer(handler))
    assert row.state == "RESEARCH" and "(api_error)" in row.state_reason and "529" in row.state_reason


def test_a_patch_against_an_older_baseline_is_stale(ledger, tmp_path):
    path = smooth_app(tmp_path)
    event = record_candidate(load_manifest(path), AppCandidate("anthropic", "s", "h", {"src/main.c": GOOD_PATCH}), "agent:test")
    path = smooth_app(tmp_path, PROGRAM.replace("int main(", "/* a new upstream release */\nint main("))
    outcome = run_gate(path, "user:test", QUICK, candidate=str(event.event_id))
    assert outcome.reasons == ["candidate_stale"] and "src/main.c" in outcome.detail


def test_parse_patch_reply_names_what_is_wrong(tmp_path):
    loaded = load_manifest(smooth_app(tmp_path))
    files, subject, hypothesis = parse_patch_reply(loaded, reply(GOOD_PATCH))
    assert files == {"src/main.c": GOOD_PATCH} and subject == META["subject"] and hypothesis == META["hypothesis"]
    for text, message in [
        (reply(PROGRAM), "changes no file"),
        (reply(GOOD_PATCH).replace("```json", "```c"), "without file=PATH"),
        (f"```c file=src/main.c\n{GOOD_PATCH}```\n", "no ```json block"),
        (reply(GOOD_PATCH).replace(json.dumps(META), '{"subject": ""}'), "non-empty strings"),
        (reply(GOOD_PATCH) + reply(GOOD_PATCH).split("```json")[0], "appears twice"),
    ]:
        with pytest.raises(ValueError, match=message):
            parse_patch_reply(loaded, text)
