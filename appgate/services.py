"""The application gate: register a manifest, build and check both variants, time every dataset
with the canonical interleaved passes, and record a verdict whose headline is the geometric mean
over all datasets (never a single dataset). Re-runs revise a standing result by appending
`ResultRetracted` / `ResultDowngraded`, as the operator gate does, and only on conclusive
evidence: a re-run with a noisy dataset is `inconclusive` and changes nothing.

A gate run holds a lease (ledger/leases.py) whose scratch folder holds its builds and runs: when
its process dies, the reaper closes the run with AppGateAbandoned and removes the folder.
"""
from __future__ import annotations

import hashlib
import math
import statistics
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from django.conf import settings

from ledger import leases
from ledger.decide import append_decided
from ledger.models import Event
from ledger.services import NewEvent, append, record_from_row
from measurement.decisions import Attempts
from measurement.harness.judge import bootstrap_ratio_ci

from . import build_step, builds, runner
from .builds import BuildResult
from .confined import recorded_environment
from .manifest import LoadedManifest, baseline_mismatches, load_manifest
from .models import AppRow
from .proposers import AppCandidate
from .projections import result_key
from .verdicts import (FLOOR, amdahl_bounds, checks_of, conclude, geomean, rerun_revision, spread, step_widened_ci,  # noqa: F401
                       state_after, verdict_name)

ROOT = Path(settings.BASE_DIR)


class AppGateError(Exception):
    pass


@dataclass(frozen=True)
class AppProtocol:
    passes: int = 7
    warmup: int = 1
    interleave: bool = True
    max_attempts: int = 2  # timing attempts per dataset while a spread exceeds the regression band
    # the time.monotonic() by which the gate's runs are to end (None: no limit); a further timing
    # attempt that would end past it is not started and the dataset stays noisy (inconclusive)
    deadline: float | None = None


@dataclass
class AppGateOutcome:
    verdict: str
    reasons: list[str]
    detail: str
    headline: float | None
    datasets: dict[str, float | None]
    verdict_event: Any
    measured: list[dict] = field(default_factory=list)  # per dataset: the AppDatasetMeasured payload
    inconclusive: str = ""  # why a re-run's verdict is inconclusive; "" otherwise


def _shown_path(path: Path) -> str:
    resolved = path.resolve()
    return str(resolved.relative_to(ROOT)) if resolved.is_relative_to(ROOT) else str(resolved)


def register(path: str | Path, actor: str) -> tuple[LoadedManifest, Any | None]:
    """Validate and record the manifest (ManifestError lists every problem; nothing is recorded
    then). Registering the same manifest again records nothing."""
    loaded = load_manifest(path)
    digest = hashlib.sha256(loaded.text.encode()).hexdigest()
    row = AppRow.objects.filter(name=loaded.name).first()
    if row is not None and row.manifest_hash == digest:
        return loaded, None
    event = append(NewEvent(stream=f"app/{loaded.name}", type="AppRegistered", actor=actor, payload={
        "app": loaded.name, "architecture": loaded.manifest.architecture, "manifest": loaded.manifest.model_dump(mode="json"),
        "manifest_text": loaded.text, "manifest_hash": digest, "manifest_path": _shown_path(loaded.path),
        "source_dir": _shown_path(loaded.source_dir)}))
    return loaded, event


# What the operator backend's description says of its own kernels' compiler, not the app's build.
OPERATOR_TOOLCHAIN = ("compiler", "compiler_version", "compiler_path", "flags", "options", "arch")


def machine(architecture: str, loaded: LoadedManifest | None = None) -> dict[str, Any]:
    """The measuring machine, from the measurement backend of the manifest's architecture; for
    an app (`loaded`), its declared environment and own toolchain instead of the operator
    backend's compiler and flags."""
    from measurement.backends import get_backend
    from measurement.harness.isolation import describe as isolation_description

    try:
        description = get_backend(architecture).describe()
        isolation = isolation_description()  # builds and runs are confined (appgate.runner); no sandbox, no gate
    except Exception as error:  # no GPU, no compiler, no sandbox...
        raise AppGateError(f"this machine cannot run {architecture} applications: {error}") from None
    scalars = {k: v for k, v in description.items() if isinstance(v, (str, int, float, bool)) or v is None}
    if loaded is None:
        return {"backend": architecture, **scalars, "isolation": isolation}
    return {"backend": architecture, **{k: v for k, v in scalars.items() if k not in OPERATOR_TOOLCHAIN},
            "isolation": isolation, "environment": recorded_environment(loaded), "toolchain": builds.toolchain(loaded)}


