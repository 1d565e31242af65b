"""`forge ablation` on the CPU backend with a real ledger: autotune, oneshot and loop at equal
budget, every speedup traced back to the raw evidence of the measurement events it names."""
from __future__ import annotations

import json
from pathlib import Path

import anthropic
import httpx
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from forge import ablation
from forge.ablation import autotune_launches, run_ablation
from forge.services import ForgeError
from ledger.models import Event
from ledger.records import RecordedEvent
from ledger.selectors import stream_events
from measurement.harness import codegen
from measurement.harness import plan as measurement_plan
from measurement.harness.cases import parse_case
from measurement.harness.plan import ProtocolSettings
from measurement.models import OperatorResult
from measurement.services import source_hash

from .test_anthropic_proposer import Recorder, message_json

HONEST = (Path(__file__).parents[1] / "measurement" / "cheats" / "honest.c").read_text()
BROKEN = "void stencil( { this does not compile"
# Most of a CPU measurement is the cache flush before every launch (twice the last-level cache):
# two passes of two launches are enough for every assertion here (none is on a timing's precision).
QUICK = ProtocolSettings(passes=2, launches=2, warmup=1, max_attempts=1)
CASE = "star_1/64x64x64/f32"  # big enough that a correct candidate is never timed below the launch overhead


@pytest.fixture
def no_key(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)


def event(event_id: str) -> RecordedEvent:
    row = Event.objects.get(event_id=event_id)
    return RecordedEvent.from_body(row.body, row.prev_hash, row.hash)


def ablation_events(ablation_id: str) -> list[dict]:
    return [e.data for e in stream_events(f"ablation/{ablation_id}") if e.type == "AblationMeasured"]


def speedups_from_evidence(measurement_events: list[str]) -> list[float]:
    """Recomputed here from the raw evidence: straightforward median / candidate median for every
    candidate that is correct, timed, possible and correct in its timed output."""
    found = []
    for event_id in measurement_events:
        recorded = event(event_id)
        if recorded.type != "CandidateMeasured":
            continue
        variants = {v["name"]: v for v in recorded.data["variants"]}
        candidate, base = variants["candidate"], variants["straightforward"]
        timing = candidate["timing"]
        if candidate["correctness"]["correct"] and timing and not timing["impossible"] and timing["timed_output_ok"]:
            found.append(base["timing"]["median"] / timing["median"])
    return found


def round_measurements(campaign: str) -> list[str]:
    """The CandidateMeasured and GateVerdict ids the loop's rounds point to, found from the round events."""
    ids = []
    for row in Event.objects.filter(stream__startswith=f"round/{campaign}/", type__in=["RoundCommitted", "RoundReverted"]).order_by("position"):
        verdict = RecordedEvent.from_body(row.body, row.prev_hash, row.hash).data["verdict_event"]
        if verdict:
            ids += [event(verdict).data["measurement"], verdict]
    return ids


def mocked_sdk(monkeypatch, handler) -> None:
    """The real `anthropic` client (built by the proposer from ANTHROPIC_API_KEY) over a mocked transport."""
    real = anthropic.Anthropic

    class Mocked(real):
        def __init__(self, **kwargs):
            super().__init__(**kwargs, base_url="http://anthropic.test",
                             http_client=httpx.Client(transport=httpx.MockTransport(handler)))

    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setattr(anthropic, "Anthropic", Mocked)


def reply(source: str, launch: dict, subject: str) -> httpx.Response:
    meta = {"launch": launch, "hypothesis": f"{subject} should be faster", "lever_tags": ["unrolling"], "subject": subject}
    return httpx.Response(200, json=message_json(f"```c\n{source}\n```\n\n```json\n{json.dumps(meta)}\n```\n"))


