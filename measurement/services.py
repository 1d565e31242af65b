"""Measurement and the operator gate: orchestrate harness children, judge, record events.

The parent process never imports a device library: everything that touches the backend
runs in a child (measurement.harness.isolation), and the parent holds the oracle.
"""
from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from ledger.decide import DECIDE_TRIES
from ledger.errors import ConcurrencyError
from ledger.selectors import stream_version
from ledger.services import NewEvent, append, append_many
from measurement.backends.base import BaselineUnavailable, Kernel, Variant
from measurement.harness.cases import Case, parse_case
from measurement.harness.isolation import SandboxUnavailable, run_isolated
from measurement.harness.isolation import describe as isolation_description
from measurement.harness.judge import (Correctness, check_references, correctness_from_failure, judge_variants,
                                      summarise_timing)
from measurement.harness.plan import DEFAULT_PROTOCOL, ProtocolSettings, check_plan, timing_spec
from measurement.harness.protocol import CheckSpec, TimingRun, TimingSpec, check_variant, time_variants
from measurement.harness.session_info import baseline_session

from . import selectors, workers
from .decisions import Attempts, judge_candidate, verdict_spread
from .composed import composed_bounds, name_parts
from .reports import MeasurementReport, VariantReport, bound_label, source_hash


class MeasurementError(Exception):
    pass


def result_key(backend: str, case_id: str) -> str:
    return f"operator/{backend}/{case_id}"


# ---- measuring -------------------------------------------------------------------------


def _check(case: Case, backend: str, variant: Variant, specs: list[CheckSpec], timeout: float) -> tuple[Correctness, list]:
    outcome = run_isolated(check_variant, (backend, case.id, variant, specs), timeout)
    if outcome.ok:
        return None, outcome.value
    survived = None
    if outcome.kind == "crashed" and any(spec.guard for spec in specs):
        unguarded = [CheckSpec(s.label, s.shape, s.seed, s.coefficients, s.coefficient_set, None) for s in specs]
        survived = run_isolated(check_variant, (backend, case.id, variant, unguarded), timeout).ok
    return correctness_from_failure(outcome, survived), []


@dataclass(frozen=True)
class Start:
    """What every run of the harness's children begins with: the case, the sandbox it will run in,
    the protocol, a progress callback, a fresh seed and the checks drawn from it."""

    case: Case
    isolation: dict[str, Any]
    protocol: ProtocolSettings
    say: Callable[[str], None]
    seed: int
    specs: list[CheckSpec]


def start(case_id: str, backend: str, protocol: ProtocolSettings | None, progress) -> Start:
    """MeasurementError when there is no sandbox: no sandbox, no measurement (unless explicitly
    opted out, which the isolation description then says)."""
    case = parse_case(case_id)
    try:
        isolation = isolation_description()
    except SandboxUnavailable as error:
        raise MeasurementError(str(error)) from None
    seed = int.from_bytes(os.urandom(8), "little") >> 12  # < 2**52: exact in JSON
    return Start(case, isolation, protocol or DEFAULT_PROTOCOL[backend], progress or (lambda message: None), seed,
                 check_plan(case, backend, seed))


