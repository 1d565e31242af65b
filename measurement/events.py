"""Event types owned by the measurement app: case definitions, measurements and gate verdicts."""
from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import Field

from ledger.event_types import Payload, event_type

# A gate run admits or rejects; a re-run (`revises` set) reconfirms, revises, or is inconclusive:
# noisy, or its CI spans the public bound, so it changes nothing (measurement.reruns).
Verdict = Literal["admitted", "rejected", "reconfirmed", "revised", "inconclusive"]
State = Literal["generation_failure", "compilation_failure", "runtime_error", "mismatch", "correct"]


@event_type("CaseDefined", owner="measurement")
class CaseDefined(Payload):
    case: str
    matrix: str
    type: str
    shape: list[int]
    precision: Literal["f16", "f32", "f64"]
    dims: int
    radius: int
    time_steps: int
    variable_coefficient: bool
    coefficient_classes: list[list[int]]
    coefficients: list[float]
    compulsory_bytes: int
    flops: int


class VariantEvidence(Payload):
    name: str
    role: Literal["candidate", "baseline", "prior_best"]
    precision: str
    source_hash: Optional[str] = None
    source: Optional[str] = None
    launch: dict[str, Any] = Field(default_factory=dict)
    correctness: dict[str, Any]
    timing: Optional[dict[str, Any]] = None


class MeasurementEvidence(Payload):
    case: str
    backend: str
    description: dict[str, Any]
    environment: dict[str, Any]
    harness_version: str
    protocol: dict[str, Any]
    seeds: dict[str, int]
    copy_bandwidth: Optional[float] = None
    launch_overhead: Optional[float] = None
    variants: list[VariantEvidence]
    bound: Optional[dict[str, Any]] = None
    attempts: list[dict[str, Any]] = Field(default_factory=list)
    noisy: bool = False


@event_type("CandidateMeasured", owner="measurement")
class CandidateMeasured(MeasurementEvidence):
    hypothesis: str = ""


@event_type("BaselinesMeasured", owner="measurement")
class BaselinesMeasured(MeasurementEvidence):
    pass


# v2: every variant names what exactly ran (library and version, schedule, a composed bound's
# parts), so a verdict's bound is identified beyond its name (issue 15). Older evidence had none.
class VariantEvidenceV2(VariantEvidence):
    identity: dict[str, Any] = Field(default_factory=dict)


class MeasurementEvidenceV2(MeasurementEvidence):
    variants: list[VariantEvidenceV2]


def _variants_without_identity(payload: dict[str, Any]) -> dict[str, Any]:
    return {**payload, "variants": [{**variant, "identity": {}} for variant in payload["variants"]]}


@event_type("CandidateMeasured", owner="measurement", version=2, upcast_from_previous=_variants_without_identity)
class CandidateMeasuredV2(MeasurementEvidenceV2):
    hypothesis: str = ""


@event_type("BaselinesMeasured", owner="measurement", version=2, upcast_from_previous=_variants_without_identity)
class BaselinesMeasuredV2(MeasurementEvidenceV2):
    pass


@event_type("GateVerdict", owner="measurement")
class GateVerdict(Payload):
    result: str
    case: str
    backend: str
    verdict: Verdict
    state: State
    reasons: list[str]
    detail: str = ""  # an inconclusive re-run's starts with why ("noisy: spread 7.4%, CI 0.308–0.764; …")
    measurement: str  # event id of the CandidateMeasured event holding the evidence
    candidate_source_hash: str
    candidate_source: str
    candidate_launch: dict[str, Any] = Field(default_factory=dict)
    candidate_median: Optional[float] = None
    fraction_of_copy: Optional[float] = None
    speedup: Optional[float] = None
    speedup_ci: Optional[list[float]] = None
    bound: Optional[dict[str, Any]] = None
    same_precision: Optional[bool] = None
    prior_best: Optional[dict[str, Any]] = None
    revises: Optional[str] = None


@event_type("GateVerdict", owner="measurement", version=2,
            upcast_from_previous=lambda payload: {**payload, "baselines": None})
class GateVerdictV2(GateVerdict):
    # v2: every public baseline of the measurement with the candidate's speedup over it, and
    # the bound with its identity and label (issue 15); v1 verdicts name only the bound
    baselines: Optional[dict[str, dict[str, Any]]] = None
    # a re-run's baselines out of contention, neither checked nor timed (measurement.contenders)
    left_out: list[str] = Field(default_factory=list)


def tuning_stream(backend: str, case_id: str) -> str:
    """The tuning runs of one case's library baselines on one backend (BaselineTuned)."""
    return f"tuning/{backend}/{case_id}"


class ScheduleCandidate(Payload):
    name: str
    text: str  # the family's schedule text (an autoscheduler entry: its directive)
    correct: bool  # passed the gate's checks and its timed launches' outputs were right
    error: Optional[str] = None  # why it cannot be chosen: the failed check, crash or timing
    median: Optional[float] = None  # seconds, the canonical protocol's median
    spread: Optional[float] = None
    pass_medians: list[float] = Field(default_factory=list)


@event_type("BaselineTuned", owner="measurement")
class BaselineTuned(Payload):
    """A tuning run of a library baseline (measurement.tuning): every schedule of the library's
    family checked and timed on the case; the fastest correct one is the library's schedule
    in every later measurement of the case on the backend, until the next tuning run."""

    case: str
    backend: Literal["cpu", "cuda"]
    library: str
    version: str  # the library's version where the candidates ran
    candidates: list[ScheduleCandidate]
    chosen: Optional[str] = None  # None: no candidate was correct; measurements use the default
    chosen_text: Optional[str] = None
    protocol: dict[str, Any]
    seeds: dict[str, int]


def matrix_rerun_stream(backend: str) -> str:
    """The whole-matrix re-runs of one backend (MatrixRerunFinished)."""
    return f"rerun-matrix/{backend}"


@event_type("MatrixRerunFinished", owner="measurement")
class MatrixRerunFinished(Payload):
    """One run of measurement.reruns.rerun_all as a unit: how long the re-run of the standing
    results took in one process, and how far it got before its deadline. Each case's verdict
    records only its own end, so no sum of them says what a device call spent (issue 16's
    whole-matrix target: 300 s)."""

    backend: Literal["cpu", "cuda"]
    whole: bool  # every standing result was to be re-run (no `only`)
    standing: int  # the standing results it was to re-run
    cases: list[str]  # the ones it re-ran, in order
    not_run: list[str]  # left out by the deadline
    counts: dict[str, int]  # rerun_counts of the outcomes
    wall_seconds: float
    deadline: Optional[float] = None
