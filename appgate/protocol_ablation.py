"""`ablation protocol`: re-run a real measurement with one requirement of the protocol removed at a
time, and record the honest value, the ablated value and the distortion (docs/protocol_ablation.md).

Subjects: an operator case (a kernel measured against the per-case public bound by the operator
gate's protocol) or an application (both variants over every dataset by the application gate's
protocol). The quantity is the speedup the gate would report: median(bound) / median(kernel) for
a case, the all-dataset geometric mean of median(baseline) / median(candidate) for an app.

Arms (one `AblationMeasured` each, kind "protocol", all sharing one ablation id, on the stream
`ablation/<id>` with the evidence they name):

  correctness_gate      case: the subject's half-work twin (the same kernel run on the first half
                        of the grid: the rest of the output is never written), rejected by the
                        honest checks, then timed without any check. app: a wrong-but-fast variant
                        selected by --wrong-switch, timed with the program's verdict ignored.
  symmetric_timing      case: the subject timed back to back (no flush, no synchronisation between
                        launches, one clock around the batch), the baselines per launch as the
                        protocol says. app: the baseline timed by the wall clock of the whole
                        process, the candidate by the time the program reports for itself.
  all_dataset_headline  app: the best single dataset instead of the all-dataset geometric mean.
                        case (one grid, one dataset): the most favourable single pass instead of
                        the median over all passes. From the honest measurement's own samples.
  warmup                the protocol without warm-up runs.
  cache_flush           case: no cache (CPU) / L2 (GPU) flush before launches. app: not run (the
                        application protocol has no flush: every timed run is a fresh process).
  interleaving          passes in a fixed order (app: every baseline run, then every candidate run).
  control               nothing removed: the honest protocol again, so the run-to-run noise is
                        on the same table as the distortions.

Honest and ablated measurements are separate runs on the same machine; a distortion inside the
control arm's is noise. Every ablated run is read against the honest run's public bound (the same
baseline), and its notes name what the checks not removed would have said (physics floor, timed
output) and, for the correctness and timing arms, the subject's paired factor in the same run. An ablation never goes through a gate: it records `CandidateMeasured`
(cases) or `AppVariantBuilt` / `AppDatasetMeasured` (apps) on its own stream, so it never
changes the operator map, the app table, or a prior best.
"""
from __future__ import annotations

import dataclasses
import math
import os
import re
import statistics
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml
from django.conf import settings

from ledger.records import RecordedEvent
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
from measurement.reports import MeasurementReport, VariantReport, finite, source_hash
from measurement.services import measure, result_key

from . import runner
from .manifest import LoadedManifest, baseline_mismatches, file_hash
from .models import AppRow
from .projections import result_key as app_result_key
from .services import AppProtocol, geomean, machine, register, spread, time_dataset

ROOT = Path(settings.BASE_DIR)
BUNDLED_APPS = ROOT / "fixtures" / "apps"
BACKENDS = ("cpu", "cuda")
TWIN = "half_work_twin"  # the correctness arm's wrong-but-fast kernel, by name in its evidence
PER_LAUNCH = "candidate_per_launch"  # the symmetric-timing arm's subject, timed per launch beside its pipelined self
WRONG = "wrong"  # the app correctness arm's wrong-but-fast variant, by name in its evidence
REQUIREMENTS = ("correctness_gate", "symmetric_timing", "all_dataset_headline", "warmup", "cache_flush", "interleaving")
ARMS = REQUIREMENTS + ("control",)
UNIT = "x"

Progress = Callable[[str], None]


class AblationError(Exception):
    pass


@dataclass
class ArmResult:
    arm: str
    status: str = "measured"  # measured | not_run
    honest: float | None = None
    honest_ci: tuple[float, float] | None = None
    ablated: float | None = None
    ablated_ci: tuple[float, float] | None = None
    note: str = ""  # one line for the table
    reason: str = ""  # why the arm was not run
    events: list[str] = field(default_factory=list)  # events holding the evidence
    event: RecordedEvent | None = None  # the AblationMeasured event

    @property
    def distortion(self) -> float | None:
        if self.honest is None or self.ablated is None or self.honest <= 0:
            return None
        return self.ablated / self.honest - 1.0