def measure(
    case_id: str,
    backend: str,
    candidate: Kernel | None = None,
    prior_best: Kernel | None = None,
    protocol: ProtocolSettings | None = None,
    progress=None,
    leave_out: dict[str, dict] | None = None,
) -> MeasurementReport:
    """Check every variant, then time the correct ones with the canonical protocol; `leave_out`:
    the baselines out of contention that a re-run need not time (measurement.contenders)."""
    begun = start(case_id, backend, protocol, progress)
    case, isolation, protocol, say, seed, specs = (begun.case, begun.isolation, begun.protocol, begun.say, begun.seed,
                                                   begun.specs)
    composed = composed_bounds(case, backend)  # a temporal case's T launches of star_1 kernels, timed as baselines
    tuned = selectors.tuned(backend, case.id)
    schedules = {library: name for library, name in tuned.items() if name}  # a tuned library runs its chosen schedule
    # Candidates and prior bests run alone in a child each: a crash costs only their verdict.
    # On a GPU their checks and the baselines' run at the same time (nothing is timed yet); the
    # judging waits for the straightforward kernel's errors, the floor every variant is held to.
    own_child = []
    if candidate is not None:
        own_child.append(Variant("candidate", candidate, "candidate"))
    if prior_best is not None:
        own_child.append(Variant("prior_best", prior_best, "prior_best"))
    say(f"checking the baselines{''.join(f' and {v.name}' for v in own_child)} on {len(specs)} fresh inputs")
    # On the CPU the checks are the cores' work itself (OpenMP threads spin when two children
    # share the cores): one child at a time there.
    together = backend != "cpu"
    with ThreadPoolExecutor(max_workers=max(1, len(own_child)) if together else 1) as pool:
        checks = {v.name: pool.submit(_check, case, backend, v, specs, protocol.check_timeout) for v in own_child if together}
        session = run_isolated(baseline_session, (backend, case.id, specs, schedules, [c.variant for c in composed],
                                                  leave_out, list(tuned)),
                               protocol.check_timeout)
        if not session.ok:
            if session.kind == "exception" and session.value[0] == BaselineUnavailable.__name__:
                raise MeasurementError(session.value[1])
            raise MeasurementError(f"the {backend} backend is not usable here: {session.error}")
        for variant in own_child:  # on the CPU: after the baselines, one after the other
            checks.setdefault(variant.name, pool.submit(_check, case, backend, variant, specs, protocol.check_timeout))
        checked = {name: future.result() for name, future in checks.items()}
    description, straightforward, baseline_runs = session.value
    description = {**description, "isolation": isolation, "worker": workers.description()}  # which device timed it
    name_parts(description, composed)
    given = {bound.variant.name: bound.variant for bound in composed}
    reports: dict[str, VariantReport] = {}
    floors: dict[str, float] = {}
    references = check_references(case, specs)
    judged = judge_variants(case, specs, {name: runs for name, runs in baseline_runs.items() if not isinstance(runs, str)},
                            references)
    for name, runs in baseline_runs.items():
        variant = given.get(name) or Variant(name, straightforward if name == "straightforward" else None, "baseline",
                                             schedules.get(name))
        if isinstance(runs, str):
            correctness = Correctness(False, "runtime_error", runs)
        else:
            correctness = judged[name]
        if name == "straightforward":
            if not correctness.correct:
                raise MeasurementError(f"the harness's straightforward kernel failed its own checks: {correctness.detail}")
            floors = {check.label: check.error for check in correctness.checks}
        reports[name] = VariantReport(variant, description["precisions"].get(name, case.precision), correctness,
                                      identity=description.get("identities", {}).get(name, {}))
    required = {*given, *schedules}  # the composed bounds and every library a tuning run chose a schedule for
    refuse_failed_bounds(reports, required)
    # A candidate that fails its checks ends the measurement before anything is timed.
    held = judge_variants(case, specs, {v.name: checked[v.name][1] for v in own_child if checked[v.name][0] is None},
                          references, floors)
    for variant in own_child:
        failure = checked[variant.name][0]
        correctness = failure if failure is not None else held[variant.name]
        reports[variant.name] = VariantReport(variant, case.precision, correctness)
        if variant.role == "candidate" and not correctness.correct:
            return MeasurementReport(case, backend, description, reports, protocol, {"checks": seed})
    report = MeasurementReport(case, backend, description, reports, protocol, {"checks": seed})
    timed = [r.variant for r in reports.values() if r.correctness.correct]
    _time(report, timed, protocol, say)
    if report.variants["straightforward"].timing is not None:  # the baselines were timed
        refuse_failed_bounds(reports, required, timed=True)
    return report