@pytest.mark.one_database
def test_without_a_key_autotune_and_loop_measure_the_budget_and_oneshot_is_not_run(ledger, no_key, monkeypatch):
    monkeypatch.setattr(ablation, "available_cores", lambda: 2)
    seen = []
    results = run_ablation(CASE, "cpu", 2, "user:test", protocol=QUICK, progress=seen.append)

    assert [r.arm for r in results] == ["autotune", "oneshot", "loop"]
    recorded = {e["arm"]: e for e in ablation_events(results[0].ablation)}
    assert set(recorded) == {"autotune", "oneshot", "loop"}
    assert {e["ablation"] for e in recorded.values()} == {results[0].ablation}
    assert all(e["budget"] == 2 and e["case"] == CASE and e["backend"] == "cpu" for e in recorded.values())

    oneshot = recorded["oneshot"]
    assert oneshot["status"] == "not_run" and "ANTHROPIC_API_KEY" in oneshot["reason"]
    assert (oneshot["candidates_measured"], oneshot["measurement_events"], oneshot["best_speedup"]) == (0, [], None)

    autotune = recorded["autotune"]
    assert autotune["status"] == "measured" and autotune["candidates_measured"] == 2
    straightforward = codegen.straightforward_c(parse_case(CASE))
    launches = []
    for event_id in autotune["measurement_events"]:
        measured = event(event_id)
        assert measured.type == "CandidateMeasured" and measured.stream == f"ablation/{results[0].ablation}"
        candidate = next(v for v in measured.data["variants"] if v["role"] == "candidate")
        assert candidate["source"] == straightforward
        launches.append(candidate["launch"])
        assert measured.data["protocol"]["passes"] == QUICK.passes
    assert launches == [{"threads": 2}, {"threads": 1}]

    loop = recorded["loop"]
    assert loop["status"] == "measured" and loop["candidates_measured"] == 2
    [started] = [event(e.event_id).data for e in Event.objects.filter(type="CampaignStarted")]
    assert (started["rounds_per_case"], started["proposer"], started["cases"]) == (2, "levers", [CASE])
    rounds = round_measurements(started["campaign"])
    assert len(rounds) == 4 and loop["measurement_events"][:4] == rounds
    # Anything else listed is a branch head re-measured by the branch rule, named by a branch event.
    resolutions = {e.data["verdict_event"] for e in stream_events(f"campaign/{started['campaign']}")
                   if e.type in ("BranchMerged", "BranchDropped") and e.data.get("verdict_event")}
    for extra in loop["measurement_events"][4:]:
        recorded_extra = event(extra)
        assert extra in resolutions or any(event(v).data["measurement"] == extra for v in resolutions), recorded_extra.type
    # Only the loop went through the gate: the autotune candidates left the operator stream alone.
    verdicts = [e.event_id for e in stream_events(f"operator/cpu/{CASE}") if e.type == "GateVerdict"]
    assert sorted(verdicts) == sorted(e for e in loop["measurement_events"] if event(e).type == "GateVerdict")

    for arm, counted in ((autotune, autotune["measurement_events"]), (loop, rounds)):
        assert arm["correct_candidates"] >= 1
        assert arm["best_speedup"] > 0
        assert arm["best_speedup"] == pytest.approx(max(speedups_from_evidence(counted)))
        assert arm["best_source_hash"] and "over straightforward" in arm["detail"]

    assert [(c.arm, c.number) for c in seen] == [("autotune", 1), ("autotune", 2), ("loop", 1), ("loop", 2)]


@pytest.mark.one_database
def test_autotune_with_fewer_configurations_than_the_budget_says_so(ledger, monkeypatch):
    monkeypatch.setattr(ablation, "available_cores", lambda: 1)
    [result] = run_ablation(CASE, "cpu", 3, "user:test", protocol=QUICK, arms=("autotune",))
    recorded = result.event.data
    assert (recorded["budget"], recorded["candidates_measured"]) == (3, 1)
    assert "only 1 exist" in recorded["detail"] and "could not use its whole budget" in recorded["detail"]
    assert len(recorded["measurement_events"]) == 1


@pytest.mark.one_database
def test_oneshot_with_a_key_measures_each_generation_once_without_feedback(ledger, monkeypatch):
    handler = Recorder(
        reply(HONEST, {"threads": 1}, "Write the neighbour sum out"),
        reply(BROKEN, {}, "Something that does not compile"),
        httpx.Response(200, json=message_json("I would rather not write code today.")),
    )
    mocked_sdk(monkeypatch, handler)
    seen = []
    [result] = run_ablation(CASE, "cpu", 3, "user:test", protocol=QUICK, progress=seen.append, arms=("oneshot",))
    recorded = result.event.data

    assert recorded["status"] == "measured" and recorded["reason"] == ""
    assert (recorded["candidates_measured"], recorded["correct_candidates"]) == (2, 1)
    assert [c.state for c in seen] == ["correct", "compilation_failure", "generation_failure"]
    assert "generation(s) 3 failed" in recorded["detail"] and "tokens in/out" in recorded["detail"]
    assert recorded["best_speedup"] > 0
    assert recorded["best_speedup"] == pytest.approx(max(speedups_from_evidence(recorded["measurement_events"])))
    assert recorded["best_source_hash"] == source_hash(HONEST.strip("\n") + "\n")
    assert recorded["best_launch"] == {"threads": 1}
    assert [event(e).type for e in recorded["measurement_events"]] == ["CandidateMeasured", "CandidateMeasured"]

    # Three requests, identical: no generation saw another's outcome; each saw the straightforward
    # kernel and empty logs.
    bodies = handler.bodies()
    assert len(bodies) == 3 and bodies[0]["messages"] == bodies[1]["messages"] == bodies[2]["messages"]
    prompt = bodies[0]["messages"][0]["content"]
    assert codegen.straightforward_c(parse_case(CASE)).strip() in prompt
    assert "## Perf log (recent, factual)\n(none)" in prompt and "## Idea log\n(none)" in prompt
    # Measured without the gate: nothing was offered to the operator map.
    assert not Event.objects.filter(type="GateVerdict").exists() and not OperatorResult.objects.exists()