def record_candidate(loaded: LoadedManifest, candidate: AppCandidate, actor: str):
    """Put a proposed patch in the ledger; the gate builds the candidate from this record."""
    return append(NewEvent(stream=f"app/{loaded.name}", type="AppCandidateProposed", actor=actor, payload={
        "app": loaded.name, "proposer": candidate.proposer, "subject": candidate.subject, "hypothesis": candidate.hypothesis,
        "files": candidate.files, "patch": candidate.patch, "usage": candidate.usage,
        "base_hashes": {name: loaded.manifest.source.baseline_files[name] for name in candidate.files}}))


def _candidate_files(loaded: LoadedManifest, candidate: str) -> tuple[dict[str, str], list[str]]:
    """The patch's files, and the files whose baseline changed since it was proposed."""
    row = Event.objects.filter(event_id=candidate, type="AppCandidateProposed").first()
    data = record_from_row(row).data if row else None
    if data is None or data["app"] != loaded.name:
        raise AppGateError(f"no candidate patch {candidate} for {loaded.name} in the ledger")
    declared = loaded.manifest.source.baseline_files
    return data["files"], [name for name, digest in data["base_hashes"].items() if declared.get(name) != digest]


@contextmanager
def gate_run_held(app: str) -> Iterator[tuple[str, Path]]:
    """A gate run's id and scratch folder under its lease (the reaper closes it if this process
    dies); the App Agent holds one from M1, where it builds the baseline, to the gate in M3."""
    gate_run = str(uuid.uuid4())
    lease = leases.take("appgate-run", f"{app}/{gate_run}", f"app/{app}/run/{gate_run}", scratch=True)
    with leases.holding(lease):
        yield gate_run, Path(lease.scratch)


def run_gate(path: str | Path, actor: str, protocol: AppProtocol | None = None,
             progress: Callable[[str], None] | None = None, revises: str | None = None,
             candidate: str | None = None, *, held: tuple[str, Path] | None = None,
             prebuilt: dict[str, BuildResult] | None = None) -> AppGateOutcome:
    """The gate on one manifest. `candidate`: an AppCandidateProposed id whose patch is the
    candidate (built from a patched copy with the candidate switch); without it the candidate is
    the switch's variant of the unchanged source. `held`: a gate run already held
    (gate_run_held), with the baseline builds in its scratch (`prebuilt`, by build_args)."""
    unregistered = load_manifest(path)  # refused before anything is recorded where it cannot run (a CUDA app here)
    machine(unregistered.manifest.architecture, unregistered)
    loaded, _ = register(path, actor)
    arguments = (actor, protocol or AppProtocol(), progress or (lambda message: None), revises, candidate, prebuilt)
    if held is not None:
        return _run_gate(loaded, *held, *arguments)
    with gate_run_held(loaded.name) as (gate_run, scratch):
        return _run_gate(loaded, gate_run, scratch, *arguments)


