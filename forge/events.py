"""Event types owned by the forge (the Kernel Agent): campaigns, rounds, logs, rules, branches,
convergence and the operator map."""
from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import Field

from ledger.event_types import Payload, event_type
from ledger.leases import WorkerIdentity

ExecutionState = Literal["generation_failure", "compilation_failure", "runtime_error", "mismatch", "correct"]


@event_type("CampaignStarted", owner="forge")
class CampaignStarted(Payload):
    campaign: str
    backend: Literal["cpu", "cuda"]
    proposer: str
    cases: list[str]
    rounds_per_case: int = Field(ge=1)
    rulebook_version: int


@event_type("CasePlanned", owner="forge")
class CasePlanned(Payload):
    campaign: str
    case: str
    backend: str
    borrowed_from: Optional[str] = None  # the sealed cell whose diagnosis was borrowed
    borrowed_diagnosis: Optional[str] = None
    starts_from: Optional[str] = None  # source hash of the sealed kernel it starts from


@event_type("RoundStarted", owner="forge")
class RoundStarted(Payload):
    round: str
    campaign: str
    case: str
    backend: str
    number: int = Field(ge=1)
    branch: str = "main"
    parent_hash: str
    proposer: str


@event_type("CandidateProposed", owner="forge")
class CandidateProposed(Payload):
    round: str
    case: str
    source: str
    source_hash: str
    launch: dict[str, Any] = Field(default_factory=dict)
    hypothesis: str
    lever_tags: list[str] = Field(default_factory=list)
    subject: str
    parent_hash: str
    plan: Optional[dict[str, Any]] = None
    usage: dict[str, Any] = Field(default_factory=dict)


class RoundEnd(Payload):
    round: str
    case: str
    state: ExecutionState
    verdict_event: Optional[str] = None
    speedup: Optional[float] = None
    improvement: Optional[float] = None  # relative to the best before the round
    detail: str = ""
    # RoundCommitted: "main" when the gate admitted the candidate; a branch id when the candidate
    # only became the head of the open branch (correct, faster than the head, not admitted).
    line: str = "main"


@event_type("RoundCommitted", owner="forge")
class RoundCommitted(RoundEnd):
    pass


@event_type("RoundReverted", owner="forge")
class RoundReverted(RoundEnd):
    pass


@event_type("RoundAbandoned", owner="forge")
class RoundAbandoned(Payload):
    round: str
    case: str
    reason: str


@event_type("RoundAbandoned", owner="forge", version=2, upcast_from_previous=lambda payload: {**payload, "worker": None})
class RoundAbandonedV2(Payload):
    """Version 2 names the dead worker when the reaper found it (ledger/leases.py); None when the
    round was left open without a lease (abandoned on resume, or written before leases)."""

    round: str
    case: str
    reason: str
    worker: Optional[WorkerIdentity]


@event_type("PerfLogged", owner="forge")
class PerfLogged(Payload):
    round: str
    case: str
    change: str
    state: ExecutionState
    measurement: str  # factual: what was measured
    speedup: Optional[float] = None
    fraction_of_copy: Optional[float] = None


@event_type("IdeaLogged", owner="forge")
class IdeaLogged(Payload):
    round: str
    case: str
    idea: str


@event_type("RuleTriggered", owner="forge")
class RuleTriggered(Payload):
    rule: str
    case: str
    round: str
    detail: str


@event_type("CaseConverged", owner="forge")
class CaseConverged(Payload):
    campaign: str
    case: str
    backend: str
    reason: Literal["improvement_below_threshold", "budget_spent"]
    rounds: int
    best_speedup: Optional[float] = None


@event_type("CellSealed", owner="forge")
class CellSealed(Payload):
    case: str
    backend: str
    diagnosis: str
    winning_lever: Optional[str] = None
    source: str
    launch: dict[str, Any] = Field(default_factory=dict)
    source_hash: str
    verdict_event: Optional[str] = None
    speedup: Optional[float] = None
    fraction_of_copy: Optional[float] = None


@event_type("BranchOpened", owner="forge")
class BranchOpened(Payload):
    """A disruptive rewrite leaves the main line: its rounds build on the branch head until the
    branch is merged (the gate admits its head) or dropped."""

    campaign: str
    case: str
    branch: str
    round: str  # the round whose proposal opened it
    base_hash: str  # source hash of the main-line kernel it left
    reason: str


