"""What an ablation arm measured (forge/ablation.py): its candidates, its best, and the speedup each
`CandidateMeasured` payload holds, read back from the ledger so that every number of an
`AblationMeasured` event traces to raw samples. Shared by the arms of forge/ablation.py and the
loop arm of forge/ablation_loop.py."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from ledger.models import Event
from ledger.records import RecordedEvent
from measurement.harness.judge import bootstrap_ratio_ci

from .services import ForgeError

@dataclass
class CandidateResult:
    """One unit of an arm's budget: a configuration, a generation or a round."""

    arm: str
    number: int  # 1-based within the arm
    label: str  # e.g. "threads=1", "generation 2: <subject>", "round 3: <subject>"
    measured: bool  # reached the harness (a generation failure did not)
    state: str  # execution state: generation_failure | compilation_failure | runtime_error | mismatch | correct
    correct: bool  # correct, timed, possible and correct in its timed output
    speedup: float | None = None  # over the straightforward kernel of the same measurement
    speedup_ci: tuple[float, float] | None = None
    source_hash: str | None = None
    launch: dict[str, Any] = field(default_factory=dict)
    events: list[str] = field(default_factory=list)  # CandidateMeasured (and GateVerdict) event ids
    detail: str = ""


@dataclass
class ArmResult:
    ablation: str
    case: str
    backend: str
    arm: str
    budget: int
    status: str  # measured | not_run
    reason: str = ""
    candidates: list[CandidateResult] = field(default_factory=list)
    extra_events: list[str] = field(default_factory=list)  # measurements that were not candidates (branch re-measurements)
    detail: str = ""
    event: RecordedEvent | None = None  # the AblationMeasured event

    @property
    def candidates_measured(self) -> int:
        return sum(1 for c in self.candidates if c.measured)

    @property
    def correct_candidates(self) -> int:
        return sum(1 for c in self.candidates if c.correct)

    @property
    def best(self) -> CandidateResult | None:
        correct = [c for c in self.candidates if c.correct and c.speedup is not None]
        return max(correct, key=lambda c: c.speedup) if correct else None


Progress = Callable[[CandidateResult], None]


# ---- what a measurement says about its candidate ---------------------------------------


def candidate_speedup(evidence: dict[str, Any]) -> tuple[str, bool, float | None, tuple[float, float] | None, str]:
    """(state, correct, speedup, 95% CI, detail) of the candidate in a CandidateMeasured payload,
    the speedup over the straightforward kernel timed in the same measurement."""
    variants = {v["name"]: v for v in evidence["variants"]}
    candidate, base = variants.get("candidate"), variants.get("straightforward")
    if candidate is None:
        raise ForgeError("the measurement holds no candidate")
    correctness = candidate["correctness"]
    state = correctness.get("state") or ("correct" if correctness.get("correct") else "mismatch")
    timing = candidate.get("timing")
    if not correctness.get("correct"):
        return state, False, None, None, f"{correctness.get('reason')}: {(correctness.get('detail') or '')[:200]}"
    if timing is None:
        return "runtime_error", False, None, None, "the candidate did not survive timing"
    if timing.get("impossible"):
        return state, False, None, None, "impossible_speed"
    if not timing.get("timed_output_ok"):
        return state, False, None, None, "timed_output_mismatch"
    if base is None or not base.get("timing"):
        return state, False, None, None, "the straightforward kernel was not timed in this measurement"
    speedup = base["timing"]["median"] / timing["median"]
    ci = bootstrap_ratio_ci(base["timing"]["pass_medians"], timing["pass_medians"])
    note = "; noisy measurement" if evidence.get("noisy") else ""
    return state, True, speedup, ci, f"{speedup:.3f}x over straightforward (95% CI {ci[0]:.3f}-{ci[1]:.3f}){note}"


def recorded_event(event_id: str) -> RecordedEvent:
    row = Event.objects.get(event_id=event_id)
    return RecordedEvent.from_body(row.body, row.prev_hash, row.hash)
