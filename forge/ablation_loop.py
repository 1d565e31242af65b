"""The `loop` arm of `forge ablation` (forge/ablation.py): a campaign of N rounds on the case, each
round gated as every round is, and each counted from what the ledger recorded of it."""
from __future__ import annotations

from typing import Iterable

from ledger.selectors import stream_events
from measurement.harness.cases import Case

from .ablation_results import ArmResult, CandidateResult, Progress, candidate_speedup, recorded_event
from .proposers import make_proposer
from .proposers.base import Proposer, ProposerUnavailable
from .services import execute_round, round_stream, start_campaign, start_round


def loop_arm(result: ArmResult, case: Case, actor: str, protocol, say: Progress, loop_proposer: str) -> None:
    try:
        proposer: Proposer = make_proposer(loop_proposer)
    except ProposerUnavailable as exc:
        result.status, result.reason = "not_run", f"the {loop_proposer} loop needs an LLM: {exc}"
        return
    # The rounds run here, in this process, rather than as `forge.round` Celery tasks: the task
    # takes no measurement protocol, and every arm of one ablation must be measured on the same
    # machine under the same protocol.
    campaign = start_campaign([case.id], result.backend, loop_proposer, result.budget, actor)
    rounds: list[str] = []
    while len(rounds) < result.budget and (round_id := start_round(campaign, case.id, loop_proposer, actor)) is not None:
        rounds.append(round_id)
        execute_round(round_id, proposer, actor, protocol)
        candidate = _round_candidate(campaign, round_id, len(rounds))
        result.candidates.append(candidate)
        say(candidate)
    result.extra_events = _other_campaign_measurements(campaign, result.candidates)
    result.detail = _loop_detail(campaign, loop_proposer, rounds, result)


def _round_candidate(campaign: str, round_id: str, number: int) -> CandidateResult:
    """A round as the ablation counts it, read back from its events in the ledger."""
    events = {e.type: e.data for e in stream_events(round_stream(campaign, round_id))}
    proposed = events.get("CandidateProposed")
    end = events.get("RoundCommitted") or events.get("RoundReverted")
    if end is None:
        why = (events.get("RoundAbandoned") or {}).get("reason", "the round did not end")
        return CandidateResult("loop", number, f"round {number}", False, "generation_failure", False, detail=why)
    label = f"round {number}: {(proposed or {}).get('subject', '(no proposal)')[:60]}"
    if proposed is None or not end.get("verdict_event"):
        return CandidateResult("loop", number, label, False, end["state"], False, detail=end.get("detail", "")[:200])
    verdict = recorded_event(end["verdict_event"])
    measured = recorded_event(verdict.data["measurement"])
    state, correct, speedup, ci, detail = candidate_speedup(measured.data)
    return CandidateResult("loop", number, label, True, state, correct, speedup, ci, proposed["source_hash"],
                           dict(proposed.get("launch") or {}), [str(measured.event_id), str(verdict.event_id)],
                           f"{detail}; gate: {verdict.data['verdict']}")


def _other_campaign_measurements(campaign: str, candidates: Iterable[CandidateResult]) -> list[str]:
    """Measurements the campaign made beyond its rounds (a branch head measured against the
    main line when the branch is resolved): recorded for provenance, not counted as candidates."""
    known = {e for c in candidates for e in c.events}
    extra = []
    for event in stream_events(f"campaign/{campaign}"):
        verdict_id = event.data.get("verdict_event") if event.type in ("BranchMerged", "BranchDropped") else None
        if verdict_id and verdict_id not in known:
            verdict = recorded_event(verdict_id)
            extra += [verdict.data["measurement"], verdict_id]
            known.update(extra)
    return extra


def _loop_detail(campaign: str, proposer: str, rounds: list[str], result: ArmResult) -> str:
    events = stream_events(f"campaign/{campaign}")
    planned = next((e.data for e in events if e.type == "CasePlanned"), {})
    converged = next((e.data for e in events if e.type == "CaseConverged"), None)
    unmeasured = [c for c in result.candidates if not c.measured]
    parts = [f"campaign {campaign}, proposer {proposer}: {len(rounds)} round(s)"]
    if converged is not None:
        parts.append(f"converged ({converged['reason']}) after {converged['rounds']} round(s)")
    if len(rounds) < result.budget:
        parts.append(f"the loop stopped after {len(rounds)} of the budget of {result.budget} rounds "
                     "(the arm could not use its whole budget)")
    if unmeasured:
        parts.append(f"{len(unmeasured)} round(s) ended without a measurement ({', '.join(sorted({c.state for c in unmeasured}))})")
    if result.extra_events:
        parts.append(f"plus {len(result.extra_events) // 2} re-measurement(s) of a branch head by the branch rule, "
                     "listed in measurement_events but not counted as candidates")
    if planned.get("starts_from"):
        parts.append(f"started from the map's sealed kernel {planned['starts_from'][:12]} of an earlier campaign, "
                     "not from the straightforward kernel")
    if planned.get("borrowed_from"):
        parts.append(f"borrowed the diagnosis of {planned['borrowed_from']}")
    return "; ".join(parts)