def refuse_failed_bounds(reports: dict[str, VariantReport], required: set[str], timed: bool = False) -> None:
    """MeasurementError when a bound the ledger vouches for did not run correctly (`timed`: or was not
    timed usably): a composed bound (the harness's straightforward kernel or an admitted one, correct by
    the ledger's own verdicts) or a library whose tuning run found its chosen schedule correct. Either
    failing is the harness's or the machine's to explain, never a reason to judge over the bounds that
    are left: session 40's gate of diamond_ts4/512^3 lost both composed bounds to an illegal address
    (the admitted star_1 kernel's 16-byte neighbour loads ran past the scratch grids, which had no
    padding then) and admitted the candidate over tuned Halide at 2.31x, where that session's sweep had
    it at 1.80x over four launches of the star_1 kernel (docs/gpu.md, session 40). A tuned library that
    is missing altogether is refused before this (session_info.refuse_missing_libraries)."""
    failed = {name: reports[name] for name in sorted(required) if name in reports
              and not (reports[name].usable if timed else reports[name].correctness.correct)}
    if failed:
        listed = "; ".join(f"{_bound_name(report)}: {_failure(report)}" for report in failed.values())
        raise MeasurementError(f"a bound the ledger vouches for failed ({listed}): a verdict without it would stand "
                               "over a weaker bound")


def _bound_name(report: VariantReport) -> str:
    schedule = report.variant.schedule
    return f"{report.variant.name} [{schedule}] (tuned)" if schedule else report.variant.name


def _failure(report: VariantReport) -> str:
    if not report.correctness.correct:
        return f"{report.correctness.reason}: {report.correctness.detail[:200]}"
    if report.timing is None:
        return "not timed"
    return "impossible speed" if report.timing.impossible else "its timed output was wrong"


def _time(report: MeasurementReport, timed: list[Variant], protocol: ProtocolSettings, say) -> None:
    case, backend = report.case, report.backend
    coefficients = tuple(float(c) for c in case.coefficients())
    attempts: Attempts[tuple[TimingRun, dict, TimingSpec]] = Attempts(protocol.max_attempts)  # the quietest kept
    for attempt in attempts:
        spec = timing_spec(protocol, report.seeds["checks"] + attempt + 1)
        say(f"timing {len(timed)} variants: {protocol.passes} passes x {protocol.launches} launches (attempt {attempt + 1})")
        outcome = run_isolated(time_variants, (backend, case.id, timed, coefficients, spec), protocol.timing_timeout)
        if not outcome.ok:
            candidate = next((v for v in timed if v.role == "candidate"), None)
            if candidate is None:
                raise MeasurementError(f"timing the baselines failed: {outcome.error}")
            report.variants[candidate.name].correctness = correctness_from_failure(outcome)
            timed = [v for v in timed if v.role != "candidate"]
            continue
        run = outcome.value
        summary = summarise_timing(case, run, coefficients, spec)
        spread = verdict_spread(summary, {variant.name: variant.role for variant in timed})
        report.attempts.append({"attempt": attempt + 1, "seed": spec.seed, "max_spread": spread, "wall_seconds": run.wall_seconds})
        attempts.record(spread, (run, summary, spec))
    if attempts.kept is None:
        return
    run, summary, spec = attempts.kept
    report.noisy = attempts.noisy
    report.copy_bandwidth = run.copy_bandwidth
    report.launch_overhead = run.launch_overhead
    report.samples = run.samples
    report.seeds["timing"] = spec.seed
    report.environment = {"before": run.environment_before, "after": run.environment_after, "order": run.order}
    if not run.inputs_unchanged:
        raise MeasurementError("an input changed during timing although every variant passed the input check")
    for name, timing in summary.items():
        report.variants[name].timing = timing


# ---- the operator gate -----------------------------------------------------------------


@dataclass
class GateOutcome:
    report: MeasurementReport
    verdict: str
    reasons: list[str]
    detail: str
    speedup: float | None
    speedup_ci: tuple[float, float] | None
    measured_event: Any
    verdict_event: Any
    inconclusive: str = ""  # why a re-run's verdict is inconclusive (measurement.reruns); "" otherwise