@event_type("BranchMerged", owner="forge")
class BranchMerged(Payload):
    campaign: str
    case: str
    branch: str
    round: Optional[str] = None  # the round whose gate verdict decided (None: a resolution measurement)
    head_hash: str
    verdict_event: str
    speedup: Optional[float] = None  # the head's speedup over the bound in that verdict
    main_speedup: Optional[float] = None  # the main line's best before the merge
    reason: str


@event_type("BranchDropped", owner="forge")
class BranchDropped(Payload):
    campaign: str
    case: str
    branch: str
    round: Optional[str] = None  # the round whose gate verdict decided (None: nothing to measure)
    head_hash: Optional[str] = None
    verdict_event: Optional[str] = None
    speedup: Optional[float] = None
    main_speedup: Optional[float] = None
    reason: str


@event_type("AblationMeasured", owner="forge")
class AblationMeasured(Payload):
    """One arm of an ablation; the arms of one run share `ablation` and the stream `ablation/<id>`.

    kind "search" (`forge ablation`, docs/forge_ablation.md): synthesis vs search at equal budget,
    arm autotune | oneshot | loop, with the candidate counts and best_* fields.

    kind "protocol" (`ablation protocol`, docs/protocol_ablation.md): a real measurement re-run
    with one requirement of the measurement protocol removed; `arm` names the requirement
    removed, or "control" (nothing removed: the run-to-run noise of the honest protocol).
    `case` is the subject's name (a case id, or an application's name), `subject` its result
    key (operator/<backend>/<case> or app/<architecture>/<name>), `backend` the backend or the
    application's architecture, `budget` 1 (one measurement per arm). honest_value and
    ablated_value are the same quantity (`unit` "x": the speedup the gate would report) with the
    full protocol and with the requirement removed; distortion = ablated / honest - 1.
    """

    ablation: str  # groups the arms of one run
    kind: Literal["search", "protocol"] = "search"
    case: str
    backend: Literal["cpu", "cuda"]
    arm: Literal[
        "autotune", "oneshot", "loop",  # kind search
        "control", "correctness_gate", "symmetric_timing", "all_dataset_headline", "warmup", "cache_flush", "interleaving",  # kind protocol
    ]
    budget: int = Field(ge=1)
    status: Literal["measured", "not_run"]
    reason: str = ""  # why an arm was not run
    candidates_measured: int = 0
    correct_candidates: int = 0
    best_speedup: Optional[float] = None  # best correct candidate over the straightforward kernel, same run
    best_source_hash: Optional[str] = None
    best_launch: dict[str, Any] = Field(default_factory=dict)
    measurement_events: list[str] = Field(default_factory=list)  # events holding the evidence (CandidateMeasured, GateVerdict, AppDatasetMeasured...)
    detail: str = ""
    subject: Optional[str] = None  # protocol: the result key ablated
    honest_value: Optional[float] = None  # protocol: with the full protocol
    honest_ci: Optional[list[float]] = None  # bootstrap 95% CI
    ablated_value: Optional[float] = None  # protocol: with only `arm` removed
    ablated_ci: Optional[list[float]] = None
    distortion: Optional[float] = None  # ablated_value / honest_value - 1
    unit: str = ""


def edge_stream(backend: str, case: str) -> str:
    """The generalisation measurements of one edge case on one backend (EdgeShapeMeasured)."""
    return f"edge/{backend}/{case}"


@event_type("EdgeShapeMeasured", owner="forge")
class EdgeShapeMeasured(Payload):
    """A kernel admitted for a matrix case, gated unchanged on an edge shape of the same type and
    precision that no round targeted (forge/edges.py, issue 16: do forged kernels generalise?).
    The evidence is the gate's own CandidateMeasured and GateVerdict on operator/<backend>/<case>;
    this event says that the verdict is a generalisation measurement and whose kernel it measured."""

    case: str  # the edge case
    backend: Literal["cpu", "cuda"]
    reason: str  # why this shape (the edge file's words)
    borrowed_from: str  # the matrix case whose admitted kernel was measured
    borrowed_verdict: str  # the GateVerdict that admitted that kernel there
    source_hash: str
    verdict_event: str  # the gate's verdict on the edge case
    verdict: Literal["admitted", "rejected"]
    state: ExecutionState
    speedup: Optional[float] = None  # over the edge case's own bound, in that verdict
