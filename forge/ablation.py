"""`forge ablation`: synthesis against search at equal budget, on one case.

Three arms, each given the same budget N of candidates, each candidate measured once by the
harness with the straightforward kernel timed in the same run:

  autotune  search: N launch configurations of the straightforward kernel (CPU: OpenMP thread
            counts, the only CPU launch parameter; CUDA: thread-block shapes), in a fixed order.
  oneshot   synthesis without feedback: N independent generations by the Anthropic proposer,
            each shown the straightforward kernel with empty perf and idea logs.
  loop      synthesis with feedback: the forging loop itself, a campaign of N rounds on the case
            (each round proposes one candidate and gates it).

A candidate's speedup is median(straightforward) / median(candidate) of the same measurement,
read back from the recorded `CandidateMeasured` evidence (so every number in an
`AblationMeasured` event traces to raw samples). Autotune and oneshot candidates are measured
with `measurement.services.measure` and recorded as `CandidateMeasured` on the ablation's own
stream `ablation/<id>`: they are not offered to the operator gate, so an ablation never changes
the operator map or the prior best the loop arm is gated against. The loop arm's candidates go
through the gate as every round does (`CandidateMeasured` + `GateVerdict` on
`operator/<backend>/<case>`).

An arm that needs an LLM without an API key records status "not_run" with the reason and
measures nothing. One `AblationMeasured` event per arm, appended when the arm ends.
"""
from __future__ import annotations

import json
import os
import uuid
from typing import Any, Sequence

from ledger.records import RecordedEvent
from ledger.services import NewEvent, append
from measurement.backends.base import Kernel
from measurement.harness import codegen
from measurement.harness.cases import Case, parse_case
from measurement.harness.plan import ProtocolSettings
from measurement.services import measure, source_hash

from . import rulebook, selectors
from .ablation_loop import loop_arm
from .ablation_results import ArmResult, CandidateResult, Progress, candidate_speedup
from .proposers import make_proposer
from .proposers.base import GenerationFailure, ProposerUnavailable, RoundContext
from .services import ForgeError

ARMS = ("autotune", "oneshot", "loop")
BACKENDS = ("cpu", "cuda")
LOOP_PROPOSERS = ("levers", "anthropic")

# CUDA block shapes beyond the curated list of forge.levers: every (bx, by, bz) of these
# factors with 64..1024 threads, in a fixed order (threads, then bx, by, bz descending x).
_CUDA_BX = (16, 32, 64, 128, 256, 512, 1024)
_CUDA_BY = (1, 2, 4, 8, 16, 32)
_CUDA_BZ = (1, 2, 4, 8)


# ---- the search space of autotune ------------------------------------------------------


