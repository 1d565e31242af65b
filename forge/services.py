"""The Kernel Agent's loop: campaigns, rounds, rules, convergence and the operator map.

A round: read the rulebook, perf log, idea log, current best and recent subjects; get ONE
change from the proposer; gate it (measurement.services.gate_candidate); commit or revert;
always log the change and its measurement, and the next idea. Every step is an event, so the
loop's whole history is reconstructible from the ledger alone.

A worker runs a round holding the round's lease (ledger/leases.py); when it dies mid-round the
reaper closes the round with RoundAbandoned (`abandon_round`), and the worker's own events expect
the stream's version, so a round never ends twice. Campaigns are driven by forge.runner.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Callable

from django.db import transaction

from ledger import leases
from ledger.errors import ConcurrencyError
from ledger.decide import StillMoving, append_decided
from ledger.services import NewEvent, append, append_many
from measurement.backends.base import Kernel
from measurement.harness.cases import parse_case
from measurement.harness.plan import ProtocolSettings
from measurement.services import gate_candidate, source_hash

from . import rulebook, selectors
from .models import CaseCampaign, RoundRow
from .projections import campaign_key
from .proposers.base import GenerationFailure, Proposer, RoundContext


class ForgeError(Exception):
    pass


ENDED = ("committed", "reverted", "abandoned")
OPEN = ("started", "proposed")


def round_stream(campaign: str, round_id: str) -> str:
    return f"round/{campaign}/{round_id}"


def campaign_stream(campaign: str) -> str:
    return f"campaign/{campaign}"


def decide_on_case(campaign: str, case: str, decide: Callable[[CaseCampaign], list[NewEvent]]) -> list | None:
    """Append what `decide` makes of the case's campaign state (no events: nothing to do) at the
    campaign stream's version read before that state (ledger.decide): branch and convergence events
    rest on it, and two processes settling one case (a worker ending its round, `forge resume`)
    would otherwise both open, merge or converge."""
    try:
        return append_decided(campaign_stream(campaign),
                              lambda: decide(CaseCampaign.objects.get(key=campaign_key(campaign, case))))
    except StillMoving as error:
        raise ForgeError(f"{error} (settling {case}; resume the campaign)") from None


def start_campaign(cases: list[str], backend: str, proposer: str, rounds: int, actor: str) -> str:
    """Record the campaign and plan each case (borrowing the nearest sealed cell's diagnosis)."""
    if rounds < 1:
        raise ForgeError("a campaign needs at least one round per case")
    case_ids = [parse_case(case).id for case in cases]
    campaign = str(uuid.uuid4())
    events = [NewEvent(stream=campaign_stream(campaign), type="CampaignStarted", actor=actor, payload={
        "campaign": campaign, "backend": backend, "proposer": proposer, "cases": case_ids,
        "rounds_per_case": rounds, "rulebook_version": rulebook.RULEBOOK["version"]})]
    for case in case_ids:
        cell = selectors.nearest_cell(case, backend)
        own = selectors.map_cell(case, backend)
        events.append(NewEvent(stream=campaign_stream(campaign), type="CasePlanned", actor=actor, payload={
            "campaign": campaign, "case": case, "backend": backend,
            "borrowed_from": cell.key if cell else None,
            "borrowed_diagnosis": cell.diagnosis if cell else None,
            "starts_from": own.source_hash if own else None}))
    append_many(events)
    return campaign


def start_round(campaign: str, case: str, proposer_name: str, actor: str) -> str | None:
    """Open the next round of a case, or None when the case has converged.

    First settles what a dead worker may have left undone after the last round ended (a due
    branch resolution, convergence)."""
    settle(campaign, case, actor)
    state = CaseCampaign.objects.get(key=campaign_key(campaign, case))
    if state.converged:
        return None
    round_id = str(uuid.uuid4())
    kernel, _ = current_kernel(state)
    append(NewEvent(stream=round_stream(campaign, round_id), type="RoundStarted", actor=actor, expected_version=0, payload={
        "round": round_id, "campaign": campaign, "case": case, "backend": state.backend,
        "number": state.rounds + 1, "branch": state.branch["id"] if state.branch else "main",
        "parent_hash": source_hash(kernel.source), "proposer": proposer_name}))
    return round_id


def current_kernel(state: CaseCampaign) -> tuple[Kernel, dict | None]:
    """The kernel the next change applies to: the open branch's head, the campaign's best, the
    sealed cell, or the straightforward one (a branch without a head builds on the main line)."""
    head = (state.branch or {}).get("head")
    if head:
        return Kernel(head["source"], head["launch"]), head.get("plan")
    return main_line_kernel(state)


def main_line_kernel(state: CaseCampaign) -> tuple[Kernel, dict | None]:
    if state.best:
        return Kernel(state.best["source"], state.best["launch"]), state.best.get("plan")
    cell = selectors.map_cell(state.case, state.backend)
    if cell is not None:
        return Kernel(cell.source, cell.launch), None
    return selectors.straightforward_kernel(state.case, state.backend), None


@dataclass
class RoundOutcome:
    round: str
    status: str
    state: str
    speedup: float | None
    detail: str


def round_outcome(row: RoundRow) -> RoundOutcome:
    return RoundOutcome(row.round, row.status, row.state, row.speedup, row.detail)


def execute_round(round_id: str, proposer: Proposer, actor: str, protocol: ProtocolSettings | None = None) -> RoundOutcome:
    """Run a started round to its end, holding its lease. Idempotent: an ended round is returned
    as it ended, and one that another live worker runs as it stands (a redelivered task)."""
    row = RoundRow.objects.get(round=round_id)
    if row.status in ENDED:
        return round_outcome(row)
    stream = round_stream(row.campaign, round_id)
    try:
        lease = leases.take("round", round_id, stream)
    except leases.LeaseHeld:
        return round_outcome(row)
    with leases.holding(lease):
        row.refresh_from_db()
        if row.status == "proposed":
            raise ForgeError(f"round {round_id} was proposed but never ended (its worker died): resume the campaign to abandon it")
        if row.status != "started":
            return round_outcome(row)
        try:
            return _run_round(row, stream, proposer, actor, protocol)
        except ConcurrencyError:  # the reaper closed the round meanwhile (the heartbeats were late)
            row.refresh_from_db()
            return round_outcome(row)


def _run_round(row: RoundRow, stream: str, proposer: Proposer, actor: str, protocol: ProtocolSettings | None) -> RoundOutcome:
    round_id = row.round
    state = CaseCampaign.objects.get(key=campaign_key(row.campaign, row.case))
    kernel, plan = current_kernel(state)
    context = RoundContext(
        case_id=row.case, backend=row.backend, rulebook=rulebook.as_text(),
        perf_log=selectors.perf_log(row.case), idea_log=selectors.idea_log(row.case),
        current_source=kernel.source, current_launch=kernel.launch,
        profile=selectors.profile(state), borrowed_diagnosis=state.borrowed_diagnosis or None,
        recent_subjects=selectors.recent_subjects(row.campaign, row.case),
        must_leave_history=state.must_leave_history, current_plan=plan, on_branch=bool(state.branch),
    )
    try:
        proposal = proposer.propose(context)
    except GenerationFailure as failure:
        return _end_round(row, stream, 1, actor, "generation_failure", None, None,
                          f"generation failure ({failure.kind}): {failure.message}",
                          change="(no proposal)", idea=None, line=None, protocol=protocol)
    if proposal.disruptive and not state.branch:
        decide_on_case(row.campaign, row.case, lambda now: [] if now.branch else [NewEvent(
            stream=campaign_stream(row.campaign), type="BranchOpened", actor=actor, payload={
                "campaign": row.campaign, "case": row.case, "branch": f"branch-{round_id[:8]}", "round": round_id,
                "base_hash": source_hash(kernel.source), "reason": f"disruptive rewrite: {proposal.subject}"})])
        state.refresh_from_db()
    append(NewEvent(stream=stream, type="CandidateProposed", actor=actor, expected_version=1, payload={
        "round": round_id, "case": row.case, "source": proposal.source, "source_hash": source_hash(proposal.source),
        "launch": proposal.launch, "hypothesis": proposal.hypothesis, "lever_tags": list(proposal.lever_tags),
        "subject": proposal.subject, "parent_hash": source_hash(kernel.source), "plan": proposal.plan, "usage": proposal.usage}))
    outcome = gate_candidate(row.case, row.backend, Kernel(proposal.source, proposal.launch), actor, proposal.hypothesis, protocol)
    verdict = outcome.verdict_event.data
    before = (state.best or {}).get("speedup")
    improvement = None
    if outcome.verdict == "admitted" and outcome.speedup is not None:
        improvement = rulebook.improvement(outcome.speedup, before)
    return _end_round(row, stream, 2, actor, verdict["state"], outcome, improvement, outcome.detail,
                      change=proposal.subject, idea=proposal.hypothesis, line=_line(state, outcome, verdict["state"]),
                      fraction=verdict["fraction_of_copy"], protocol=protocol)


def _line(state: CaseCampaign, outcome, execution_state: str) -> str | None:
    """Where the round's candidate goes (rulebook.line_of)."""
    head = (state.branch or {}).get("head")
    return rulebook.line_of(outcome.verdict, execution_state, outcome.speedup, state.branch["id"] if state.branch else None,
                            head["speedup"] if head else None)


def _end_round(row: RoundRow, stream: str, version: int, actor: str, state: str, outcome, improvement: float | None,
               detail: str, change: str, idea: str | None, line: str | None, protocol: ProtocolSettings | None,
               fraction: float | None = None) -> RoundOutcome:
    committed = line is not None
    speedup = outcome.speedup if outcome is not None else None
    verdict_id = str(outcome.verdict_event.event_id) if outcome is not None else None
    verdict_word = "admitted" if line == "main" else "rejected: " + ", ".join(outcome.reasons) if outcome is not None else ""
    if line not in (None, "main"):
        verdict_word += f"; kept as the head of {line}"
    measured = detail if outcome is None else f"{state}; {verdict_word}; {detail}"
    events = [
        NewEvent(stream=stream, type="RoundCommitted" if committed else "RoundReverted", actor=actor, expected_version=version,
                 payload={
            "round": row.round, "case": row.case, "state": state, "verdict_event": verdict_id,
            "speedup": speedup, "improvement": improvement, "detail": detail, "line": line or "main"}),
        NewEvent(stream=stream, type="PerfLogged", actor=actor, payload={
            "round": row.round, "case": row.case, "change": change, "state": state, "measurement": measured,
            "speedup": speedup, "fraction_of_copy": fraction}),
    ]
    if idea:
        events.append(NewEvent(stream=stream, type="IdeaLogged", actor=actor, payload={"round": row.round, "case": row.case, "idea": idea}))
    with transaction.atomic():
        append_many(events)
        _apply_streak_rule(row, stream, actor)
    if line == "main" and outcome is not None:
        _merge_if_branch_open(row, outcome, actor)
    settle(row.campaign, row.case, actor, protocol)
    status = "committed" if committed else "reverted"
    return RoundOutcome(row.round, status, state, speedup, detail)


def _apply_streak_rule(row: RoundRow, stream: str, actor: str) -> None:
    state = CaseCampaign.objects.get(key=campaign_key(row.campaign, row.case))
    if rulebook.outside_history_due(state.streak):
        append(NewEvent(stream=stream, type="RuleTriggered", actor=actor, payload={
            "rule": "outside_history", "case": row.case, "round": row.round,
            "detail": f"{state.streak} consecutive non-improving rounds: the next proposal must come from outside the history"}))


def _merge_if_branch_open(row: RoundRow, outcome, actor: str) -> None:
    """The gate admitted a round made on a branch: the branch merges with that round."""
    decide_on_case(row.campaign, row.case, lambda state: [] if not state.branch else [NewEvent(
        stream=campaign_stream(row.campaign), type="BranchMerged", actor=actor, payload={
            "campaign": row.campaign, "case": row.case, "branch": state.branch["id"], "round": row.round,
            "head_hash": state.best["hash"], "verdict_event": str(outcome.verdict_event.event_id),
            "speedup": outcome.speedup, "main_speedup": None,
            "reason": "the gate admitted a round made on the branch"})])


def settle(campaign: str, case: str, actor: str, protocol: ProtocolSettings | None = None) -> None:
    """After a round (or on resume): resolve a branch that is due, then decide convergence.

    A branch is due after `patience` rounds without progress, or when the budget is spent; a
    case never converges with a branch open. Idempotent: a second call finds nothing due."""
    state = CaseCampaign.objects.get(key=campaign_key(campaign, case))
    if state.converged:
        return
    if state.branch and rulebook.branch_due(state.branch["stale"], state.rounds, state.budget):
        resolve_branch(state, actor, protocol)
        state.refresh_from_db()
    if state.branch:
        return
    if rulebook.convergence(state.rounds, state.budget, state.improvements, bool(state.best)):
        _converge(campaign, case, actor)


def resolve_branch(state: CaseCampaign, actor: str, protocol: ProtocolSettings | None = None) -> str:
    """Measure the branch head against the main line through the gate: merged if admitted,
    dropped otherwise (and dropped without a measurement when the branch has no correct head).
    Recorded only while the branch read is still open with the same head (decide_on_case):
    "resolved elsewhere" when another process resolved it meanwhile, or moved its head."""
    branch, head = state.branch, state.branch.get("head")
    main_speedup = (state.best or {}).get("speedup")
    common = {"campaign": state.campaign, "case": state.case, "branch": branch["id"], "main_speedup": main_speedup}

    def record(event_type: str, payload: dict[str, Any]) -> str:
        def decide(now: CaseCampaign) -> list[NewEvent]:
            same = now.branch and now.branch["id"] == branch["id"] and now.branch.get("head") == head
            return [NewEvent(stream=campaign_stream(state.campaign), type=event_type, actor=actor,
                             payload={**common, **payload})] if same else []

        recorded = decide_on_case(state.campaign, state.case, decide)
        return "resolved elsewhere" if recorded is None else "merged" if event_type == "BranchMerged" else "dropped"

    if head is None:
        return record("BranchDropped", {"reason": f"no correct kernel on the branch after {branch['stale']} rounds"})
    outcome = gate_candidate(state.case, state.backend, Kernel(head["source"], head["launch"]), actor,
                             f"head of {branch['id']} measured against the main line", protocol)
    evidence = {"head_hash": head["hash"], "verdict_event": str(outcome.verdict_event.event_id),
                "speedup": outcome.speedup}
    if outcome.verdict == "admitted":
        return record("BranchMerged", {**evidence, "reason": f"the gate admitted the head ({outcome.detail})"})
    return record("BranchDropped", {
        **evidence, "reason": f"the gate rejected the head: {', '.join(outcome.reasons)} ({outcome.detail})"})


def _converge(campaign: str, case: str, actor: str) -> None:
    """Record convergence and seal the map cell, if the case (read again) is still due to converge."""
    from .levers import diagnose

    def decide(state: CaseCampaign) -> list[NewEvent]:
        reason = rulebook.convergence(state.rounds, state.budget, state.improvements, bool(state.best))
        if state.converged or state.branch or not reason:
            return []
        best = state.best
        events = [NewEvent(stream=campaign_stream(state.campaign), type="CaseConverged", actor=actor, payload={
            "campaign": state.campaign, "case": state.case, "backend": state.backend, "reason": reason,
            "rounds": state.rounds, "best_speedup": best["speedup"] if best else None})]
        if best:
            fraction = selectors.verdict_fraction(best["verdict"])
            events.append(NewEvent(stream=f"map/{state.backend}/{state.case}", type="CellSealed", actor=actor, payload={
                "case": state.case, "backend": state.backend,
                "diagnosis": diagnose(parse_case(state.case), fraction, None),
                "winning_lever": ",".join(best.get("tags") or []) or None, "source": best["source"],
                "launch": best["launch"], "source_hash": best["hash"], "verdict_event": best["verdict"],
                "speedup": best["speedup"], "fraction_of_copy": fraction}))
        return events

    decide_on_case(campaign, case, decide)


def abandon_round(round_id: str, reason: str, worker: dict[str, Any] | None, *, actor: str = leases.REAPER) -> bool:
    """Close an open round whose worker is gone (the reaper's handler for lease kind "round").
    Appends at the version read: a round that ends meanwhile is read again and left as it ended."""
    row = RoundRow.objects.filter(round=round_id).first()
    if row is None:
        return False
    return leases.append_while_open(
        round_stream(row.campaign, round_id), RoundRow.objects.filter(round=round_id, status__in=OPEN).exists,
        "RoundAbandoned", {"round": round_id, "case": row.case, "reason": reason, "worker": worker}, actor=actor)


def abandon_stale_rounds(campaign: str, actor: str) -> int:
    """Close every open round of the campaign no live worker holds: the dead ones' leases are
    reaped (naming the worker), rounds that never got a lease are abandoned here. ForgeError
    when a live worker still runs one: resuming then would run the case twice at once."""
    rounds = list(RoundRow.objects.filter(campaign=campaign, status__in=OPEN).order_by("position"))
    streams = [round_stream(campaign, r.round) for r in rounds]
    reaped = {item.subject for item in leases.reap(keys=streams) if item.closed}
    for row, stream in zip(rounds, streams):
        held = leases.is_held(stream)
        if held is not None:
            raise ForgeError(f"round {row.number} of {row.case} is still running on {held.host} pid {held.pid} "
                             f"(heartbeat {held.heartbeat_at.isoformat()}): wait for it, or stop that worker first")
    closed = [r for r in rounds if abandon_round(  # False for those the reaper just closed
        r.round, f"its worker stopped while the round was {r.status}; no live worker holds it", None, actor=actor)]
    return len(reaped) + len(closed)