def _run_gate(loaded: LoadedManifest, gate_run: str, scratch: Path, actor: str, protocol: AppProtocol,
              say: Callable[[str], None], revises: str | None, candidate: str | None,
              prebuilt: dict[str, BuildResult] | None) -> AppGateOutcome:
    m = loaded.manifest
    description = machine(m.architecture, loaded)
    upstream = builds.upstream(loaded)  # the baseline files against the checkout's commit (None: no git)
    stream = f"app/{m.name}"
    evidence: list[str] = []
    measured: list[dict] = []

    def verdict(reasons: list[str], detail: str, datasets: dict | None = None, headline: float | None = None,
                headline_ci=None, amdahl: dict | None = None, inconclusive: str = "",
                noisy: list[str] | None = None) -> AppGateOutcome:
        name = verdict_name(reasons, inconclusive, self_checked=not m.correctness.compare)
        payload = {
            "result": result_key(m.architecture, m.name), "app": m.name, "run": gate_run,
            "verdict": name, "reasons": reasons, "checks": checks_of(loaded), "noisy": noisy or [],
            "detail": f"{inconclusive}; {detail}" if inconclusive else detail,
            "headline": headline, "headline_ci": headline_ci, "datasets": datasets or {},
            "real": name == "admitted" and description["backend"] == m.architecture,
            "architecture": m.architecture, "machine": description, "measurements": evidence, "revises": revises,
            "candidate": candidate, "upstream": upstream, **(amdahl or {}),
        }
        event = append(NewEvent(stream=stream, type="AppGateVerdict", actor=actor, payload=payload))
        return AppGateOutcome(payload["verdict"], reasons, payload["detail"], headline, payload["datasets"], event,
                              measured, inconclusive)

    changed = baseline_mismatches(loaded)
    if changed:
        return verdict(["baseline_modified"], f"baseline files differ from the declared original: {', '.join(changed)}")
    if upstream and upstream["differs"]:
        return verdict(["baseline_modified"], f"baseline files differ from upstream commit {upstream['commit']} of "
                       f"{upstream['repository']}: {', '.join(upstream['differs'])}")
    patch, stale = _candidate_files(loaded, candidate) if candidate else ({}, [])
    if stale:
        return verdict(["candidate_stale"], f"the patch was proposed against another baseline of {', '.join(stale)}")
    built = build_step.build_variants(loaded, gate_run, scratch, actor, patch=patch, upstream=upstream, say=say,
                                      prebuilt=prebuilt)
    evidence += built.evidence
    if built.reasons:
        return verdict(built.reasons, built.detail)
    checked = {}  # seconds each dataset's check of both variants took
    for dataset in m.datasets:  # every dataset, both variants, before any timing
        say(f"checking both variants on {dataset.name}")
        check_started = time.monotonic()
        check = runner.check_dataset(loaded, built.for_dataset(dataset), dataset, scratch)
        checked[dataset.name] = time.monotonic() - check_started
        for variant in runner.VARIANTS:
            if not check.correct[variant]:
                return verdict([f"{variant}_incorrect"], f"{dataset.name}: {variant}: {check.detail[variant]}")
    deadline = math.inf if protocol.deadline is None else protocol.deadline
    for number, dataset in enumerate(m.datasets):
        # the later datasets' first attempts, each as long as its check's runs times the warm-ups and passes
        later = sum(checked[d.name] for d in m.datasets[number + 1:]) * (protocol.warmup + protocol.passes)
        payload = time_dataset(loaded, built.for_dataset(dataset), dataset, scratch, protocol, gate_run, say,
                               deadline - later)
        event = append(NewEvent(stream=stream, type="AppDatasetMeasured", actor=actor, payload=payload))
        evidence.append(str(event.event_id))
        measured.append(payload)
    failed = [p for p in measured if not all(p["correct"].values())]
    if failed:
        variant = next(v for v in runner.VARIANTS if not failed[0]["correct"][v])
        return verdict([f"{variant}_incorrect"], f"{failed[0]['dataset']}: {variant}: {failed[0]['correctness_detail'][variant]}")
    c = conclude(measured)  # noisy after every attempt: inconclusive, first runs included (appgate.verdicts)
    return verdict(c.reasons, c.detail, c.datasets, c.headline, c.ci, c.amdahl, c.inconclusive, c.noisy)


def time_dataset(loaded, binaries, dataset, scratch, protocol: AppProtocol, gate_run: str, say,
                 deadline: float = math.inf) -> dict:
    """The dataset's timing attempts, the quietest kept. A further attempt is started only when
    one as long as the last ends by `deadline` (a time.monotonic()): one cut by the caller's time limit would lose
    the whole gate run (hmm-cuda lost 247 s of an H200 call so on 2026-12-03); the dataset then
    stays noisy, and the verdict inconclusive, with the reason recorded."""
    attempts: Attempts[tuple[runner.DatasetMeasurement, dict]] = Attempts(protocol.max_attempts)  # the quietest kept
    took, not_started, made = 0.0, None, 0
    for attempt in attempts:
        left = deadline - time.monotonic()
        if attempt and took > left:
            not_started = (f"attempt {attempt + 1} not started: it would take about {took:.0f} s, "
                           f"{max(0.0, left):.0f} s of the gate's budget left")
            say(f"timing {dataset.name}: {not_started}")
            break
        say(f"timing {dataset.name}: {protocol.passes} interleaved passes (attempt {attempt + 1})")
        attempt_started = time.monotonic()
        result = runner.time_dataset(loaded, binaries, dataset, scratch, protocol.passes, protocol.interleave, protocol.warmup)
        took, made = time.monotonic() - attempt_started, made + 1
        steps = result.clock_step
        spreads = {v: spread(s, steps.get(v), steps.get("baseline")) for v, s in result.samples.items()}
        attempts.record(max((s for s in spreads.values() if s is not None), default=math.inf), (result, spreads))
        if not all(result.correct.values()):
            break
    result, spreads = attempts.kept
    medians = {v: statistics.median(s) if s else None for v, s in result.samples.items()}
    payload = {
        "app": loaded.name, "run": gate_run, "dataset": dataset.name, "args": dataset.args,
        "inputs": runner.input_hashes(loaded, dataset),
        "correct": result.correct, "correctness_detail": result.detail, "samples": result.samples,
        "hotspot_samples": result.hotspot, "medians": medians, "spread": spreads, "order": result.order,
        "noisy": attempts.noisy, "attempts": made, "attempt_not_started": not_started,
        "timing_source": loaded.manifest.timing.source, "clock_step": result.clock_step,
        # what a one-step excuse (verdicts.spread) set to 0, as measured
        "excused": {v: spread(s) for v, s in result.samples.items() if spreads[v] == 0 and spread(s)},
        "wall_samples": result.wall,
    }
    if all(result.correct.values()) and all(medians.values()):
        payload["speedup"] = medians["baseline"] / medians["candidate"]
        payload["speedup_ci"] = step_widened_ci(bootstrap_ratio_ci(result.samples["baseline"], result.samples["candidate"]),
                                                medians, result.clock_step)
        hot = result.hotspot.get("baseline") or []
        if hot:
            payload["hotspot_fraction"] = min(1.0, statistics.median(hot) / medians["baseline"])
    return payload


