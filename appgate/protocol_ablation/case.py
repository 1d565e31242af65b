"""The protocol ablation of an operator case: a kernel measured against its case's public bound by
the operator gate's protocol, once honestly and once per arm with one requirement removed."""
from __future__ import annotations

import dataclasses
import os
import re
import uuid
from typing import Any, Callable

from ledger.services import NewEvent, append
from measurement import selectors as measurement_selectors
from measurement.backends.base import Kernel, Variant
from measurement.harness import codegen
from measurement.harness.cases import Case, parse_case
from measurement.harness.isolation import run_isolated
from measurement.harness.judge import bootstrap_ratio_ci, summarise_timing
from measurement.decisions import Attempts
from measurement.harness.plan import DEFAULT_PROTOCOL, ProtocolSettings, timing_spec
from measurement.harness.protocol import time_variants
from measurement.reports import MeasurementReport, VariantReport, source_hash
from measurement.services import measure, result_key

from .common import BACKENDS, TWIN, PER_LAUNCH, Progress, AblationError, ArmResult, ProtocolAblation, record_arm, protocol_text


def half_work_twin(kernel: Kernel, case: Case, backend: str) -> Kernel:
    """The subject kernel made wrong but fast: its `stencil` renamed and called by a new `stencil`
    with the outermost extent cut to the first half of the written region (z in 3D, y in 2D), so
    the other half of the output is never written. Same code, half the work."""
    halo = case.stencil.halo
    extents = ("nz / 2 + %d" % halo, "ny", "nx") if case.stencil.dims == 3 else ("nz", "ny / 2 + %d" % halo, "nx")
    call = f"forgestencil_full_work(u, a, y, coef, {', '.join(extents)});"
    note = "/* protocol ablation (correctness_gate): the kernel above on the first half of the written region only */"
    if backend == "cpu":
        t = codegen.c_type(case.precision)
        return Kernel(
            "#define stencil forgestencil_full_work\n" + kernel.source + "\n#undef stencil\n" + note + "\n"
            f"void stencil(const {t}* u, const {t}* a, {t}* y, const double* coef, int nz, int ny, int nx)\n"
            f"{{\n    {call}\n}}\n",
            dict(kernel.launch),
        )
    pattern = re.compile(r'extern\s+"C"\s+__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?void\s+stencil\s*\(')
    if len(pattern.findall(kernel.source)) != 1:
        raise AblationError('cannot build the half-work twin: the CUDA source needs exactly one `extern "C" __global__ void stencil(`')
    t = codegen.cuda_type(case.precision)
    body = pattern.sub('extern "C" __device__ void forgestencil_full_work(', kernel.source)
    return Kernel(
        body + "\n" + note + "\n"
        f'extern "C" __global__ void stencil(const {t}* __restrict__ u, const {t}* __restrict__ a, {t}* __restrict__ y, '
        f"const double* __restrict__ coef, int nz, int ny, int nx)\n{{\n    {call}\n}}\n",
        dict(kernel.launch),
    )


def _candidate_problem(report: MeasurementReport) -> str | None:
    candidate = report.variants.get("candidate")
    if candidate is None:
        return "no candidate in the measurement"
    if not candidate.correctness.correct:
        return f"{candidate.correctness.reason}: {candidate.correctness.detail[:300]}"
    if candidate.timing is None:
        return "it did not survive timing"
    if candidate.timing.impossible:
        return "impossible_speed"
    if not candidate.timing.timed_output_ok:
        return "timed_output_mismatch"
    if report.bound is None:
        return "no baseline was correct and timed (no public bound)"
    return None


