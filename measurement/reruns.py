"""Gate re-runs of admitted operator results: one case, or every standing result of a backend.

A re-run measures the admitted kernel again and revises its result only on conclusive evidence
(the rules are pure functions in measurement.decisions: rerun_verdict, revision):

- a failed check (wrong output, crash, compile error, wrong timed output) retracts it, noisy
  timing or not: noise cannot make an output wrong;
- otherwise a noisy measurement (`MeasurementReport.noisy`: the pass spread of what the verdict
  compares stayed above the regression band through every attempt) is `inconclusive`, and so is
  a speedup CI that spans 1 (the public bound): neither shows the result no longer holds, and a
  noisy shared CPU once retracted star_1/64x64x64/f32 at 0.471x, CI 0.308-0.764 (issue 14);
- a CI wholly below 1, or a speed under the physics floor in a quiet measurement, retracts it;
  an upper CI end below the standing speedup less the regression band downgrades it.

An inconclusive re-run records its verdict (GateVerdict `inconclusive`, the detail saying why
first) and changes no status: the result stays signable and can be re-run later.

A re-run times the baselines still in contention: one that lost to the bound by 3x or more in
the standing measurement is left out where the same library is installed (measurement.contenders
says why and how it is recorded).

A whole-matrix re-run can first tune a library baseline on each case (rerun_all's `tune`,
measurement.tuning), so the case is re-gated against that library's fastest correct schedule
on this machine; a case whose tuning fails is re-gated against the schedule it had (the
family's default unless an earlier tuning run chose one), and its outcome says so.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from django.db import transaction

from ledger.decide import DECIDE_TRIES
from ledger.errors import ConcurrencyError
from ledger.records import RecordedEvent
from ledger.selectors import stream_version
from ledger.services import NewEvent, append
from measurement.backends.base import Kernel
from measurement.harness.cases import CaseError, parse_case
from measurement.harness.plan import ProtocolSettings

from . import selectors, services
from .contenders import carried, out_of_contention
from .decisions import kept_spread, rerun_verdict, revision
from .events import matrix_rerun_stream
from .models import OperatorResult
from .reports import MeasurementReport
from .services import GateOutcome, MeasurementError, result_key
from .tuning import tune_baseline


def _decide(report: MeasurementReport, reasons: list[str], ci: tuple[float, float] | None, *,
            standing: float | None) -> tuple[str, str]:
    return rerun_verdict(reasons, ci, kept_spread(report.attempts, report.noisy), standing)


def rerun_gate(case_id: str, backend: str, actor: str, protocol: ProtocolSettings | None = None, progress=None) -> tuple[GateOutcome, Any]:
    """Re-run the gate on the admitted kernel; retract or downgrade when the result conclusively
    no longer holds (module docstring). Returns the verdict and the revision event, if any.

    The verdict and its revision are one append at the result stream's version read with the
    standing result (style rule 5): when it moved on during the measurement, the re-run decides
    again from the same measurement if the same kernel still stands (a downgrade or sign-off
    meanwhile), measures the new one if another was admitted, and stops if it was retracted."""
    key = result_key(backend, parse_case(case_id).id)  # an alias: CaseError naming the canonical id
    report: MeasurementReport | None = None
    for _ in range(DECIDE_TRIES):
        version = stream_version(key)  # before the result: a revision between the two fails the append
        current = selectors.operator_result(key)
        if current is None or current.status == "retracted":
            status = current.status if current else "none"
            raise MeasurementError(f"{key} has no admitted kernel to re-run (status: {status})")
        kernel = Kernel(current.source, current.launch)
        if report is None or report.variants["candidate"].variant.kernel != kernel:
            report = services.measure(case_id, backend, kernel, None, protocol, progress,
                                      leave_out=out_of_contention(current.baselines, current.bound))
        try:
            with transaction.atomic():  # the verdict and its revision, or neither
                return _record(report, key, current, actor, version)
        except ConcurrencyError:
            continue
    raise MeasurementError(
        f"{key} changed {DECIDE_TRIES} times while this re-run was being recorded: re-run it again")


def _record(report: MeasurementReport, key: str, current: OperatorResult, actor: str,
            version: int) -> tuple[GateOutcome, Any]:
    outcome = services.record_verdict(report, key, actor, "gate re-run of the admitted kernel",
                                      revises=current.verdict_event, decide=partial(_decide, standing=current.speedup),
                                      expected_version=version)
    was = {"speedup": current.speedup, "speedup_ci": current.speedup_ci, "bound": current.bound,
           "baselines": current.baselines}
    verdict = outcome.verdict_event.payload
    carried_entries = carried(current.baselines, report.left_out)
    measured = {"speedup": outcome.speedup, "speedup_ci": verdict["speedup_ci"], "bound": verdict["bound"],
                "baselines": {**carried_entries, **verdict["baselines"]}}
    common = {"result": key, "rerun": str(outcome.verdict_event.event_id), "revises": current.verdict_event,
              "was": was, "measured": measured}
    after = outcome.verdict_event.version
    kind = revision(outcome.verdict, outcome.speedup_ci, current.speedup)
    if kind == "ResultRetracted":
        return outcome, append(NewEvent(stream=key, type=kind, actor=actor, expected_version=after, payload={
            **common, "reason": f"gate re-run: {', '.join(outcome.reasons)}: {history_line(was, measured, outcome.detail)}"}))
    if kind == "ResultDowngraded":
        return outcome, append(NewEvent(stream=key, type=kind, actor=actor, expected_version=after, payload={
            **common, "from_value": current.speedup, "to_value": outcome.speedup, "unit": "x",
            "reason": f"gate re-run: {history_line(was, measured, outcome.detail)}"}))
    return outcome, None


def history_line(was: dict[str, Any], measured: dict[str, Any], detail: str) -> str:
    """What a revision changed, bound by bound: "was 1.850x over pystencils 2.0; 0.770x over
    composed(star_1 admitted x8) (95% CI ...)". A re-run that timed nothing has only its detail."""
    if measured["speedup"] is None:
        return detail
    ci = measured["speedup_ci"]
    return (f"was {standing_text(was)}; {measured['speedup']:.3f}x over {bound_name(measured['bound'])}"
            + (f" (95% CI {ci[0]:.3f}-{ci[1]:.3f})" if ci else ""))


