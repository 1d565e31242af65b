"""Tuning runs of library baselines: which schedule of a library's family (Halide's,
measurement.backends.halide_algorithm) is that library's public bound for a case on a backend.

A tuning run checks every schedule of the family with the gate's checks (check_plan: fresh
inputs, an odd shape, three coefficient sets, guard pages) and times each correct one with the
canonical protocol (flush, decoy fill and read-back of every launch), then records all of them,
and the fastest correct one as chosen, in one BaselineTuned event. Every later measurement of
the case on the backend runs the library with the chosen schedule (measurement.services.measure
reads it with selectors.tuned_schedules), so the bound a candidate must beat is the library at
its best known schedule, not its default, and the verdict names that schedule.

Each schedule is timed in a child of its own: the harness keys a timing run's variants by
name and every schedule is the same variant ("halide" with another `schedule`). All of them
run with the same timing seed; the chosen one is then timed against the other baselines, in
the same passes, in every measurement that uses it.
"""
from __future__ import annotations

import os
from collections.abc import Callable

from ledger.records import RecordedEvent
from ledger.services import NewEvent, append
from measurement.backends.base import Variant
from measurement.harness.cases import Case, parse_case
from measurement.harness.isolation import SandboxUnavailable, run_isolated
from measurement.harness.isolation import describe as isolation_description
from measurement.harness.judge import correctness_from_failure, judge_checks, summarise_timing
from measurement.harness.plan import DEFAULT_PROTOCOL, ProtocolSettings, check_plan, timing_spec
from measurement.harness.protocol import CheckSpec, TimingSpec, check_variant, time_variants
from measurement.harness.session_info import baseline_schedules

from .events import ScheduleCandidate, tuning_stream
from .services import MeasurementError


def tune_baseline(case_id: str, backend: str, library: str = "halide", *, actor: str,
                  protocol: ProtocolSettings | None = None,
                  progress: Callable[[str], None] | None = None) -> RecordedEvent:
    """Check and time every schedule of `library`'s family on the case; record them all and the
    fastest correct one (BaselineTuned). MeasurementError when nothing can run here."""
    case = parse_case(case_id)
    try:
        isolation_description()  # no sandbox, no tuning: the schedules run in the harness's children
    except SandboxUnavailable as error:
        raise MeasurementError(str(error)) from None
    protocol = protocol or DEFAULT_PROTOCOL[backend]
    say = progress or (lambda message: None)
    family = run_isolated(baseline_schedules, (backend, case.id, library), protocol.check_timeout)
    if not family.ok:
        raise MeasurementError(f"no {library} schedules for {case.id} on {backend}: {family.error}")
    version, schedules = family.value
    seed = int.from_bytes(os.urandom(8), "little") >> 12  # < 2**52: exact in JSON
    specs = check_plan(case, backend, seed)
    spec = timing_spec(protocol, seed + 1)
    references: dict = {}  # each check's float64 reference, computed once for all schedules
    candidates = []
    for number, (name, text) in enumerate(schedules.items(), 1):
        say(f"[{number}/{len(schedules)}] {library} {name}: checking on {len(specs)} fresh inputs, then timing")
        variant = Variant(library, schedule=name)
        candidate = _try_schedule(case, backend, variant, text, specs, spec, protocol, references)
        say(f"    {_outcome(candidate)}")
        candidates.append(candidate)
    correct = [c for c in candidates if c.correct]
    chosen = min(correct, key=lambda c: c.median) if correct else None
    say(f"chosen: {chosen.name}" if chosen else f"no correct {library} schedule: measurements keep the default")
    return append(NewEvent(stream=tuning_stream(backend, case.id), type="BaselineTuned", actor=actor, payload={
        "case": case.id,
        "backend": backend,
        "library": library,
        "version": version,
        "candidates": [c.model_dump() for c in candidates],
        "chosen": chosen.name if chosen else None,
        "chosen_text": chosen.text if chosen else None,
        "protocol": protocol.__dict__,
        "seeds": {"checks": seed, "timing": spec.seed},
    }))


def _try_schedule(case: Case, backend: str, variant: Variant, text: str, specs: list[CheckSpec], spec: TimingSpec,
                  protocol: ProtocolSettings, references: dict) -> ScheduleCandidate:
    """One schedule's checks and, if they pass, its timing; any failure is the candidate's error."""
    checked = run_isolated(check_variant, (backend, case.id, variant, specs), protocol.check_timeout)
    if checked.ok:
        correctness = judge_checks(case, specs, checked.value, references=references)
    else:
        correctness = correctness_from_failure(checked)
    if not correctness.correct:
        error = f"{correctness.reason}: {correctness.detail}"
        return ScheduleCandidate(name=variant.schedule, text=text, correct=False, error=error)
    coefficients = tuple(float(c) for c in case.coefficients())
    timed = run_isolated(time_variants, (backend, case.id, [variant], coefficients, spec), protocol.timing_timeout)
    if not timed.ok:
        return ScheduleCandidate(name=variant.schedule, text=text, correct=False, error=f"timing failed: {timed.error}")
    timing = summarise_timing(case, timed.value, coefficients, spec)[variant.name]
    error = None
    if timing.impossible:
        error = "impossible_speed: faster than the copy-bandwidth floor"
    elif not timing.timed_output_ok:
        error = f"timed_output_mismatch: {timing.timed_output_detail or timing.timed_output_error}"
    return ScheduleCandidate(name=variant.schedule, text=text, correct=error is None, error=error, median=timing.median,
                             spread=timing.spread, pass_medians=timing.pass_medians)


def _outcome(candidate: ScheduleCandidate) -> str:
    if not candidate.correct:
        return f"rejected: {candidate.error}"
    return f"{candidate.median * 1e3:.3f} ms (spread {candidate.spread:.1%})"