def _speedup(report: MeasurementReport, name: str = "candidate", bound_name: str | None = None) -> tuple[float, tuple[float, float], str]:
    """median(bound) / median(name) of one measurement, its bootstrap CI, and the bound's name.

    The honest measurement's bound is the public bound (the fastest usable baseline); an ablated
    measurement is read against the *same* baseline (`bound_name`), so that its distortion is the
    removed requirement's effect, not the bound changing identity between runs (on a shared CPU
    the OpenMP baselines swing with the load; without a flush the floor check drops cache-resident
    baselines). Read whatever the variants' verdicts: the correctness arm times a wrong kernel on
    purpose, and _flags names what the remaining checks would have said."""
    bound = report.variants.get(bound_name) if bound_name else report.bound
    timing = report.variants[name].timing
    if bound is None or bound.timing is None or timing is None:
        raise AblationError(f"the {name} or the bound {bound_name or '(public)'} was not timed in this measurement")
    ci = bootstrap_ratio_ci(bound.timing.pass_medians, timing.pass_medians)
    return bound.timing.median / timing.median, ci, bound.variant.name


def _flags(report: MeasurementReport) -> str:
    """What the checks kept by an ablated run say about its timings: the physics floor and the
    timed-output sample (a gate that still runs them would act on these)."""
    impossible = [name for name, r in report.variants.items() if r.timing is not None and r.timing.impossible]
    wrong = [name for name, r in report.variants.items() if r.timing is not None and not r.timing.timed_output_ok]
    note = f"; below the physics floor: {', '.join(impossible)}" if impossible else ""
    return note + (f"; timed output wrong: {', '.join(wrong)}" if wrong else "")


def _retime(honest: MeasurementReport, variants: list[VariantReport], protocol: ProtocolSettings, say: Progress,
            timer: Callable = time_variants, extra: tuple = ()) -> MeasurementReport:
    """Time `variants` again (their correctness as already judged), with the attempt rule of
    measurement.services._time: repeat while the spread exceeds the band, keep the least spread."""
    case, backend = honest.case, honest.backend
    coefficients = tuple(float(c) for c in case.coefficients())
    seed = int.from_bytes(os.urandom(8), "little") >> 12
    timed = [v.variant for v in variants]
    kept: Attempts[tuple] = Attempts(protocol.max_attempts)
    attempts = []
    for attempt in kept:
        spec = timing_spec(protocol, seed + attempt + 1)
        say(f"  timing {len(timed)} variants: {protocol.passes} passes x {protocol.launches} launches (attempt {attempt + 1})")
        outcome = run_isolated(timer, (backend, case.id, timed, coefficients, spec, *extra), protocol.timing_timeout)
        if not outcome.ok:
            raise AblationError(f"timing failed: {outcome.error}")
        run = outcome.value
        summary = summarise_timing(case, run, coefficients, spec)
        spread = max(t.spread for t in summary.values())
        attempts.append({"attempt": attempt + 1, "seed": spec.seed, "max_spread": spread, "wall_seconds": run.wall_seconds})
        kept.record(spread, (run, summary, spec))
    run, summary, spec = kept.kept
    reports = {v.variant.name: VariantReport(v.variant, v.precision, v.correctness, summary[v.variant.name]) for v in variants}
    report = MeasurementReport(case, backend, honest.description, reports, protocol, {"checks": honest.seeds["checks"], "timing": spec.seed},
                               run.copy_bandwidth, run.launch_overhead,
                               {"before": run.environment_before, "after": run.environment_after, "order": run.order},
                               run.samples, attempts, kept.noisy)
    if not run.inputs_unchanged:
        raise AblationError("an input changed during timing")
    return report


def _record_measurement(result: ProtocolAblation, report: MeasurementReport, actor: str, hypothesis: str,
                        ablated: dict[str, Any] | None = None) -> str:
    evidence = report.evidence()
    if ablated is not None:  # what this measurement left out, beside the settings it ran with
        evidence["protocol"] = {**evidence["protocol"], "ablated": ablated}
    event = append(NewEvent(stream=result.stream, type="CandidateMeasured", actor=actor,
                            payload={**evidence, "hypothesis": f"protocol ablation {result.ablation}: {hypothesis}"}))
    return str(event.event_id)


