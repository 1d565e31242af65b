"""The Anthropic proposer against a mocked HTTP transport: the real SDK code runs, no network."""
from __future__ import annotations

import json
import time

import anthropic
import httpx
import pytest

from forge.proposers.anthropic_proposer import AnthropicProposer, parse_reply
from forge.proposers.base import GenerationFailure, Proposal, Proposer, ProposerUnavailable, RoundContext

MODEL = "claude-test-model-1"
RULEBOOK = "RULE 7: never read the output buffer before writing it; correctness is checked on a poisoned y."
DIAGNOSIS = "Borrowed from star_2/512x512x512/f32: L2 hit rate collapses past 64-row tiles."
CURRENT_SOURCE = """\
void stencil(const float* u, const float* a, float* y, const double* coef, int nz, int ny, int nx) {
    /* CURRENT-KERNEL-MARKER */
}
"""
NEW_SOURCE = """\
#include <omp.h>
void stencil(const float* u, const float* a, float* y, const double* coef, int nz, int ny, int nx) {
    /* blocked in y by 16 */
}"""
META = {
    "launch": {"threads": 16},
    "hypothesis": "Blocking y by 16 keeps three planes in L2, raising achieved bandwidth above 0.6.",
    "lever_tags": ["tiling", "cache_blocking"],
    "subject": "Block the y loop by 16 rows",
}
GOOD_REPLY = f"Here is one change.\n\n```c\n{NEW_SOURCE}\n```\n\n```json\n{json.dumps(META)}\n```\n"


def context(**overrides) -> RoundContext:
    values = dict(
        case_id="star_1/256x256x256/f32",
        backend="cpu",
        rulebook=RULEBOOK,
        perf_log=["round 3: 41.2 GB/s (0.52 of copy bandwidth), correct"],
        idea_log=["vectorise x with 8-wide loads (tried round 2: +4%)"],
        current_source=CURRENT_SOURCE,
        current_launch={"threads": 8},
        profile={"bandwidth_fraction": 0.52, "gflops": 13.1},
        borrowed_diagnosis=DIAGNOSIS,
        recent_subjects=["Vectorise the x loop"],
        must_leave_history=False,
    )
    values.update(overrides)
    return RoundContext(**values)


def message_json(text: str, input_tokens: int = 1234, output_tokens: int = 567, stop_reason: str = "end_turn") -> dict:
    return {
        "id": "msg_test",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [{"type": "text", "text": text}],
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
    }