def standing_text(standing: dict[str, Any]) -> str:
    speedup = standing.get("speedup")
    return f"{speedup:.3f}x over {bound_name(standing.get('bound'))}" if speedup is not None else "not timed"


def bound_name(bound: dict[str, Any] | None) -> str:
    """A recorded bound's label; bounds recorded before labels existed (verdict v1) have only a name."""
    if not bound:
        return "no bound"
    return bound.get("label") or bound.get("name", "?")


@dataclass
class TuningOutcome:
    """A case's tuning run before its re-run (rerun_all's `tune`): what it chose, or why it did not."""

    library: str
    seconds: float
    chosen: str | None = None  # None: no correct schedule, or the run failed (`error`)
    median: float | None = None  # the chosen schedule's, seconds
    correct: int = 0
    candidates: int = 0
    error: str | None = None  # the tuning run failed (MeasurementError): nothing was recorded
    measured: str | None = None  # the schedule the re-run then measured (its identity), if it ran the library

    @classmethod
    def of(cls, payload: dict[str, Any], seconds: float) -> "TuningOutcome":
        """From a BaselineTuned payload."""
        chosen = next((c for c in payload["candidates"] if c["name"] == payload["chosen"]), None)
        return cls(payload["library"], seconds, payload["chosen"], chosen["median"] if chosen else None,
                   sum(c["correct"] for c in payload["candidates"]), len(payload["candidates"]))

    @property
    def outcome(self) -> str:
        """tuned | no_correct_schedule | failed: the tuning counts of a re-run summary."""
        return "failed" if self.error is not None else "tuned" if self.chosen else "no_correct_schedule"

    def text(self) -> str:
        then = f", re-run with {self.measured}" if self.measured else ""
        if self.error is not None:
            return f"{self.library} not tuned ({self.error}){then}"
        if self.chosen is None:
            return f"{self.library}: no correct schedule of {self.candidates}{then}"
        return (f"{self.library} tuned: {self.chosen} {self.median * 1e3:.3f} ms, {self.correct} of {self.candidates} "
                f"schedules correct [{self.seconds:.1f} s]")


@dataclass
class RerunOutcome:
    """One case of a whole-matrix re-run: what stood before, what the re-run found, how long it took."""

    case: str
    admitted_speedup: float | None  # the standing speedup it re-checked (after any earlier downgrade)
    seconds: float  # the whole case's, its tuning run included
    verdict: str | None = None  # reconfirmed | revised | inconclusive; None when the re-run failed
    speedup: float | None = None
    speedup_ci: tuple[float, float] | None = None
    reasons: list[str] = field(default_factory=list)
    revision: str | None = None  # ResultRetracted | ResultDowngraded | None
    inconclusive: str = ""  # why, when the verdict is inconclusive
    error: str | None = None
    tuning: TuningOutcome | None = None  # with rerun_all's `tune`
    left_out: list[str] = field(default_factory=list)  # baselines out of contention, not timed (contenders)

    @property
    def outcome(self) -> str:
        """reconfirmed | downgraded | retracted | inconclusive | failed: the counts of a re-run summary."""
        if self.error is not None:
            return "failed"
        if self.verdict == "inconclusive":
            return "inconclusive"
        return {"ResultRetracted": "retracted", "ResultDowngraded": "downgraded"}.get(self.revision or "", "reconfirmed")

    def line(self) -> str:
        tuned = f"{self.tuning.text()}; " if self.tuning is not None else ""
        if self.error is not None:
            return f"{self.case}: {tuned}FAILED ({self.error}) [{self.seconds:.1f} s]"
        speed = f"{self.speedup:.3f}x" if self.speedup is not None else "-"
        ci = f" (CI {self.speedup_ci[0]:.3f}-{self.speedup_ci[1]:.3f})" if self.speedup_ci else ""
        was = f"{self.admitted_speedup:.3f}x" if self.admitted_speedup is not None else "-"
        why = f" [{', '.join(self.reasons)}]" if self.reasons else ""
        verdict = f"inconclusive ({self.inconclusive})" if self.inconclusive else self.verdict
        left_out = f"; left out: {', '.join(self.left_out)}" if self.left_out else ""
        return (f"{self.case}: {tuned}{verdict}{why} {speed}{ci} (was {was}); "
                f"{self.revision or 'no revision'}{left_out} [{self.seconds:.1f} s]")