STANDING = ("admitted", "downgraded")  # the statuses a re-run re-checks


def rerun(app: str, actor: str, protocol: AppProtocol | None = None, progress=None) -> tuple[AppGateOutcome, Any | None]:
    """Re-run the gate on an application's registered manifest; retract or downgrade its standing
    result when it no longer holds."""
    row = AppRow.objects.filter(name=app).first()
    if row is None:
        known = ", ".join(AppRow.objects.order_by("name").values_list("name", flat=True)) or "none"
        raise AppGateError(f"no application named {app!r} is registered (registered: {known})")
    if row.status not in STANDING:
        raise AppGateError(f"{app} has no standing result to re-run (status: {row.status or 'never gated'})")
    path = Path(row.manifest_path)
    standing = record_from_row(Event.objects.get(event_id=row.verdict_event)).data
    outcome = run_gate(path if path.is_absolute() else ROOT / path, actor, protocol, progress, revises=row.verdict_event,
                       candidate=standing.get("candidate"))
    common = {"result": row.result, "rerun": str(outcome.verdict_event.event_id), "revises": row.verdict_event}

    def decide() -> list[NewEvent]:
        """The revision, decided on the result as it stands when recorded: none when another admission
        replaced the verdict re-run, or it was retracted, meanwhile (the measurement is of a result gone).
        Admissions land on the app's stream, not the result's: one between this read and the append is
        not caught by the result stream's version (docs/architecture.md, "Appends that decide")."""
        now = AppRow.objects.filter(name=app).values("verdict_event", "status", "headline").first()
        own = str(outcome.verdict_event.event_id)  # an admitted re-run's verdict stands in the row itself
        if now is None or now["verdict_event"] not in (row.verdict_event, own) or now["status"] not in STANDING:
            return []
        standing = row.headline if now["verdict_event"] == own else now["headline"]
        kind = rerun_revision(outcome.verdict, outcome.headline, outcome.verdict_event.data["headline_ci"],
                              standing, outcome.inconclusive)
        if kind == "ResultRetracted":
            return [NewEvent(stream=row.result, type=kind, actor=actor, payload={
                **common, "reason": f"gate re-run: {', '.join(outcome.reasons)}: {outcome.detail}"})]
        if kind == "ResultDowngraded":
            return [NewEvent(stream=row.result, type=kind, actor=actor, payload={
                **common, "from_value": standing, "to_value": outcome.headline, "unit": "x",
                "reason": f"gate re-run measured {outcome.detail}"})]
        return []

    revision = append_decided(row.result, decide)  # style rule 5: at the result stream's version read with the row
    return outcome, revision[0] if revision else None


def settle_state(outcome: AppGateOutcome, actor: str):
    """The application's state after a gate run of `appgate run` / `rerun`, as the App Agent's M4
    sets it (appgate.verdicts.state_after)."""
    return _settle(outcome.verdict_event.data, actor)