class Recorder:
    """An httpx transport handler that answers from a list of responses (or exceptions) and records requests."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer

    def bodies(self) -> list[dict]:
        return [json.loads(request.content) for request in self.requests]


def client_for(handler, max_retries: int = 2) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        api_key="test-key",
        http_client=httpx.Client(transport=httpx.MockTransport(handler)),
        max_retries=max_retries,
        base_url="http://anthropic.test",
    )


def test_successful_reply_gives_a_proposal_and_sends_the_context():
    handler = Recorder(httpx.Response(200, json=message_json(GOOD_REPLY), headers={"request-id": "req_1"}))
    proposer = AnthropicProposer(model=MODEL, client=client_for(handler))
    assert isinstance(proposer, Proposer)

    proposal = proposer.propose(context())

    assert isinstance(proposal, Proposal)
    assert proposal.source.strip() == NEW_SOURCE.strip()
    assert proposal.launch == {"threads": 16}
    assert proposal.hypothesis == META["hypothesis"]
    assert proposal.lever_tags == ("tiling", "cache_blocking")
    assert proposal.subject == "Block the y loop by 16 rows"
    assert proposal.usage["input_tokens"] == 1234
    assert proposal.usage["output_tokens"] == 567
    assert proposal.usage["model"] == MODEL
    assert proposal.raw == GOOD_REPLY

    assert len(handler.requests) == 1
    request = handler.requests[0]
    assert request.url.path == "/v1/messages"
    assert request.headers["x-api-key"] == "test-key"
    body = handler.bodies()[0]
    assert body["model"] == MODEL
    sent = json.dumps(body)
    for text in (RULEBOOK, "CURRENT-KERNEL-MARKER", DIAGNOSIS, "Vectorise the x loop", "0.52"):
        assert json.dumps(text)[1:-1] in sent, text
    assert "void stencil(const T* u" in sent  # the kernel ABI
    assert "outside the history" not in sent


def test_must_leave_history_is_in_the_prompt_and_model_comes_from_env(monkeypatch):
    monkeypatch.setenv("FORGESTENCIL_ANTHROPIC_MODEL", "claude-env-model")
    handler = Recorder(httpx.Response(200, json=message_json(GOOD_REPLY)))
    proposer = AnthropicProposer(client=client_for(handler))
    proposer.propose(context(must_leave_history=True, backend="cuda", current_launch={"block": [32, 8, 1]}))
    body = handler.bodies()[0]
    assert body["model"] == "claude-env-model"
    sent = json.dumps(body)
    assert "outside the history" in sent
    assert "__half" in sent and "```cuda" in sent


@pytest.mark.parametrize(
    "reply, reason",
    [
        (f"I would block the loops.\n```json\n{json.dumps(META)}\n```", "no fenced code block"),
        (f"```c\n{NEW_SOURCE}\n```\nNo metadata, sorry.", "no fenced ```json block"),
        (f"```c\n{NEW_SOURCE}\n```\n```json\n{{\"launch\": {{}}, \"hypothesis\": \n```", "not valid JSON"),
        (f"```c\n{NEW_SOURCE}\n```\n```json\n{json.dumps({**META, 'launch': [1]})}\n```", "'launch' must be an object"),
        (f"```c\n{NEW_SOURCE}\n```\n```json\n{json.dumps({'launch': {}, 'subject': 'x'})}\n```", "lacks hypothesis, lever_tags"),
    ],
)
def test_malformed_reply_is_a_generation_failure_with_usage(reply, reason):
    handler = Recorder(httpx.Response(200, json=message_json(reply, input_tokens=900, output_tokens=45)))
    proposer = AnthropicProposer(model=MODEL, client=client_for(handler))
    with pytest.raises(GenerationFailure) as caught:
        proposer.propose(context())
    failure = caught.value
    assert reason in str(failure)
    assert failure.kind == "malformed"
    assert failure.usage["input_tokens"] == 900
    assert failure.usage["output_tokens"] == 45
    assert failure.usage["model"] == MODEL
    assert failure.raw == reply


def test_truncated_reply_says_so():
    reply = f"```c\n{NEW_SOURCE[:40]}"
    handler = Recorder(httpx.Response(200, json=message_json(reply, stop_reason="max_tokens")))
    proposer = AnthropicProposer(model=MODEL, client=client_for(handler), max_tokens=64)
    with pytest.raises(GenerationFailure) as caught:
        proposer.propose(context())
    assert caught.value.kind == "truncated"
    assert "max_tokens=64" in str(caught.value)


def test_rate_limit_is_retried_by_the_sdk():
    handler = Recorder(
        httpx.Response(
            429,
            json={"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}},
            headers={"retry-after": "0"},
        ),
        httpx.Response(200, json=message_json(GOOD_REPLY)),
    )
    proposer = AnthropicProposer(model=MODEL, client=client_for(handler, max_retries=2))
    proposal = proposer.propose(context())
    assert proposal.subject == META["subject"]
    assert len(handler.requests) == 2


def test_rate_limit_after_all_retries_is_a_generation_failure():
    handler = Recorder(
        httpx.Response(
            429,
            json={"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}},
            headers={"retry-after-ms": "1"},
        )
    )
    proposer = AnthropicProposer(model=MODEL, client=client_for(handler, max_retries=1))
    with pytest.raises(GenerationFailure) as caught:
        proposer.propose(context())
    assert caught.value.kind == "api_error"
    assert "429" in str(caught.value)
    assert caught.value.usage == {"model": MODEL, "input_tokens": 0, "output_tokens": 0, "error": "status 429", "request_id": None}
    assert len(handler.requests) == 2


def test_timeout_is_a_generation_failure():
    handler = Recorder(httpx.ReadTimeout("read timed out"))
    proposer = AnthropicProposer(model=MODEL, client=client_for(handler, max_retries=1))
    started = time.monotonic()
    with pytest.raises(GenerationFailure) as caught:
        proposer.propose(context())
    assert time.monotonic() - started < 5
    failure = caught.value
    assert "timeout" in str(failure).lower()
    assert failure.kind == "timeout"
    assert failure.usage["input_tokens"] == 0 and failure.usage["output_tokens"] == 0
    assert len(handler.requests) == 2  # the first try and one SDK retry


def test_missing_api_key_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ProposerUnavailable, match="ANTHROPIC_API_KEY"):
        AnthropicProposer(model=MODEL)


def test_api_key_from_environment_builds_a_client(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "env-key")
    proposer = AnthropicProposer(model=MODEL)
    assert proposer.client.api_key == "env-key"
    assert proposer.client.max_retries >= 1


def test_parse_reply_tolerates_prose_untagged_json_and_a_string_tag():
    meta = {**META, "lever_tags": "tiling", "subject": "Block y\n by 16"}
    reply = f"Plan:\n```cpp\n{NEW_SOURCE}\n```\nMetadata:\n```\n{json.dumps(meta, indent=2)}\n```\nDone."
    source, launch, hypothesis, tags, subject = parse_reply(reply)
    assert source.strip() == NEW_SOURCE.strip()
    assert launch == {"threads": 16}
    assert tags == ("tiling",)
    assert subject == "Block y by 16"


def test_parse_reply_refuses_two_kernels():
    reply = f"```c\n{NEW_SOURCE}\n```\n```c\n{NEW_SOURCE}\n```\n```json\n{json.dumps(META)}\n```"
    with pytest.raises(ValueError, match="2 code blocks"):
        parse_reply(reply)