def _candidate_reasons(report: MeasurementReport, candidate: VariantReport) -> tuple[list[str], str, float | None, tuple | None]:
    """The gate's decision (measurement.decisions.judge_candidate) on this report's values."""
    bound, prior = report.bound, report.variants.get("prior_best")
    return judge_candidate(
        candidate.correctness, candidate.timing,
        bound=bound.timing if bound else None, bound_label=bound_label(bound.variant.name, bound.identity) if bound else "",
        prior=prior.timing if prior is not None else None,
        floor_seconds=lambda: report.case.compulsory_bytes / report.copy_bandwidth, launch_overhead=report.launch_overhead)


def gate_candidate(case_id: str, backend: str, kernel: Kernel, actor: str, hypothesis: str = "",
                   protocol: ProtocolSettings | None = None, progress=None) -> GateOutcome:
    """Measure the candidate against the persisted prior best and record the verdict at the result
    stream's version read before that prior best (style rule 5). Another worker's verdict landing
    during the measurement (minutes) fails the append; the verdict is then decided again against
    what stands now: from the same measurement when the decision needs no timing it lacks (the
    candidate fails on its own, or the prior best is unchanged or gone), else measured again with
    the new prior best. Without this two workers could both be admitted and the results table keep
    the later, even if slower (issue 21; docs/architecture.md, "Appends that decide")."""
    key = result_key(backend, case_id)
    report: MeasurementReport | None = None
    again = ""
    for _ in range(DECIDE_TRIES):
        version = stream_version(key)  # before the prior best: an admission between the two fails the append
        prior = selectors.admitted_kernel(key)
        if prior is not None and source_hash(prior.source) == source_hash(kernel.source):
            prior = None
        if report is None or _needs_measuring(report, prior):
            report = measure(case_id, backend, kernel, prior, protocol, progress)
        try:
            return record_verdict(report, key, actor, hypothesis, prior=prior, expected_version=version, again=again)
        except ConcurrencyError:
            again = "decided again: the result changed while this candidate was measured"
    raise MeasurementError(
        f"{key} changed {DECIDE_TRIES} times while this verdict was being recorded: gate the candidate again")


def _measured_prior(report: MeasurementReport) -> str | None:
    prior = report.variants.get("prior_best")
    return source_hash(prior.variant.kernel.source) if prior is not None else None


def _judged_against(report: MeasurementReport, prior: Kernel | None) -> MeasurementReport:
    """The report as a verdict against `prior` (the kernel standing when it is recorded) compares
    it: a measured prior best that no longer stands is left out of the decision; its samples stay
    in the evidence (CandidateMeasured)."""
    measured = _measured_prior(report)
    if measured is None or (prior is not None and measured == source_hash(prior.source)):
        return report
    return replace(report, variants={name: v for name, v in report.variants.items() if name != "prior_best"})


def _needs_measuring(report: MeasurementReport, prior: Kernel | None) -> bool:
    """Whether deciding against `prior` needs a timing this report lacks: the prior best's, taken in
    the same run (the regression rule compares interleaved medians only). Not when the candidate is
    rejected without it (a failed check, no speed over the public bound)."""
    if prior is None or _measured_prior(report) == source_hash(prior.source):
        return False
    judged = _judged_against(report, prior)
    return not _candidate_reasons(judged, judged.variants["candidate"])[0]


Decide = Callable[[MeasurementReport, list[str], tuple[float, float] | None], tuple[str, str]]


