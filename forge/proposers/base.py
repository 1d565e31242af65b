"""What every proposer sees and returns.

A proposer proposes ONE change to the current kernel per round and never judges it: the gate
compiles, checks and measures the proposal. A proposer that cannot produce a usable proposal
(malformed reply, API error after retries, timeout) raises GenerationFailure, which the round
records as its "generation failure" execution state.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class RoundContext:
    """Everything a proposer is told about one round of one case."""

    case_id: str  # e.g. "star_1/512x512x512/f32"
    backend: str  # "cpu" | "cuda"
    rulebook: str  # the text of the rules
    perf_log: list[str]  # recent factual entries (what was measured)
    idea_log: list[str]  # ideas tried or noted
    current_source: str  # the kernel the change applies to
    current_launch: dict[str, Any]
    profile: dict[str, Any]  # achieved bandwidth fraction, gflops, registers/spills, occupancy: whatever is known
    borrowed_diagnosis: str | None = None
    recent_subjects: list[str] = field(default_factory=list)
    # The 3-non-improving rule fired: the proposal must come from outside the history.
    must_leave_history: bool = False
    # The structured parameters of the current kernel, when a generator (the levers proposer) made it.
    current_plan: dict[str, Any] | None = None
    # A branch is open: the change builds on the branch head, and opens no second branch.
    on_branch: bool = False


@dataclass(frozen=True)
class Proposal:
    source: str  # the full kernel source
    launch: dict[str, Any]
    hypothesis: str
    lever_tags: tuple[str, ...]
    subject: str  # one line
    usage: dict[str, Any]  # model id, input_tokens, output_tokens, ...
    raw: str = ""  # the raw model text, for the record
    plan: dict[str, Any] | None = None  # the generator parameters of `source`, when it was generated
    # A rewrite of the kernel's structure rather than a tuning step: on the main line it opens a
    # branch (rulebook rule "branch"), so later rounds can build on it before it must beat the bound.
    disruptive: bool = False


class ProposerUnavailable(RuntimeError):
    """The proposer cannot be used at all (e.g. no API key configured); raised at construction."""


class GenerationFailure(Exception):
    """No usable proposal this round.

    `usage` holds what the attempt cost (tokens, model id; zeros where the API never answered),
    `raw` the model's reply text if there was one, `kind` a short category:
    "malformed", "truncated", "refusal", "timeout", "connection", "api_error".
    """

    def __init__(self, message: str, *, usage: dict[str, Any] | None = None, raw: str = "", kind: str = "malformed"):
        super().__init__(message)
        self.message = message
        self.usage: dict[str, Any] = dict(usage or {})
        self.raw = raw
        self.kind = kind


@runtime_checkable
class Proposer(Protocol):
    name: str

    def propose(self, context: RoundContext) -> Proposal:
        """One proposal for this round, or GenerationFailure."""
        ...