def available_cores() -> int:
    """The cores an OpenMP kernel gets by default here (the CPU backend's own rule)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def autotune_launches(case: Case, backend: str, cores: int | None = None) -> list[dict[str, Any]]:
    """Every distinct launch configuration of the straightforward kernel, in the order autotune
    measures them; the first is the default the straightforward baseline itself runs with.

    CPU: {"threads": n} for n = all cores, 1, the powers of two below, then the rest ascending
    (more threads than cores is not offered). CUDA: the default block, forge.levers' curated
    block shapes, then every shape of a fixed grid of 64..1024 threads (2D cases: bz = 1 only,
    since z > 0 threads idle)."""
    if backend == "cpu":
        cores = max(1, cores or available_cores())
        order = [cores, 1] + [2 ** k for k in range(1, cores.bit_length()) if 2 ** k < cores] + list(range(1, cores + 1))
        return [{"threads": n} for n in dict.fromkeys(order)]
    from .levers import CUDA_BLOCKS

    three_d = case.stencil.dims == 3
    generated = sorted(
        ((bx, by, bz) for bx in _CUDA_BX for by in _CUDA_BY for bz in _CUDA_BZ if 64 <= bx * by * bz <= 1024 and bz <= 64),
        key=lambda b: (b[0] * b[1] * b[2], -b[0], -b[1], -b[2]),
    )
    blocks = [tuple(codegen.DEFAULT_CUDA_LAUNCH["block"]), *CUDA_BLOCKS, *generated]
    blocks = [tuple(int(v) for v in b) for b in blocks if three_d or b[2] == 1]
    return [{"block": list(b)} for b in dict.fromkeys(blocks)]


def launch_label(launch: dict[str, Any]) -> str:
    if "threads" in launch:
        return f"threads={launch['threads']}"
    if "block" in launch:
        return "block=" + "x".join(str(v) for v in launch["block"])
    return json.dumps(launch, sort_keys=True) or "{}"


# ---- the run ---------------------------------------------------------------------------


def run_ablation(
    case_id: str,
    backend: str,
    budget: int,
    actor: str,
    loop_proposer: str = "levers",
    protocol: ProtocolSettings | None = None,
    progress: Progress | None = None,
    arms: Sequence[str] = ARMS,
) -> list[ArmResult]:
    """Run the arms (default: all three, in the order autotune, oneshot, loop) at the same
    budget on one case; one AblationMeasured event per arm, all sharing one ablation id."""
    case = parse_case(case_id)
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise ForgeError(f"the budget must be at least one measured candidate per arm, got {budget!r}")
    if backend not in BACKENDS:
        raise ForgeError(f"unknown backend {backend!r}: use cpu or cuda")
    if loop_proposer not in LOOP_PROPOSERS:
        raise ForgeError(f"unknown loop proposer {loop_proposer!r}: use levers or anthropic")
    unknown = [arm for arm in arms if arm not in ARMS]
    if unknown or not arms:
        raise ForgeError(f"unknown arm(s) {unknown or list(arms)!r}: choose from {', '.join(ARMS)}")
    ablation = str(uuid.uuid4())
    say = progress or (lambda result: None)
    results = []
    for arm in (a for a in ARMS if a in arms):
        result = ArmResult(ablation, case.id, backend, arm, budget, "measured")
        runner = {"autotune": _autotune, "oneshot": _oneshot, "loop": loop_arm}[arm]
        runner(result, case, actor, protocol, say, loop_proposer)
        result.event = _record(result, actor)
        results.append(result)
    return results


def ablation_stream(ablation: str) -> str:
    return f"ablation/{ablation}"


def _record(result: ArmResult, actor: str) -> RecordedEvent:
    best = result.best
    events = [e for c in result.candidates for e in c.events] + result.extra_events
    detail = result.detail
    if best is not None:
        detail = (f"best: {best.label}, {best.speedup:.3f}x over straightforward "
                  f"(95% CI {best.speedup_ci[0]:.3f}-{best.speedup_ci[1]:.3f}, CandidateMeasured {best.events[0]})"
                  + (f"; {detail}" if detail else ""))
    return append(NewEvent(stream=ablation_stream(result.ablation), type="AblationMeasured", actor=actor, payload={
        "ablation": result.ablation, "case": result.case, "backend": result.backend, "arm": result.arm,
        "budget": result.budget, "status": result.status, "reason": result.reason,
        "candidates_measured": result.candidates_measured, "correct_candidates": result.correct_candidates,
        "best_speedup": best.speedup if best else None,
        "best_source_hash": best.source_hash if best else None,
        "best_launch": best.launch if best else {},
        "measurement_events": list(dict.fromkeys(events)),
        "detail": detail,
    }))


def _measure_and_record(result: ArmResult, case: Case, kernel: Kernel, hypothesis: str, actor: str,
                        protocol: ProtocolSettings | None) -> tuple[str, dict[str, Any]]:
    """Measure a candidate (no gate) and record its evidence on the ablation's stream."""
    report = measure(case.id, result.backend, kernel, None, protocol)
    evidence = {**report.evidence(), "hypothesis": hypothesis}
    event = append(NewEvent(stream=ablation_stream(result.ablation), type="CandidateMeasured", actor=actor, payload=evidence))
    return str(event.event_id), event.data


