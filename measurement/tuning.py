"""Tuning runs of library baselines: which schedule of a library's family (Halide's,
measurement.backends.halide_algorithm) is that library's public bound for a case on a backend.

A tuning run checks every schedule of the family with the gate's checks (check_plan: fresh
inputs, an odd shape, three coefficient sets, guard pages) and times the correct ones with the
canonical protocol (flush, decoy fill and read-back of every launch), then records all of them,
and the fastest correct one as chosen, in one BaselineTuned event. Every later measurement of
the case on the backend runs the library with the chosen schedule (measurement.services.measure
reads it with selectors.tuned), so the bound a candidate must beat is the library at
its best known schedule, not its default, and the verdict names that schedule.

Two children a run, whatever the family's size: one checks every schedule
(session_info.schedule_session), one times every correct schedule in the same interleaved passes
(time_variants), each schedule a variant of its own name, "halide[z_march]" (Variant.library).
Schedules compared in one run see the same clocks, load and thermal state: the project's rule
for any comparison. A schedule that fails at the case's full shape (the checks run smaller
ones) is left out of the passes with its error, not allowed to cost the others their timing.
"""
from __future__ import annotations

from collections.abc import Callable
from functools import partial

from ledger.records import RecordedEvent
from ledger.services import NewEvent, append
from measurement.backends.base import scheduled
from measurement.harness.cases import Case
from measurement.harness.isolation import run_isolated
from measurement.harness.judge import judge_checks, summarise_timing
from measurement.harness.plan import ProtocolSettings, timing_spec
from measurement.harness.protocol import CheckRun, CheckSpec, TimingSpec, time_variants
from measurement.harness.session_info import schedule_session

from .events import ScheduleCandidate, tuning_stream
from .services import MeasurementError, start


def tune_baseline(case_id: str, backend: str, library: str = "halide", *, actor: str,
                  protocol: ProtocolSettings | None = None,
                  progress: Callable[[str], None] | None = None) -> RecordedEvent:
    """Check and time every schedule of `library`'s family on the case; record them all and the
    fastest correct one (BaselineTuned). MeasurementError when nothing can run here."""
    begun = start(case_id, backend, protocol, progress)  # no sandbox, no tuning: the schedules run in its children
    case, protocol, say, seed, specs = begun.case, begun.protocol, begun.say, begun.seed, begun.specs
    spec = timing_spec(protocol, seed + 1)
    say(f"checking every {library} schedule of {case.id} on {len(specs)} fresh inputs (one child)")
    session = run_isolated(schedule_session, (backend, case.id, library, specs), protocol.check_timeout)
    if not session.ok:
        raise MeasurementError(f"no {library} schedules for {case.id} on {backend}: {session.error}")
    version, schedules, runs = session.value
    references: dict = {}  # each check's float64 reference, computed once for all schedules
    errors = {name: _check_error(case, specs, runs[name], references) for name in schedules}
    correct = [name for name, error in errors.items() if error is None]
    say(f"{len(correct)} of {len(schedules)} schedules correct; timing them in the same passes "
        f"({protocol.passes} x {protocol.launches} launches)")
    timings = _time_schedules(case, backend, library, correct, spec, protocol) if correct else {}
    candidates = []
    for name, text in schedules.items():
        median, spread, medians, error = timings.get(name, (None, None, [], errors[name]))
        candidate = ScheduleCandidate(name=name, text=text, correct=error is None, error=error, median=median,
                                      spread=spread, pass_medians=medians)
        say(f"    {library} {name}: {_outcome(candidate)}")
        candidates.append(candidate)
    chosen = min((c for c in candidates if c.correct), key=lambda c: c.median, default=None)
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


def _check_error(case: Case, specs: list[CheckSpec], runs: list[CheckRun] | str, references: dict) -> str | None:
    """Why a schedule failed its checks (the child's error, or the judge's reason), or None."""
    if isinstance(runs, str):
        return f"runtime_error: {runs}"
    correctness = judge_checks(case, specs, runs, references=references)
    return None if correctness.correct else f"{correctness.reason}: {correctness.detail}"


Timing = tuple[float | None, float | None, list[float], str | None]  # median, spread, pass medians, error


def _time_schedules(case: Case, backend: str, library: str, names: list[str], spec: TimingSpec,
                    protocol: ProtocolSettings) -> dict[str, Timing]:
    """Every named schedule timed in one child, in the same interleaved passes; each one's
    timing, or why it has none (left out at the full shape, wrong timed output, too fast)."""
    variants = [scheduled(library, name) for name in names]
    coefficients = tuple(float(c) for c in case.coefficients())
    timing = partial(time_variants, leave_out_failing=True)
    timed = run_isolated(timing, (backend, case.id, variants, coefficients, spec), protocol.timing_timeout)
    if not timed.ok:
        return {name: (None, None, [], f"timing failed: {timed.error}") for name in names}
    summary = summarise_timing(case, timed.value, coefficients, spec)
    timings: dict[str, Timing] = {}
    for name, variant in zip(names, variants):
        if variant.name in timed.value.left_out:
            timings[name] = (None, None, [], f"failed at the case's shape: {timed.value.left_out[variant.name]}")
            continue
        timing = summary[variant.name]
        error = None
        if timing.impossible:
            error = "impossible_speed: faster than the copy-bandwidth floor"
        elif not timing.timed_output_ok:
            error = f"timed_output_mismatch: {timing.timed_output_detail or timing.timed_output_error}"
        timings[name] = (timing.median, timing.spread, timing.pass_medians, error)
    return timings


def _outcome(candidate: ScheduleCandidate) -> str:
    if not candidate.correct:
        return f"rejected: {candidate.error}"
    return f"{candidate.median * 1e3:.3f} ms (spread {candidate.spread:.1%})"
