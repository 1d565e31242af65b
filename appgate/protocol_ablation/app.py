"""The protocol ablation of an application: both variants over every dataset by the application
gate's protocol, once honestly and once per arm with one requirement removed."""
from __future__ import annotations

import dataclasses
import math
import statistics
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import yaml

from ledger.services import NewEvent, append
from measurement.harness.judge import bootstrap_ratio_ci
from measurement.decisions import Attempts

from .. import runner
from ..builds import probe_hash
from ..manifest import LoadedManifest, baseline_mismatches, file_hash
from ..models import AppRow
from ..projections import result_key as app_result_key
from ..services import AppProtocol, geomean, machine, register, spread, time_dataset

from .common import ROOT, BUNDLED_APPS, WRONG, Progress, AblationError, ArmResult, ProtocolAblation, record_arm


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
    verdict (the verdict is still recorded). Same warm-up, rotation and attempt rule as the gate,
    but each pass's spread read whole: the arms time with clocks of their own (wall time among
    them), so the gate's one-step excuse for a printed clock (verdicts.spread) is not applied;
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
            "source_hashes": {name: file_hash(loaded.source_dir / name) for name in m.source.baseline_files},
            "probe": probe_hash(target)}))
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
        record_arm(result, row, actor)

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
        record_arm(result, row, actor)

        # all_dataset_headline
        row = arm("all_dataset_headline")
        best = max(honest_payloads, key=lambda p: p["speedup"])
        row.ablated, row.ablated_ci = best["speedup"], tuple(best["speedup_ci"])
        row.note = (f"the best single dataset ({best['dataset']}) instead of the geometric mean of all {len(honest_payloads)}"
                    + ("; one dataset, so the rule cannot move the headline here" if len(honest_payloads) == 1 else "")
                    + noisy())
        record_arm(result, row, actor)

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
            record_arm(result, row, actor)
            if name == "warmup":
                flush = arm("cache_flush")
                flush.status = "not_run"
                flush.reason = ("the application protocol has no cache flush to remove: every timed run is a fresh process "
                                "(dropping the OS page cache between runs would need root)")
                flush.note = flush.reason
                record_arm(result, flush, actor)

        # control
        say("control: the honest protocol again")
        row = arm("control")
        payloads, ids = gate_measurement("control", protocol)
        row.events += ids
        row.ablated, row.ablated_ci = _headline(payloads)
        row.note = "nothing removed: a second honest timing, the run-to-run noise" + noisy(payloads)
        record_arm(result, row, actor)
    return result