@dataclass
class ProtocolAblation:
    ablation: str
    kind: str  # case | app
    name: str  # the case id or the application's name
    backend: str  # the backend, or the application's architecture
    subject: str  # the result key
    what: str  # which kernel / which manifest, and the protocol
    machine: str
    quantity: str
    arms: list[ArmResult] = field(default_factory=list)
    honest_events: list[str] = field(default_factory=list)

    @property
    def stream(self) -> str:
        return ablation_stream(self.ablation)


def ablation_stream(ablation: str) -> str:
    return f"ablation/{ablation}"


def _record_arm(result: ProtocolAblation, arm: ArmResult, actor: str) -> RecordedEvent:
    detail = arm.note if not result.what else f"{arm.note} [subject: {result.what}]"
    arm.event = append(NewEvent(stream=result.stream, type="AblationMeasured", actor=actor, payload={
        "ablation": result.ablation, "kind": "protocol", "case": result.name, "backend": result.backend,
        "arm": arm.arm, "budget": 1, "status": arm.status, "reason": arm.reason,
        "measurement_events": list(dict.fromkeys(arm.events)), "detail": detail, "subject": result.subject,
        "honest_value": finite(arm.honest), "honest_ci": _finite_pair(arm.honest_ci),
        "ablated_value": finite(arm.ablated), "ablated_ci": _finite_pair(arm.ablated_ci),
        "distortion": finite(arm.distortion), "unit": UNIT,
    }))
    result.arms.append(arm)
    return arm.event


def _finite_pair(pair) -> list[float] | None:
    if pair is None or not all(v is not None and math.isfinite(v) for v in pair):
        return None
    return [float(pair[0]), float(pair[1])]


# ==== operator cases ======================================================================


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


def _protocol_text(protocol: ProtocolSettings) -> str:
    return (f"{protocol.passes} passes x {protocol.launches} launches, warm-up {protocol.warmup}, "
            f"flush {'on' if protocol.flush else 'off'}, interleave {'on' if protocol.interleave else 'off'}, "
            f"up to {protocol.max_attempts} attempt(s)")


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
                              f"{label}; {_protocol_text(protocol)}", f"{device} ({backend})",
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
    _record_arm(result, row, actor)

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
    _record_arm(result, row, actor)

    # all_dataset_headline: the most favourable pass of the honest measurement
    row = arm("all_dataset_headline")
    bound_passes = honest.bound.timing.pass_medians
    ratios = [b / c for b, c in zip(bound_passes, candidate.timing.pass_medians)]
    best = max(range(len(ratios)), key=ratios.__getitem__)
    row.ablated = ratios[best]
    row.note = (f"a case has one dataset; analogue: the best single pass ({best + 1} of {len(ratios)}) instead of the median "
                f"over all passes, from the honest samples (bound {bound}){noisy()}")
    _record_arm(result, row, actor)

    # warm-up, flush, interleaving: a protocol flag each
    for name, setting, off, what in (("warmup", "warmup", 0, "no warm-up launches"),
                                      ("cache_flush", "flush", False, "no cache flush before launches" if backend == "cpu" else "no L2 flush before launches"),
                                      ("interleaving", "interleave", False, "every pass in the same fixed order")):
        row = arm(name)
        if getattr(protocol, setting) == off:
            row.status, row.reason = "not_run", f"the protocol given already has {setting} = {off}"
            row.note = row.reason
            _record_arm(result, row, actor)
            continue
        say(f"{name}: {what}")
        settings_off = dataclasses.replace(protocol, **{setting: off})
        report = _retime(honest, baselines + [candidate], settings_off, say)
        row.events.append(_record_measurement(result, report, actor, f"{name}: {what}", {"arm": name, "removed": what}))
        row.ablated, row.ablated_ci, bound_name = _speedup(report, "candidate", bound)
        row.note = f"{what}; over {bound_name}{_flags(report)}{noisy(report)}"
        _record_arm(result, row, actor)

    # control: the honest protocol again
    say("control: the honest protocol again")
    row = arm("control")
    report = _retime(honest, baselines + [candidate], protocol, say)
    row.events.append(_record_measurement(result, report, actor, "control: nothing removed", {"arm": "control", "removed": "nothing"}))
    row.ablated, row.ablated_ci, bound_name = _speedup(report, "candidate", bound)
    row.note = f"nothing removed: a second honest timing, the run-to-run noise; over {bound_name}{_flags(report)}{noisy(report)}"
    _record_arm(result, row, actor)
    return result