def _subject_kernel(case: Case, backend: str, kernel: Kernel | None) -> tuple[Kernel, str]:
    if kernel is not None:
        return kernel, f"the given kernel {source_hash(kernel.source)[:12]} launch {kernel.launch or {}}"
    key = result_key(backend, case.id)
    admitted = measurement_selectors.admitted_kernel(key)
    if admitted is not None:
        return admitted, f"the admitted kernel of {key} ({source_hash(admitted.source)[:12]})"
    if backend == "cpu":
        straightforward = Kernel(codegen.straightforward_c(case), {})
    else:
        straightforward = Kernel(codegen.straightforward_cuda(case), codegen.straightforward_cuda_launch(case))
    return straightforward, f"the straightforward kernel (nothing is admitted for {key})"


def ablate_case(case_id: str, backend: str, actor: str, kernel: Kernel | None = None,
                protocol: ProtocolSettings | None = None, progress: Progress | None = None) -> ProtocolAblation:
    """The honest measurement of the subject kernel (given, else the admitted one, else the
    straightforward kernel) against the public bound, then one ablated measurement per
    requirement; one AblationMeasured per arm, appended as each arm ends."""
    if backend not in BACKENDS:
        raise AblationError(f"unknown backend {backend!r}: use cpu or cuda")
    case = parse_case(case_id)
    protocol = protocol or DEFAULT_PROTOCOL[backend]
    say = progress or (lambda message: None)
    subject, label = _subject_kernel(case, backend, kernel)
    say(f"honest measurement of {label}")
    honest = measure(case.id, backend, subject, None, protocol, say)
    problem = _candidate_problem(honest)
    if problem is not None:
        raise AblationError(f"the honest measurement does not admit a speedup for {label}: {problem}. "
                            "A protocol ablation needs a subject that is correct and timed")
    ablation = str(uuid.uuid4())
    device = honest.description.get("device", "?")
    result = ProtocolAblation(ablation, "case", case.id, backend, result_key(backend, case.id),
                              f"{label}; {protocol_text(protocol)}", f"{device} ({backend})",
                              "speedup over the per-case public bound")
    honest_id = _record_measurement(result, honest, actor, f"honest measurement of {label}")
    result.honest_events = [honest_id]
    value, ci, bound = _speedup(honest)
    result.what += f"; honest bound: {bound}"

    def noisy(report: MeasurementReport | None = None) -> str:
        flags = (["honest run noisy"] if honest.noisy else []) + (["ablated run noisy"] if report is not None and report.noisy else [])
        return "".join(f"; {flag}" for flag in flags)

    def arm(name: str) -> ArmResult:
        return ArmResult(name, honest=value, honest_ci=ci, events=[honest_id])

    baselines = [r for r in honest.variants.values() if r.variant.role == "baseline" and r.correctness.correct]
    candidate = honest.variants["candidate"]

    # correctness_gate: the half-work twin, rejected honestly, then timed without checks (the subject
    # in the same run, so the twin's gain is also seen paired, free of the bound's run-to-run noise)
    say("correctness_gate: the half-work twin, checked, then timed without checks")
    row = arm("correctness_gate")
    twin = half_work_twin(subject, case, backend)
    checked = measure(case.id, backend, twin, None, protocol, say)
    verdict = checked.variants["candidate"].correctness
    row.events.append(_record_measurement(result, checked, actor, "correctness_gate: the honest checks of the half-work twin"))
    unchecked = _retime(honest, baselines + [candidate, VariantReport(Variant(TWIN, twin, "candidate"), case.precision, verdict)],
                        protocol, say)
    row.events.append(_record_measurement(result, unchecked, actor, "correctness_gate: the half-work twin timed without checks",
                                          {"arm": "correctness_gate", "credited": TWIN,
                                           "removed": "correctness checks: the twin is timed and credited although rejected"}))
    row.ablated, row.ablated_ci, twin_bound = _speedup(unchecked, TWIN, bound)
    paired = unchecked.variants["candidate"].timing.median / unchecked.variants[TWIN].timing.median
    honest_verdict = "ADMITTED (the checks missed it)" if verdict.correct else f"rejected ({verdict.reason})"
    row.note = (f"half-work twin: honest gate {honest_verdict}; timed without checks over {twin_bound}, "
                f"{paired:.2f}x faster than the subject in the same run{_flags(unchecked)}{noisy(unchecked)}")
    record_arm(result, row, actor)

    # symmetric_timing: the subject pipelined, the baselines per launch (and the subject per launch
    # too, under another name, so the asymmetry's own effect is seen paired in the same run)
    say("symmetric_timing: the subject timed back to back, the baselines per launch")
    row = arm("symmetric_timing")
    per_launch = VariantReport(Variant(PER_LAUNCH, subject, "candidate"), case.precision, candidate.correctness)
    asymmetric = _retime(honest, baselines + [candidate, per_launch], protocol, say, time_variants, (("candidate",),))
    row.events.append(_record_measurement(result, asymmetric, actor, "symmetric_timing: the subject pipelined", {
        "arm": "symmetric_timing", "pipelined": ["candidate"], "credited": "candidate",
        "timer": "measurement.harness.protocol.time_variants(pipelined=('candidate',))",
        "removed": "symmetric timing: the candidate's launches back to back without flush or synchronisation, one clock "
                   f"around them; {PER_LAUNCH} is the same kernel timed per launch in the same run"}))
    row.ablated, row.ablated_ci, asym_bound = _speedup(asymmetric, "candidate", bound)
    paired = asymmetric.variants[PER_LAUNCH].timing.median / asymmetric.variants["candidate"].timing.median
    row.note = (f"subject back to back, no flush or sync between launches, one clock per batch, over {asym_bound} timed per launch; "
                f"{paired:.2f}x its own per-launch time in the same run{_flags(asymmetric)}{noisy(asymmetric)}")
    record_arm(result, row, actor)

    # all_dataset_headline: the most favourable pass of the honest measurement
    row = arm("all_dataset_headline")
    bound_passes = honest.bound.timing.pass_medians
    ratios = [b / c for b, c in zip(bound_passes, candidate.timing.pass_medians)]
    best = max(range(len(ratios)), key=ratios.__getitem__)
    row.ablated = ratios[best]
    row.note = (f"a case has one dataset; analogue: the best single pass ({best + 1} of {len(ratios)}) instead of the median "
                f"over all passes, from the honest samples (bound {bound}){noisy()}")
    record_arm(result, row, actor)

    # warm-up, flush, interleaving: a protocol flag each
    for name, setting, off, what in (("warmup", "warmup", 0, "no warm-up launches"),
                                      ("cache_flush", "flush", False, "no cache flush before launches" if backend == "cpu" else "no L2 flush before launches"),
                                      ("interleaving", "interleave", False, "every pass in the same fixed order")):
        row = arm(name)
        if getattr(protocol, setting) == off:
            row.status, row.reason = "not_run", f"the protocol given already has {setting} = {off}"
            row.note = row.reason
            record_arm(result, row, actor)
            continue
        say(f"{name}: {what}")
        settings_off = dataclasses.replace(protocol, **{setting: off})
        report = _retime(honest, baselines + [candidate], settings_off, say)
        row.events.append(_record_measurement(result, report, actor, f"{name}: {what}", {"arm": name, "removed": what}))
        row.ablated, row.ablated_ci, bound_name = _speedup(report, "candidate", bound)
        row.note = f"{what}; over {bound_name}{_flags(report)}{noisy(report)}"
        record_arm(result, row, actor)

    # control: the honest protocol again
    say("control: the honest protocol again")
    row = arm("control")
    report = _retime(honest, baselines + [candidate], protocol, say)
    row.events.append(_record_measurement(result, report, actor, "control: nothing removed", {"arm": "control", "removed": "nothing"}))
    row.ablated, row.ablated_ci, bound_name = _speedup(report, "candidate", bound)
    row.note = f"nothing removed: a second honest timing, the run-to-run noise; over {bound_name}{_flags(report)}{noisy(report)}"
    record_arm(result, row, actor)
    return result
