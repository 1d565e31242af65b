"""The Kernel Agent's rules, kept as versioned data: shown to proposers and reviewers, and
read by the round engine (which enforces them; proposers only propose)."""
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