def settle_unsettled(actor: str) -> list:
    """The state each application's last gate verdict leads to, where no state change followed
    that verdict: the runs of benchmarks/appgate_bundled.py before it settled states (the
    committed exports the demo imports) would otherwise show REGISTERED beside an admitted
    headline. Returns the AppStateChanged events appended."""
    last: dict[str, Any] = {}
    for row in Event.objects.filter(type__in=["AppGateVerdict", "AppStateChanged"]).order_by("position"):
        last[row.stream] = row
    unsettled = [record_from_row(row).data for row in last.values() if row.type == "AppGateVerdict"]
    return [_settle(verdict, actor) for verdict in unsettled]


def _settle(verdict: dict, actor: str):
    state, reason = state_after(verdict["verdict"], verdict["reasons"], verdict.get("headline"), verdict["detail"])
    return append(NewEvent(stream=f"app/{verdict['app']}", type="AppStateChanged", actor=actor, payload={
        "app": verdict["app"], "state": state, "reason": reason, "code": state_code(verdict["verdict"], verdict["reasons"])}))


def state_code(verdict: str, reasons: list[str]) -> str:
    """The code of the state a gate verdict leads to: a rejection's first reason (below_floor,
    candidate_incorrect, ...), otherwise the verdict's name (admitted, self_checked, inconclusive)."""
    return reasons[0] if verdict == "rejected" and reasons else verdict.replace("-", "_")


def close_orphaned_runs(actor: str) -> list[str]:
    """Close every gate run that began (its builds or measurements were recorded) but has neither
    a verdict nor an abandoned event, and that no live process holds: a lease is taken with the
    run's first event, so a run without one was left by a process that died where this ledger's
    reaper could not see it (a device machine whose export this ledger imported; leases do not
    travel). Its application leaves IN_PROGRESS as the reaper's would. Returns "<app>/<run>"."""
    began: dict[tuple[str, str], int] = {}
    ended: set[tuple[str, str]] = set()
    for row in Event.objects.filter(stream__startswith="app/", type__in=[  # an ablation's runs are its own
            "AppVariantBuilt", "AppDatasetMeasured", "AppGateVerdict", "AppGateAbandoned"]).order_by("position").iterator():
        data = record_from_row(row).data
        key = (data["app"], data["run"])
        if row.type in ("AppGateVerdict", "AppGateAbandoned"):
            ended.add(key)
        else:
            began.setdefault(key, row.position)
    why = "no process holds it: it was left open by one that died where this ledger's reaper could not see it"
    open_runs = sorted(set(began) - ended, key=began.get)
    return [f"{app}/{run}" for app, run in open_runs
            if leases.is_held(f"app/{app}/run/{run}") is None and abandon_run(f"{app}/{run}", why, None, actor=actor)]


def abandon_run(subject: str, reason: str, worker: dict[str, Any] | None, *, actor: str = leases.REAPER) -> bool:
    """The reaper's handler for lease kind "appgate-run" (subject "<app>/<run>"): close a gate run
    whose process died, unless it reached its verdict (or was closed) before."""
    app, run = subject.split("/", 1)
    stream = f"app/{app}"
    ended = Event.objects.filter(stream=stream, type__in=["AppGateVerdict", "AppGateAbandoned"], body__contains=f'"run":"{run}"')
    closed = leases.append_while_open(stream, lambda: not ended.exists(), "AppGateAbandoned",
                                      {"app": app, "run": run, "reason": reason, "worker": worker}, actor=actor)
    if closed and AppRow.objects.filter(name=app, state="IN_PROGRESS").exists():
        _leave_in_progress(app, run, reason, actor)
    return closed


def _leave_in_progress(app: str, run: str, reason: str, actor: str) -> None:
    """An App Agent or triage that died left its application IN_PROGRESS: it goes back to the state
    it had before that run began (BLOCKED when it had none), so the table never shows work that
    nobody does; code `abandoned` says why and that running it again is the way on."""
    states = (record_from_row(row).data for row in Event.objects.filter(stream=f"app/{app}", type="AppStateChanged")
              .order_by("-position").iterator())
    before = next((data for data in states if data["state"] != "IN_PROGRESS"), None)  # newest first: read no further
    append(NewEvent(stream=f"app/{app}", type="AppStateChanged", actor=actor, payload={
        "app": app, "state": before["state"] if before else "BLOCKED", "code": "abandoned",
        "reason": f"gate run {run} abandoned ({reason}); "
                  + (f"back to its state before it: {before['reason']}" if before else "no state before it")}))