# ==== applications ========================================================================


def bundled_manifests() -> dict[str, Path]:
    """The bundled applications' manifests (fixtures/apps/*/manifest*.yaml) by their `name`."""
    found = {}
    for path in sorted(BUNDLED_APPS.glob("*/manifest*.yaml")):
        try:
            name = (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("name")
        except (OSError, yaml.YAMLError, AttributeError):
            continue
        if isinstance(name, str):
            found[name] = path
    return found


def resolve_manifest(spec: str) -> Path:
    """A manifest file, a folder holding one manifest (manifest*.yaml), a registered application's
    name, or a bundled application's name (the `name` of a fixtures/apps/*/manifest*.yaml)."""
    path = Path(spec)
    if path.is_file():
        return path
    if path.is_dir():
        inside = sorted(path.glob("manifest*.yaml"))
        if len(inside) == 1:
            return inside[0]
        if inside:
            raise AblationError(f"{spec} holds several manifests; name one: {', '.join(p.name for p in inside)}")
    row = AppRow.objects.filter(name=spec).first()
    if row is not None:
        registered = Path(row.manifest_path)
        return registered if registered.is_absolute() else ROOT / registered
    bundled = bundled_manifests()
    if spec in bundled:
        return bundled[spec]
    registered_names = ", ".join(AppRow.objects.order_by("name").values_list("name", flat=True)) or "none"
    raise AblationError(f"{spec!r} is neither a manifest file, a registered application nor a bundled one "
                        f"(registered: {registered_names}; bundled: {', '.join(bundled) or 'none'})")


def _own_seconds(loaded: LoadedManifest) -> tuple[str | None, str]:
    """The narrowest time the program reports for itself: its timing pattern, else its hotspot pattern."""
    m = loaded.manifest
    if m.timing.pattern:
        return m.timing.pattern, "its own reported time (timing.pattern)"
    if m.hotspot.source == "pattern" and m.hotspot.pattern:
        return m.hotspot.pattern, "its own reported hotspot time (hotspot.pattern)"
    return None, ""


@dataclass(frozen=True)
class AppVariant:
    """One program variant in an ablated application timing: which manifest and switch side
    builds and runs it, its binary, and the clock read from each of its runs."""

    loaded: LoadedManifest
    side: str  # "baseline" | "candidate": the switch value it runs with (runner.VARIANTS)
    binary: Path
    clock: Callable[[runner.RunResult], float | None]


def _time_app_dataset(variants: dict[str, AppVariant], dataset, scratch: Path, protocol: AppProtocol, run_id: str,
                      credited: str, honour_verdict: bool, timing_source: str) -> dict:
    """runner.time_dataset + services.time_dataset for named variants ("baseline" first), each
    with its own clock; when `honour_verdict` is off every timed run counts whatever the program's
    verdict (the verdict is still recorded). Same warm-up, rotation and attempt rule as the gate;
    the payload's speedup is median(baseline) / median(credited)."""
    names = list(variants)
    loaded = variants["baseline"].loaded

    def execute(name: str) -> runner.RunResult:
        v = variants[name]
        return runner.run(v.loaded, v.side, v.binary, dataset, scratch / name)

    kept: Attempts[tuple] = Attempts(protocol.max_attempts)
    for _attempt in kept:
        correct = {name: True for name in names}
        detail = {name: "" for name in names}
        samples: dict[str, list[float]] = {name: [] for name in names}
        for _ in range(protocol.warmup):
            for name in names:
                execute(name)
        if protocol.interleave:
            schedule = [names[p % len(names):] + names[:p % len(names)] for p in range(protocol.passes)]
        else:
            schedule = [[name] for name in names for _ in range(protocol.passes)]
        for order in schedule:
            results = {}
            for name in order:
                results[name] = execute(name)
                ok, why = runner.own_verdict(variants[name].loaded, results[name])
                value = variants[name].clock(results[name])
                if not ok:
                    correct[name], detail[name] = False, f"a timed run: {why}"
                if value is None:
                    correct[name], detail[name] = False, "a timed run: no time"
                elif ok or not honour_verdict:
                    samples[name].append(value)
            if "baseline" in results and results["baseline"].ok:
                for name, other in results.items():
                    if name != "baseline" and other.ok:
                        agree, why = runner.agreement(loaded, results["baseline"], other)
                        if not agree:
                            correct[name], detail[name] = False, f"a timed run: {why}"
        spreads = {name: spread(s) for name, s in samples.items()}
        kept.record(max((s for s in spreads.values() if s is not None), default=math.inf),
                    (correct, detail, samples, spreads, schedule))
    correct, detail, samples, spreads, schedule = kept.kept
    medians = {name: statistics.median(s) if s else None for name, s in samples.items()}
    payload = {
        "app": loaded.name, "run": run_id, "dataset": dataset.name, "args": dataset.args, "correct": correct,
        "correctness_detail": detail, "samples": samples, "medians": medians, "spread": spreads, "order": schedule,
        "noisy": kept.noisy, "timing_source": timing_source,
    }
    if medians["baseline"] and medians[credited] and (all(correct.values()) or not honour_verdict):
        payload["speedup"] = medians["baseline"] / medians[credited]
        payload["speedup_ci"] = list(bootstrap_ratio_ci(samples["baseline"], samples[credited]))
    return payload


def _headline(payloads: list[dict]) -> tuple[float | None, tuple[float, float] | None]:
    if not payloads or any(p.get("speedup") is None for p in payloads):
        return None, None
    return (geomean([p["speedup"] for p in payloads]),
            (geomean([p["speedup_ci"][0] for p in payloads]), geomean([p["speedup_ci"][1] for p in payloads])))


def ablate_app(spec: str, actor: str, protocol: AppProtocol | None = None, wrong_switch: str | None = None,
               progress: Progress | None = None) -> ProtocolAblation:
    """The application gate's measurement of a manifest's two variants over every dataset, then
    the application-level ablations; one AblationMeasured per arm. The manifest is registered
    (AppRegistered, when new or changed); nothing goes through the gate."""
    protocol = protocol or AppProtocol()
    say = progress or (lambda message: None)
    loaded, _ = register(resolve_manifest(spec), actor)
    m = loaded.manifest
    description = machine(m.architecture)
    changed = baseline_mismatches(loaded)
    if changed:
        raise AblationError(f"{m.name}: baseline files differ from the declared original: {', '.join(changed)}")
    if wrong_switch is not None and wrong_switch in (m.switch.baseline, m.switch.candidate):
        raise AblationError(f"--wrong-switch must select a third variant, not the baseline's or the candidate's value ({wrong_switch!r})")
    ablation = str(uuid.uuid4())
    result = ProtocolAblation(
        ablation, "app", m.name, m.architecture, app_result_key(m.architecture, m.name),
        f"manifest {m.name} ({len(m.datasets)} dataset(s)), {protocol.passes} passes, warm-up {protocol.warmup}, "
        f"interleave {'on' if protocol.interleave else 'off'}, timing {m.timing.source}",
        f"{description.get('device', '?')} ({description['backend']})", "all-dataset geometric mean of the speedup")

    def record_payload(payload: dict) -> str:
        return str(append(NewEvent(stream=result.stream, type="AppDatasetMeasured", actor=actor, payload=payload)).event_id)

    def build(target: LoadedManifest, variant: str, folder: Path, label: str) -> tuple[Path, str]:
        folder.mkdir(parents=True, exist_ok=True)
        built = runner.build(target, variant, folder)
        event = append(NewEvent(stream=result.stream, type="AppVariantBuilt", actor=actor, payload={
            "app": m.name, "run": f"{ablation}/{label}", "variant": variant, "ok": built.ok, "command": built.command,
            "seconds": built.seconds, "output_tail": built.output_tail, "binary_hash": built.binary_hash,
            "source_hashes": {name: file_hash(loaded.source_dir / name) for name in m.source.baseline_files}}))
        if not built.ok:
            raise AblationError(f"{m.name}: the {label} {variant} does not build: {built.output_tail[-500:]}")
        return built.binary, str(event.event_id)

    with tempfile.TemporaryDirectory(prefix=f"ablation-{m.name}-") as scratch_name:
        scratch = Path(scratch_name)
        binaries, build_events = {}, []
        for variant in runner.VARIANTS:
            say(f"building the {variant}")
            binaries[variant], event_id = build(loaded, variant, scratch, "honest")
            build_events.append(event_id)
        for dataset in m.datasets:
            say(f"checking both variants on {dataset.name}")
            check = runner.check_dataset(loaded, binaries, dataset, scratch)
            for variant in runner.VARIANTS:
                if not check.correct[variant]:
                    raise AblationError(f"{m.name}: {dataset.name}: the {variant} is not correct ({check.detail[variant]}); "
                                        "a protocol ablation needs a subject the gate would measure")

        def gate_measurement(label: str, settings: AppProtocol) -> tuple[list[dict], list[str]]:
            payloads, ids = [], []
            for dataset in m.datasets:
                payload = time_dataset(loaded, binaries, dataset, scratch, settings, f"{ablation}/{label}", say)
                payloads.append(payload)
                ids.append(record_payload(payload))
            return payloads, ids

        say("honest: the application gate's timing of every dataset")
        honest_payloads, honest_ids = gate_measurement("honest", protocol)
        value, ci = _headline(honest_payloads)
        if value is None:
            bad = next(p for p in honest_payloads if p.get("speedup") is None)
            raise AblationError(f"{m.name}: {bad['dataset']}: a timed run failed: {bad['correctness_detail']}")
        result.honest_events = build_events + honest_ids

        def arm(name: str) -> ArmResult:
            return ArmResult(name, honest=value, honest_ci=ci, events=list(result.honest_events))

        def noisy(payloads: list[dict] | None = None) -> str:
            flags = (["honest run noisy"] if any(p["noisy"] for p in honest_payloads) else []) + (
                ["ablated run noisy"] if payloads is not None and any(p["noisy"] for p in payloads) else [])
            return "".join(f"; {flag}" for flag in flags)

        # correctness_gate
        row = arm("correctness_gate")
        if wrong_switch is None:
            row.status = "not_run"
            row.reason = ("no wrong-but-fast variant to let through: the declared candidate passes its checks on every "
                          "dataset, so ignoring its verdict cannot move the headline; name one with --wrong-switch")
            row.note = row.reason
        else:
            say(f"correctness_gate: the variant of switch {wrong_switch!r}, checked, then timed with its verdict ignored")
            wrong = dataclasses.replace(loaded, manifest=m.model_copy(update={"switch": m.switch.model_copy(update={"candidate": wrong_switch})}))
            folder = scratch / "wrong"
            wrong_binary, event_id = build(wrong, "candidate", folder, "wrong")
            row.events.append(event_id)
            pair = {"baseline": binaries["baseline"], "candidate": wrong_binary}
            failures = []
            for dataset in m.datasets:
                check = runner.check_dataset(wrong, pair, dataset, folder)
                if not check.correct["candidate"]:
                    failures.append(f"{dataset.name}: {check.detail['candidate'][:120]}")
            declared = (lambda r: runner.seconds_of(loaded, r))
            trio = {"baseline": AppVariant(loaded, "baseline", binaries["baseline"], declared),
                    "candidate": AppVariant(loaded, "candidate", binaries["candidate"], declared),
                    WRONG: AppVariant(wrong, "candidate", wrong_binary, declared)}
            payloads = []
            for dataset in m.datasets:
                payload = _time_app_dataset(trio, dataset, folder, protocol, f"{ablation}/correctness_gate", WRONG,
                                            honour_verdict=False, timing_source=f"{m.timing.source} (verdict ignored)")
                payloads.append(payload)
                row.events.append(record_payload(payload))
            row.ablated, row.ablated_ci = _headline(payloads)
            paired = geomean([p["medians"]["candidate"] / p["medians"][WRONG] for p in payloads
                               if p["medians"].get("candidate") and p["medians"].get(WRONG)] or [float("nan")])
            honest_verdict = f"rejected ({'; '.join(failures)})" if failures else "ADMITTED (its checks pass: it is not wrong)"
            row.note = (f"variant {wrong_switch!r}: honest gate {honest_verdict}; verdict ignored, "
                        f"{paired:.2f}x faster than the candidate in the same runs" + noisy(payloads))
        _record_arm(result, row, actor)

        # symmetric_timing
        row = arm("symmetric_timing")
        pattern, own = _own_seconds(loaded)
        if pattern is None:
            row.status = "not_run"
            row.reason = "the program reports no time of its own (no timing or hotspot pattern): only the wall clock exists"
            row.note = row.reason
        else:
            say(f"symmetric_timing: baseline by wall clock, candidate by {own}")
            pair = {"baseline": AppVariant(loaded, "baseline", binaries["baseline"], lambda r: r.wall_seconds),
                    "candidate": AppVariant(loaded, "candidate", binaries["candidate"],
                                            lambda r: runner._matched_seconds(pattern, r.stdout))}
            payloads = []
            for dataset in m.datasets:
                payload = _time_app_dataset(pair, dataset, scratch, protocol, f"{ablation}/symmetric_timing", "candidate",
                                            honour_verdict=True, timing_source=f"baseline: wall; candidate: {own}")
                payloads.append(payload)
                row.events.append(record_payload(payload))
            row.ablated, row.ablated_ci = _headline(payloads)
            row.note = f"baseline by the wall clock of the whole process, candidate by {own}" + noisy(payloads)
        _record_arm(result, row, actor)

        # all_dataset_headline
        row = arm("all_dataset_headline")
        best = max(honest_payloads, key=lambda p: p["speedup"])
        row.ablated, row.ablated_ci = best["speedup"], tuple(best["speedup_ci"])
        row.note = (f"the best single dataset ({best['dataset']}) instead of the geometric mean of all {len(honest_payloads)}"
                    + ("; one dataset, so the rule cannot move the headline here" if len(honest_payloads) == 1 else "")
                    + noisy())
        _record_arm(result, row, actor)

        # warmup, interleaving (the application protocol has no cache flush)
        for name, setting, off, what in (("warmup", "warmup", 0, "no warm-up runs"),
                                          ("interleaving", "interleave", False, "every baseline run, then every candidate run")):
            row = arm(name)
            if getattr(protocol, setting) == off:
                row.status, row.reason = "not_run", f"the protocol given already has {setting} = {off}"
                row.note = row.reason
            else:
                say(f"{name}: {what}")
                payloads, ids = gate_measurement(name, dataclasses.replace(protocol, **{setting: off}))
                row.events += ids
                row.ablated, row.ablated_ci = _headline(payloads)
                row.note = what + noisy(payloads)
            _record_arm(result, row, actor)
            if name == "warmup":
                flush = arm("cache_flush")
                flush.status = "not_run"
                flush.reason = ("the application protocol has no cache flush to remove: every timed run is a fresh process "
                                "(dropping the OS page cache between runs would need root)")
                flush.note = flush.reason
                _record_arm(result, flush, actor)

        # control
        say("control: the honest protocol again")
        row = arm("control")
        payloads, ids = gate_measurement("control", protocol)
        row.events += ids
        row.ablated, row.ablated_ci = _headline(payloads)
        row.note = "nothing removed: a second honest timing, the run-to-run noise" + noisy(payloads)
        _record_arm(result, row, actor)
    return result


# ==== the table ===========================================================================


def table(result: ProtocolAblation) -> str:
    """The printed table: one row per arm in the order of REQUIREMENTS, control last."""
    order = {name: index for index, name in enumerate(ARMS)}
    rows = [("requirement removed", "status", "honest", "ablated", "distortion", "note")]
    for arm in sorted(result.arms, key=lambda a: order[a.arm]):
        rows.append((
            "(none: control)" if arm.arm == "control" else arm.arm,
            arm.status,
            _x(arm.honest, arm.honest_ci),
            _x(arm.ablated, arm.ablated_ci) if arm.status == "measured" else "-",
            f"{arm.distortion:+.1%}" if arm.distortion is not None else "-",
            arm.note,
        ))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    lines = ["  ".join([*(value.ljust(width) for value, width in zip(row[:-1], widths)), row[-1]]).rstrip() for row in rows]
    head = [f"protocol ablation {result.ablation}: {result.kind} {result.name} on {result.machine}",
            f"subject: {result.what}",
            f"value: {result.quantity} ({UNIT}, 95% CI); distortion = ablated / honest - 1"]
    return "\n".join(head + lines)


def _x(value: float | None, ci) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}x" + (f" [{ci[0]:.2f}-{ci[1]:.2f}]" if ci else "")
