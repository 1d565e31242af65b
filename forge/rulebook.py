"""The Kernel Agent's rules, kept as versioned data: shown to proposers and reviewers, and
read by the round engine (which enforces them; proposers only propose).

The decisions that apply them are the pure functions below, called by forge.services and the
campaign projection with values read from the ledger, so each threshold is tested at its edge
(tests/forge/test_rules.py) and mutation-tested (docs/testing.md)."""
from __future__ import annotations

RULEBOOK = {
    "version": 2,
    "rules": [
        {"id": "one_change", "text": "Propose exactly one change per round."},
        {
            "id": "outside_history",
            "text": "After 3 consecutive non-improving rounds the next proposal must come from outside the history.",
            "threshold": 3,
        },
        {
            "id": "branch",
            "text": "Disruptive rewrites go on a branch, whose rounds build on the branch head (a correct candidate "
            "more than 2% faster than the head becomes the head). A branch merges as soon as the gate admits its "
            "head; after 5 rounds without progress, or when the budget is spent, the head is measured against the "
            "main line, merged if the gate admits it, dropped otherwise.",
            "patience": 5,
            "min_gain": 0.02,
        },
        {
            "id": "convergence",
            "text": "A case converges when its last 3 rounds improved it by less than 5% in all, or its round budget is spent.",
            "window": 3,
            "min_improvement": 0.05,
        },
        {
            "id": "map",
            "text": "Consult the operator map once when a case is planned and borrow the nearest sealed cell's "
            "diagnosis, not its code; write the map once, when the case converges.",
        },
    ],
}


def rule(rule_id: str) -> dict:
    return next(r for r in RULEBOOK["rules"] if r["id"] == rule_id)


def as_text() -> str:
    return "\n".join(f"{i}. {r['text']}" for i, r in enumerate(RULEBOOK["rules"], start=1))


def improvement(speedup: float, before: float | None) -> float:
    """An admitted round's relative improvement on the campaign's best (on 1.0x without one)."""
    return speedup / before - 1 if before else speedup - 1


def round_improves(committed: bool, to_branch: bool, gain: float) -> bool:
    """Whether an ended round resets the non-improving streak: committed to a branch (a new head),
    or admitted on the main line with a positive improvement."""
    return committed and (to_branch or gain > 0)


def outside_history_due(streak: int) -> bool:
    """After `threshold` consecutive non-improving rounds the next proposal must leave the history."""
    return streak >= rule("outside_history")["threshold"]


def line_of(verdict: str, execution_state: str, speedup: float | None, branch: str | None,
            head_speedup: float | None) -> str | None:
    """Where a round's candidate goes: "main" (admitted), the open branch's id (a correct candidate
    faster than the branch head, if it has one, by more than min_gain), or None (reverted)."""
    if verdict == "admitted":
        return "main"
    if branch is None or execution_state != "correct" or speedup is None:
        return None
    if head_speedup is None or speedup > head_speedup * (1 + rule("branch")["min_gain"]):
        return branch
    return None


def branch_due(stale: int, rounds: int, budget: int) -> bool:
    """An open branch is measured against the main line after `patience` rounds without progress,
    or when the case's round budget is spent."""
    return stale >= rule("branch")["patience"] or rounds >= budget


def convergence(rounds: int, budget: int, improvements: list[float], has_best: bool) -> str | None:
    """Why a case (with no branch open) converges, or None: its budget is spent, or it has a best
    and its last `window` rounds improved it by less than `min_improvement` in all."""
    window, minimum = rule("convergence")["window"], rule("convergence")["min_improvement"]
    if rounds >= budget:
        return "budget_spent"
    if has_best and len(improvements) >= window and sum(improvements[-window:]) < minimum:
        return "improvement_below_threshold"
    return None