def rerun_counts(outcomes: list[RerunOutcome]) -> dict[str, int]:
    counts = dict.fromkeys(("reconfirmed", "downgraded", "retracted", "inconclusive", "failed"), 0)
    for outcome in outcomes:
        counts[outcome.outcome] += 1
    return counts


def tuning_counts(outcomes: list[RerunOutcome]) -> dict[str, int]:
    counts = dict.fromkeys(("tuned", "no_correct_schedule", "failed"), 0)
    for outcome in outcomes:
        if outcome.tuning is not None:
            counts[outcome.tuning.outcome] += 1
    return counts


def past_deadline(deadline: float | None, elapsed: float, durations: list[float]) -> bool:
    """Whether the next item of a device call's loop (a case, a round, an edge) is expected to end
    after `deadline` (seconds from the start): 1.2x the slowest item so far. A device call has a
    hard limit, and an item cut there leaves nothing; with no item timed yet, the first starts."""
    return bool(deadline) and bool(durations) and elapsed + 1.2 * max(durations) > deadline


def rerun_all(backend: str, actor: str, protocol: ProtocolSettings | None = None,
              progress: Callable[[RerunOutcome], None] | None = None,
              deadline: float | None = None, tune: str | None = None,
              only: set[str] | None = None) -> list[RerunOutcome]:
    """Re-run the gate on every standing operator result of `backend`, in case order.

    A whole-matrix re-run is how a harness, driver or library change is checked against
    everything already claimed; one case that cannot be measured must not hide the others,
    so its MeasurementError becomes a failed outcome and the loop goes on. `progress` gets
    each outcome as its case ends. `deadline` (seconds from the start) starts no case expected
    to end after it (1.2x the slowest so far, tuning included): a device call has a hard limit,
    and the cases left out are simply not in the returned list. `tune` names a library
    baseline to tune on each case (tune_baseline) just before its re-run; a tuning run that
    fails is the outcome's `tuning.error`, and the re-run goes on. `only` limits the re-run to
    those cases: a second device call finishing what a first one's deadline left out.
    """
    started = time.perf_counter()
    outcomes: list[RerunOutcome] = []
    for row in selectors.standing_operator_results(backend):
        if only is not None and row.case not in only:
            continue
        elapsed = time.perf_counter() - started
        if past_deadline(deadline, elapsed, [o.seconds for o in outcomes]):
            break
        began = time.perf_counter()
        item = RerunOutcome(row.case, row.speedup, 0.0)
        if tune is not None:
            item.tuning = _tune(row.case, backend, tune, actor, protocol)
        try:
            gate, revision = rerun_gate(row.case, backend, actor, protocol)
        except (CaseError, MeasurementError) as exc:
            item.error = str(exc)
        else:
            item.verdict, item.speedup, item.speedup_ci = gate.verdict, gate.speedup, gate.speedup_ci
            item.reasons, item.inconclusive = gate.reasons, gate.inconclusive
            item.revision = revision.type if revision is not None else None
            item.left_out = gate.report.left_out
            if item.tuning is not None:
                item.tuning.measured = gate.report.description.get("identities", {}).get(tune, {}).get("schedule")
        item.seconds = time.perf_counter() - began
        outcomes.append(item)
        if progress is not None:
            progress(item)
    return outcomes


def record_matrix_rerun(backend: str, actor: str, planned: list[str], outcomes: list[RerunOutcome],
                        wall_seconds: float, *, whole: bool, deadline: float | None = None) -> RecordedEvent:
    """The re-run of many standing results as a unit (MatrixRerunFinished): its wall time in one
    process and what it re-ran of `planned`, which no case's verdict records (each has only its own
    end). `whole`: every standing result of the matrix was planned, not a chosen few; the operator
    table states issue 16's 300 s target from the latest whole one."""
    done = [o.case for o in outcomes]
    return append(NewEvent(stream=matrix_rerun_stream(backend), type="MatrixRerunFinished", actor=actor, payload={
        "backend": backend, "whole": whole, "standing": len(planned), "cases": done,
        "not_run": [case for case in planned if case not in done], "counts": rerun_counts(outcomes),
        "wall_seconds": round(wall_seconds, 3), "deadline": deadline}))


def _tune(case_id: str, backend: str, library: str, actor: str, protocol: ProtocolSettings | None) -> TuningOutcome:
    began = time.perf_counter()
    try:
        event = tune_baseline(case_id, backend, library, actor=actor, protocol=protocol)
    except (CaseError, MeasurementError) as exc:
        return TuningOutcome(library, time.perf_counter() - began, error=str(exc))
    return TuningOutcome.of(event.payload, time.perf_counter() - began)