def _measured_candidate(arm: str, number: int, label: str, kernel: Kernel, events: list[str], evidence: dict) -> CandidateResult:
    state, correct, speedup, ci, detail = candidate_speedup(evidence)
    return CandidateResult(arm, number, label, True, state, correct, speedup, ci, source_hash(kernel.source),
                           dict(kernel.launch), events, detail)


def _autotune(result: ArmResult, case: Case, actor: str, protocol, say: Progress, _loop_proposer: str) -> None:
    straightforward = selectors.straightforward_kernel(case.id, result.backend)
    launches = autotune_launches(case, result.backend)
    for number, launch in enumerate(launches[: result.budget], start=1):
        kernel = Kernel(straightforward.source, launch)
        label = launch_label(launch)
        hypothesis = f"ablation {result.ablation} autotune {number}/{result.budget}: the straightforward kernel with launch {label}"
        event_id, evidence = _measure_and_record(result, case, kernel, hypothesis, actor, protocol)
        candidate = _measured_candidate("autotune", number, label, kernel, [event_id], evidence)
        result.candidates.append(candidate)
        say(candidate)
    space = "OpenMP thread counts 1..all cores" if result.backend == "cpu" else "thread-block shapes"
    result.detail = f"search space: {len(launches)} distinct launch configurations ({space}) of the straightforward kernel"
    if len(launches) < result.budget:
        result.detail += (f"; only {len(launches)} exist, so {len(launches)} of the budget of {result.budget} "
                          "were measured (the arm could not use its whole budget)")


def oneshot_context(case: Case, backend: str) -> RoundContext:
    """What each one-shot generation sees: the straightforward kernel and no history at all."""
    kernel = selectors.straightforward_kernel(case.id, backend)
    return RoundContext(case_id=case.id, backend=backend, rulebook=rulebook.as_text(), perf_log=[], idea_log=[],
                        current_source=kernel.source, current_launch=dict(kernel.launch), profile={},
                        borrowed_diagnosis=None, recent_subjects=[], must_leave_history=False, current_plan=None)


def _oneshot(result: ArmResult, case: Case, actor: str, protocol, say: Progress, _loop_proposer: str) -> None:
    try:
        proposer = make_proposer("anthropic")
    except ProposerUnavailable as exc:
        result.status, result.reason = "not_run", f"needs an LLM: {exc}"
        return
    context = oneshot_context(case, result.backend)
    tokens = {"input_tokens": 0, "output_tokens": 0}
    models: set[str] = set()
    failures = []
    for number in range(1, result.budget + 1):
        try:
            proposal = proposer.propose(context)
        except GenerationFailure as failure:
            _count_tokens(tokens, models, failure.usage)
            failures.append(number)
            candidate = CandidateResult("oneshot", number, f"generation {number}", False, "generation_failure", False,
                                        detail=f"generation failure ({failure.kind}): {failure.message[:200]}")
            result.candidates.append(candidate)
            say(candidate)
            continue
        _count_tokens(tokens, models, proposal.usage)
        kernel = Kernel(proposal.source, dict(proposal.launch))
        hypothesis = f"ablation {result.ablation} oneshot {number}/{result.budget}: {proposal.hypothesis}"
        event_id, evidence = _measure_and_record(result, case, kernel, hypothesis, actor, protocol)
        candidate = _measured_candidate("oneshot", number, f"generation {number}: {proposal.subject[:60]}", kernel, [event_id], evidence)
        result.candidates.append(candidate)
        say(candidate)
    model = ", ".join(sorted(models)) or getattr(proposer, "model", "?")
    result.detail = (f"{result.budget} independent generations by {model} from the straightforward kernel, no feedback; "
                     f"tokens in/out {tokens['input_tokens']}/{tokens['output_tokens']}")
    if failures:
        result.detail += (f"; generation(s) {', '.join(map(str, failures))} failed and were not measured "
                          f"({len(failures)} of the budget of {result.budget} spent without a measurement)")


def _count_tokens(tokens: dict[str, int], models: set[str], usage: dict[str, Any]) -> None:
    for key in tokens:
        value = usage.get(key)
        if isinstance(value, int):
            tokens[key] += value
    if usage.get("model"):
        models.add(str(usage["model"]))