def record_verdict(report: MeasurementReport, key: str, actor: str, hypothesis: str, *, revises: str | None = None,
                   decide: Decide | None = None, prior: Kernel | None = None, expected_version: int | None = None,
                   again: str = "") -> GateOutcome:
    """Judge the candidate against `prior` (the standing prior best; None: none) and record the
    evidence and the verdict in one transaction, at `expected_version` of the result's stream when
    given (ConcurrencyError when it moved on). A gate run admits or rejects; a re-run (`revises`: the
    verdict it re-checks) lets `decide` name its verdict and why it is inconclusive, if it is
    (measurement.decisions.rerun_verdict). `again`: why the verdict was decided a second time."""
    judged = _judged_against(report, prior)
    candidate = judged.variants["candidate"]
    reasons, detail, speedup, ci = _candidate_reasons(judged, candidate)
    verdict, inconclusive = decide(judged, reasons, ci) if decide else ("rejected" if reasons else "admitted", "")
    if verdict == "admitted" and prior is not None and _measured_prior(judged) is None:
        raise MeasurementError("an admission needs the standing prior best timed in the same run")  # gate_candidate measures it
    detail = "; ".join(filter(None, [inconclusive, again, detail]))  # why first: pages show it as "inconclusive (why)"
    measured_id = uuid.uuid4()
    bound = judged.bound
    measured = NewEvent(stream=key, type="CandidateMeasured", actor=actor, event_id=measured_id,
                        expected_version=expected_version, payload={**report.evidence(), "hypothesis": hypothesis})
    verdict_payload = {
        "result": key,
        "case": report.case.id,
        "backend": report.backend,
        "verdict": verdict,
        "state": candidate.correctness.state,
        "reasons": reasons,
        "detail": detail,
        "measurement": str(measured_id),
        "candidate_source_hash": source_hash(candidate.variant.kernel.source),
        "candidate_source": candidate.variant.kernel.source,
        "candidate_launch": candidate.variant.kernel.launch,
        "candidate_median": candidate.timing.median if candidate.timing else None,
        "fraction_of_copy": candidate.timing.fraction_of_copy if candidate.timing else None,
        "speedup": speedup,
        "speedup_ci": list(ci) if ci else None,
        "bound": report._summary(bound) if bound else None,
        "baselines": _baseline_ratios(judged, candidate),
        "left_out": report.left_out,
        "same_precision": (bound.precision == report.case.precision) if bound else None,
        "prior_best": _prior_summary(judged, prior),
        "revises": revises,
    }
    measured_event, verdict_event = append_many(  # one transaction: evidence and verdict together
        [measured, NewEvent(stream=key, type="GateVerdict", actor=actor, payload=verdict_payload)]
    )
    return GateOutcome(report, verdict, reasons, detail, speedup, ci, measured_event, verdict_event, inconclusive)


def _baseline_ratios(report: MeasurementReport, candidate: VariantReport) -> dict[str, dict[str, Any]]:
    """Every public baseline of the measurement with the candidate's speedup over it (None
    where the candidate was not timed), so tables show each baseline in its own column."""
    timed = candidate.timing is not None and candidate.usable
    return {
        r.variant.name: {
            "label": bound_label(r.variant.name, r.identity), "precision": r.precision, "median": r.timing.median,
            "speedup": r.timing.median / candidate.timing.median if timed else None, "identity": r.identity,
        }
        for r in report.baselines()
    }


def _prior_summary(report: MeasurementReport, prior: Kernel | None) -> dict | None:
    """The prior best the verdict was judged against; one standing but not timed in this run (the
    candidate was rejected without it, gate_candidate) has no median."""
    measured = report.variants.get("prior_best")
    if measured is None:
        return None if prior is None else {"source_hash": source_hash(prior.source), "median": None, "correct": None}
    return {
        "source_hash": source_hash(measured.variant.kernel.source),
        "median": measured.timing.median if measured.timing else None,
        "correct": measured.correctness.correct,
    }


def measure_baselines(case_id: str, backend: str, actor: str, protocol: ProtocolSettings | None = None, progress=None):
    report = measure(case_id, backend, None, None, protocol, progress)
    event = append(NewEvent(stream=f"case/{report.case.id}", type="BaselinesMeasured", actor=actor, payload=report.evidence()))
    return report, event