def test_a_loop_that_needs_an_llm_without_a_key_is_not_run(ledger, no_key):
    [result] = run_ablation(CASE, "cpu", 2, "user:test", loop_proposer="anthropic", protocol=QUICK, arms=("loop",))
    recorded = result.event.data
    assert recorded["status"] == "not_run" and "ANTHROPIC_API_KEY" in recorded["reason"]
    assert recorded["candidates_measured"] == 0 and recorded["measurement_events"] == []
    assert not Event.objects.filter(type__in=["CampaignStarted", "CandidateMeasured"]).exists()


@pytest.mark.one_database
def test_the_command_prints_its_table(ledger, no_key, monkeypatch, capsys):
    monkeypatch.setitem(measurement_plan.DEFAULT_PROTOCOL, "cpu", QUICK)
    call_command("forge", "ablation", "--case", CASE, "--budget", "1")
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[0].startswith("ablation ") and "budget 1 measured candidates per arm" in lines[0]
    assert lines[1].split()[:6] == ["arm", "status", "measured", "correct", "best", "speedup"]
    rows = {line.split()[0]: line for line in lines[2:5]}
    assert rows["autotune"].split()[1:3] == ["measured", "1/1"]
    assert rows["loop"].split()[1:3] == ["measured", "1/1"]
    assert rows["oneshot"].split()[1:4] == ["not_run", "0/1", "0"] and "ANTHROPIC_API_KEY" in rows["oneshot"]
    assert rows["autotune"].split()[4].endswith("x")
    assert len(ablation_events(lines[0].split()[1].rstrip(":"))) == 3
    progress = [line for line in captured.err.splitlines() if "/1" in line]
    assert len(progress) == 2 and "autotune" in progress[0] and "loop" in progress[1]


def test_budget_zero_and_a_bad_case_are_refused_and_record_nothing(ledger):
    before = Event.objects.count()
    with pytest.raises(CommandError, match="--budget must be at least 1"):
        call_command("forge", "ablation", "--case", CASE, "--budget", "0")
    with pytest.raises(ForgeError, match="at least one"):
        run_ablation(CASE, "cpu", 0, "user:test")
    with pytest.raises(CommandError, match="star_9"):
        call_command("forge", "ablation", "--case", "star_9/8x8x8/f32", "--budget", "1")
    with pytest.raises(CommandError, match="--arms"):
        call_command("forge", "ablation", "--case", CASE, "--budget", "1", "--arms", "autotune,grid")
    assert Event.objects.count() == before


def test_the_autotune_search_space_is_fixed_and_distinct():
    star = parse_case("star_1/64x64x64/f32")
    assert autotune_launches(star, "cpu", cores=8) == [{"threads": n} for n in (8, 1, 2, 4, 3, 5, 6, 7)]
    assert autotune_launches(star, "cpu", cores=1) == [{"threads": 1}]
    cuda = autotune_launches(star, "cuda")
    assert cuda[0] == codegen.DEFAULT_CUDA_LAUNCH
    blocks = [tuple(launch["block"]) for launch in cuda]
    assert len(set(blocks)) == len(blocks) > 20
    assert all(1 <= bx * by * bz <= 1024 for bx, by, bz in blocks)
    flat = autotune_launches(parse_case("star2d_1/256x256/f32"), "cuda")
    assert all(launch["block"][2] == 1 for launch in flat)


@pytest.mark.gpu
@pytest.mark.parametrize("case_id", ["star_1/256x256x256/f32", "star2d_1/2048x2048/f32"])
def test_on_cuda_the_autotune_and_loop_arms_measure_their_budget(ledger, no_key, monkeypatch, case_id):
    """On the device machine only (scripts/gpu_tests.sh): block shapes of the straightforward
    kernel against three levers rounds, 3D and 2D."""
    monkeypatch.setenv("FORGESTENCIL_CUDA_BASELINES", "")  # the straightforward kernel alone is the bound
    protocol = ProtocolSettings(passes=3, launches=3, warmup=1, max_attempts=1, check_timeout=180, timing_timeout=300)
    seen = []
    results = run_ablation(case_id, "cuda", 3, "user:test", protocol=protocol, progress=seen.append)
    recorded = {r.arm: r.event.data for r in results}
    assert recorded["oneshot"]["status"] == "not_run"
    launches = [c.launch for c in seen if c.arm == "autotune"]
    assert launches == autotune_launches(parse_case(case_id), "cuda")[:3]
    for arm in ("autotune", "loop"):
        assert recorded[arm]["candidates_measured"] == 3, recorded[arm]["detail"]
        assert recorded[arm]["correct_candidates"] >= 1 and recorded[arm]["best_speedup"] > 0, recorded[arm]["detail"]
    autotune = [c for c in seen if c.arm == "autotune"]
    assert all(c.correct for c in autotune), [c.detail for c in autotune]
    assert recorded["autotune"]["best_speedup"] == pytest.approx(max(speedups_from_evidence(recorded["autotune"]["measurement_events"])))
    print({arm: (data["best_speedup"], data["detail"]) for arm, data in recorded.items()})
