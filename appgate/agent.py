"""The App Agent: one application from its hotspot to an integrated (or dropped) optimisation,
every step a milestone event.

M1 locate the hotspot and measure the application's own baseline (exit: BLOCKED when this
machine cannot run the architecture, or the baseline does not build, run or verify; OUT_OF_SCOPE
when no stencil hotspot carries enough of the time for a kernel to matter; each exit with a
machine-readable code); `triage` stops after M1 (BLOCKED also when the baseline runs too short
to time; RESEARCH when in scope: an imported suite's programs are triaged before any is forged);
M2a the framework-level candidate, from the proposer; M2b the Kernel Agent forges the hot
operator's case and the agent takes back an admitted kernel through the forged-kernel library (it
never reads the operator map itself) and splices it into the candidate, over the file the
manifest names as the hot loop's kernel (hotspot.kernel_file), as a recorded patch; M3 the
application gate on that candidate, with the baseline M1 built;
M4 integrate (INTEGRATED) or stop (RESEARCH when the candidate is wrong, DROPPED when it is
correct but not worth it).
"""
from __future__ import annotations

import dataclasses
import statistics
import time
from pathlib import Path
from typing import Any, Callable, NamedTuple

from forge.proposers.base import GenerationFailure
from ledger.selectors import stream_events
from ledger.services import NewEvent, append

from . import builds, runner
from .builds import BuildResult
from .manifest import LoadedManifest
from .models import AppRow
from .proposers import AnthropicAppProposer, AppCandidate, PatchProposer, external_candidate, unified_patch
from .services import (AppGateError, AppGateOutcome, AppProtocol, gate_run_held, machine, record_candidate, register,
                       run_gate, state_code)
from .verdicts import state_after

MIN_HOTSPOT_FRACTION = 0.2  # below it even an infinitely fast kernel gains < 1.25x: out of scope
# In a triage, a baseline that reports less than this on a dataset (its timing clock) is too
# short to time fairly against a candidate (issue 18): clock resolution and launch overhead
# dominate it. The agent on a given manifest leaves such runs to the gate's noise rule.
MIN_BASELINE_SECONDS = 1e-3


# What measures the hotspot share of a baseline whose manifest declares no hotspot pattern (an
# imported suite's programs): (loaded, binary, dataset, scratch) -> {"tool", "share", "top",
# "problem"}, share None when nothing was measured (appgate.profiler).
Profiler = Callable[[Any, Path, Any, Path], dict]


class Exit(NamedTuple):
    """Where M1 (or a later milestone) stops an application: its state, why, and why as a code."""

    state: str
    reason: str
    code: str


def _milestone(app: str, milestone: str, detail: str, actor: str, evidence: dict | None = None) -> None:
    append(NewEvent(stream=f"app/{app}", type="AppMilestoneReached", actor=actor,
                    payload={"app": app, "milestone": milestone, "detail": detail, "evidence": evidence or {}}))


def _state(app: str, state: str, reason: str, actor: str, code: str | None = None) -> None:
    append(NewEvent(stream=f"app/{app}", type="AppStateChanged", actor=actor,
                    payload={"app": app, "state": state, "reason": reason, "code": code}))


def _walls(baseline: dict) -> list[float] | None:
    """M1's wall time a run per dataset, or None when M1 recorded none for some dataset."""
    walls = [values.get("wall_seconds") for values in baseline["datasets"].values()]
    return None if not walls or None in walls else walls


def gate_seconds(baseline: dict, protocol: AppProtocol) -> float | None:
    """What the gate's runs will take, from M1's wall time per dataset: on each, both variants'
    correctness run, warm-ups and interleaved passes, each run taken as long as the baseline's
    (one timing attempt; a noisy dataset takes another). None when M1 recorded no wall time."""
    walls = _walls(baseline)
    return None if walls is None else sum(walls) * 2 * (1 + protocol.warmup + protocol.passes)


def retry_seconds(baseline: dict, protocol: AppProtocol) -> float | None:
    """What a noisy dataset's second timing attempt takes, the longest dataset's: both variants'
    warm-ups and passes again (the correctness runs are not repeated)."""
    walls = _walls(baseline)
    return None if walls is None else max(walls) * 2 * (protocol.warmup + protocol.passes)


def planned_gate_seconds(name: str, protocol: AppProtocol | None = None) -> tuple[float, float] | None:
    """(the gate's runs, a noisy dataset's second attempt) for `name` by its last M1 that timed every
    dataset's run (None: none did, as the triage's M1 did not), so that a device call can leave a
    program whose runs do not fit the time it has left for the next call instead of starting it and
    cutting it, and give one the time for a second attempt where the call has it (hmm-cuda's noisy
    first attempt in session 24 left no time for its second under a plan of one attempt)."""
    protocol = protocol or AppProtocol()
    for event in reversed(stream_events(f"app/{name}")):
        if event.type == "AppMilestoneReached" and event.data["milestone"] == "M1" and "datasets" in event.data["evidence"]:
            evidence = event.data["evidence"]
            needed = gate_seconds(evidence, protocol)
            if needed is not None:
                return needed, retry_seconds(evidence, protocol)
    return None


def run_agent(manifest: str | Path, actor: str, kernel_rounds: int = 0, protocol: AppProtocol | None = None,
              progress: Callable[[str], None] | None = None, proposer: AnthropicAppProposer | PatchProposer | None = None,
              profile: Profiler | None = None, gate_budget_s: float | None = None) -> AppRow:
    """Drive one application through M1..M4. The candidate comes from `proposer` (a patch to the
    application) or, without one, from the `external` proposer: the variant already present in
    the source, selected by the manifest's switch; M2b's kernel, where the manifest names the
    file that holds the hot loop (hotspot.kernel_file), is spliced into it. One gate run from M1
    to M3: the baseline M1 built and ran is the one the gate times. `gate_budget_s`: stop after M1
    (RESEARCH, code over_budget) when the gate's runs would take longer (gate_seconds), so that a
    device call's time goes to programs that can finish in it. The budget counts from the agent's
    start, M1 included, and is the gate's deadline (AppProtocol.deadline: a noisy dataset's further
    attempt that would not end by it is not started, and the verdict is inconclusive instead of
    the run being cut by the caller's time limit)."""
    say = progress or (lambda message: None)
    deadline = None if gate_budget_s is None else time.monotonic() + gate_budget_s
    loaded, _ = register(manifest, actor)
    name = loaded.name
    _state(name, "IN_PROGRESS", "the App Agent started", actor)
    with gate_run_held(name) as (gate_run, scratch):
        say("M1: the baseline and its hotspot")
        baseline, built, stop = _m1(loaded, scratch, actor, profile=profile)
        needed = gate_seconds(baseline, protocol or AppProtocol()) if stop is None else None
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and needed is not None and needed > left:
            runs = ", ".join(f"{dataset}: {values['wall_seconds']:.2f} s a run" for dataset, values in baseline["datasets"].items())
            stop = Exit("RESEARCH", f"M1: not gated: its runs would take about {needed:.0f} s ({runs}), more than the "
                        f"{max(0.0, left):.0f} s left of the {gate_budget_s:g} s allowed; gate it with a larger budget",
                        "over_budget")
        if stop is not None:
            _state(name, stop.state, stop.reason, actor, stop.code)
            return AppRow.objects.get(name=name)
        case = loaded.manifest.hotspot.case
        candidate_event = None
        if proposer is None:
            candidate = external_candidate(loaded)
        else:
            say("M2a: asking the proposer for a patch")
            try:
                candidate = proposer.propose(loaded, baseline)
            except GenerationFailure as failure:
                _state(name, "RESEARCH", f"M2a: the {proposer.name} proposer gave no candidate ({failure.kind}): "
                       f"{failure}", actor, "no_candidate")
                return AppRow.objects.get(name=name)
            candidate_event = str(record_candidate(loaded, candidate, actor).event_id)
        _milestone(name, "M2a", f"candidate from the {candidate.proposer} proposer: {candidate.subject}", actor,
                   {"proposer": candidate.proposer, "hypothesis": candidate.hypothesis, "candidate_event": candidate_event,
                    "switch": loaded.manifest.switch.model_dump(), "usage": candidate.usage})
        if case is None:  # an outside program's hot kernel (profiled) is not one of the forge's operator cases
            detail, evidence, kernel = (f"no operator case: the hotspot ({baseline['hotspot']}) is none of the forge's "
                                        "cases, so no forged kernel is taken back; the candidate is gated as it is",
                                        {"case": None}, None)
        else:
            say(f"M2b: the Kernel Agent on {case}")
            detail, evidence, kernel = _kernel_agent(case, loaded.manifest.architecture, kernel_rounds, actor)
        if kernel is not None:
            spliced, why = _splice(loaded, kernel, candidate, actor)
            detail += f"; {why}"
            if spliced is not None:
                candidate_event = evidence["candidate_event"] = spliced
        _milestone(name, "M2b", detail, actor, evidence)
        say("M3: the application gate")
        if deadline is not None:  # a second timing attempt that would not end by it is not started
            protocol = dataclasses.replace(protocol or AppProtocol(), deadline=deadline)
        outcome = run_gate(manifest, actor, protocol, say, candidate=candidate_event, held=(gate_run, scratch), prebuilt=built)
    _milestone(name, "M3", f"gate verdict: {outcome.verdict}: {outcome.detail}", actor,
               {"verdict_event": str(outcome.verdict_event.event_id)})
    _finish(name, outcome, actor)
    return AppRow.objects.get(name=name)


def triage(manifest: str | Path, actor: str, progress: Callable[[str], None] | None = None, *,
           prebuilt: dict[str, BuildResult] | None = None, profile: Profiler | None = None,
           run_timeout_s: float | None = None, measured: tuple[dict, dict[str, BuildResult]] | None = None) -> AppRow:
    """M1 alone (an imported suite's triage): register, build and run the baseline on every
    dataset, and end in BLOCKED or OUT_OF_SCOPE with the reason's code, or RESEARCH (in scope,
    not yet forged). Nothing is proposed or gated. A parallel triage (appgate.triage) hands in
    the baseline it built (`prebuilt`, by build_args), a `profile` that measures the share of
    the top kernels where the manifest declares no hotspot, and a cap on each run's time; or
    the whole of M1's measurement (`measured`: measure_m1's result, taken in a worker thread
    that writes nothing to the ledger), which is then only recorded here."""
    loaded, _ = register(manifest, actor)
    loaded = capped_runs(loaded, run_timeout_s)
    name = loaded.name
    _state(name, "IN_PROGRESS", "triage: M1 started", actor)
    if measured is not None:
        baseline, _, stop = _m1(loaded, None, actor, measured=measured)
    else:
        with gate_run_held(name) as (_, scratch):
            (progress or (lambda message: None))(f"{name}: M1")
            baseline, _, stop = _m1(loaded, scratch, actor, MIN_BASELINE_SECONDS, prebuilt, profile)
    if stop is None:
        stop = Exit("RESEARCH", f"M1: in scope, not yet forged: hotspot {baseline['hotspot']} carries "
                    f"{baseline['hotspot_fraction']:.0%} of the time", "in_scope")
    _state(name, stop.state, stop.reason, actor, stop.code)
    return AppRow.objects.get(name=name)


def capped_runs(loaded: LoadedManifest, run_timeout_s: float | None) -> LoadedManifest:
    """The manifest with each run's time limit capped at a triage's (None: as it is)."""
    if run_timeout_s is None or loaded.manifest.run.timeout_s <= run_timeout_s:
        return loaded
    run = loaded.manifest.run.model_copy(update={"timeout_s": run_timeout_s})
    return dataclasses.replace(loaded, manifest=loaded.manifest.model_copy(update={"run": run}))


def measure_m1(loaded: LoadedManifest, scratch: Path, min_seconds: float = 0.0,
               prebuilt: dict[str, BuildResult] | None = None,
               profile: Profiler | None = None) -> tuple[dict, dict[str, BuildResult]]:
    """M1's measurement, free of the ledger (a parallel triage runs it in worker threads): the
    baseline built (or `prebuilt`) and run on every dataset, a dataset timed under `min_seconds`
    blocking it (too_short); then, where no hotspot pattern reported a share, `profile`'s (the
    top kernel's share of the GPU kernel time). The baseline dict says the problem, if any."""
    baseline, built = _measure_baseline(loaded, scratch, min_seconds, prebuilt)
    if not baseline["problem"] and baseline["hotspot_fraction"] is None and profile is not None:
        first = loaded.manifest.datasets[0]
        baseline["profile"] = profile(loaded, built[first.build_args].binary, first, scratch)
        baseline["hotspot_fraction"] = baseline["profile"]["share"]
    return baseline, built


def _m1(loaded, scratch: Path | None, actor: str, min_seconds: float = 0.0, prebuilt: dict[str, BuildResult] | None = None,
        profile: Profiler | None = None, measured: tuple[dict, dict[str, BuildResult]] | None = None,
        ) -> tuple[dict, dict[str, BuildResult], Exit | None]:
    """M1: the baseline measured (its builds kept for the gate; `measured`: measured before, by
    measure_m1), and the exit it calls for, or None when the application is in scope (M1
    milestone recorded). A baseline built before M1 (`prebuilt`: a parallel triage builds on
    machines that cannot run it too) is not built again."""
    name, m = loaded.name, loaded.manifest
    try:
        machine(m.architecture, loaded)
    except AppGateError as error:
        code = "needs_cuda" if m.architecture == "cuda" else "machine_unavailable"
        failed = next((b for b in (prebuilt or {}).values() if not b.ok), None)
        built_here = ("" if not prebuilt else "; the baseline builds" if failed is None
                      else f"; the baseline does not build either: {failed.output_tail[-200:]}")
        return {}, {}, Exit("BLOCKED", f"M1: {error}{built_here}", code)
    # without a hotspot pattern, a profile measured before on the same baseline (the triage's) is
    # taken rather than a new one
    earlier = (earlier_profile(name, m.source.baseline_files)
               if measured is None and m.hotspot.source != "pattern" else None)
    baseline, built = measured or measure_m1(loaded, scratch, min_seconds, prebuilt, None if earlier else profile)
    if baseline["problem"]:
        return baseline, built, Exit("BLOCKED", f"M1: {baseline['problem']}", baseline["code"])
    if baseline["hotspot_fraction"] is None and earlier is not None:
        baseline["profile"], baseline["hotspot_fraction"] = earlier, earlier["share"]
    profiled, fraction = baseline.get("profile") or {}, baseline["hotspot_fraction"]
    # the hot loop: the manifest's operator case, else (a triage) the profile's top kernel
    hot = baseline["hotspot"] = m.hotspot.case or (f"kernel {profiled['top'][0]['name']} ({profiled['tool']})"
                                                   if profiled.get("top") else None)
    _milestone(name, "M1", f"baseline runs and verifies on {len(baseline['datasets'])} dataset(s); hotspot "
               + (f"{hot}, {fraction:.0%} of the time" if fraction is not None else "not reported"), actor, baseline)
    if fraction is None or hot is None or fraction < MIN_HOTSPOT_FRACTION:
        code = "hotspot_unmeasured" if fraction is None else "no_hotspot_case" if hot is None else "hotspot_below_share"
        why = f"; {profiled['problem']}" if fraction is None and profiled.get("problem") else ""
        return baseline, built, Exit("OUT_OF_SCOPE", "no stencil hotspot carries at least "
                                     f"{MIN_HOTSPOT_FRACTION:.0%} of the time (measured: "
                                     f"{'none' if fraction is None else f'{fraction:.0%}'}){why}", code)
    return baseline, built, None


def earlier_profile(app: str, baseline_files: dict[str, str]) -> dict | None:
    """The hotspot profile of this app's latest M1 that measured one (a triage's, on the GPU) on
    the same baseline files (the registration before it declared the same sha256s), named by its
    event; None when there is none. The agent on a program without a hotspot pattern takes it
    rather than profile again (a profiled run is a minute of the device)."""
    found, files = None, None
    for event in stream_events(f"app/{app}"):
        if event.type == "AppRegistered":
            files = event.data["manifest"]["source"]["baseline_files"]
        elif (event.type == "AppMilestoneReached" and event.data["milestone"] == "M1" and files == baseline_files
              and (event.data["evidence"].get("profile") or {}).get("share") is not None):
            found = {**event.data["evidence"]["profile"], "from_event": str(event.event_id)}
    return found


def _build_failed(built: BuildResult) -> Exit:
    code = "build_timed_out" if built.output_tail.startswith("build timed out") else "build_failed"
    return Exit("BLOCKED", f"M1: the baseline does not build: {built.output_tail[-300:]}", code)


def _splice(loaded, kernel, candidate: AppCandidate, actor: str) -> tuple[str | None, str]:
    """The taken-back kernel written over the manifest's kernel file (on top of M2a's patch, if
    any), recorded as a candidate patch (AppCandidateProposed, proposer "kernel-agent") that the
    gate builds and judges like any other; (its event id, what was done)."""
    target = loaded.manifest.hotspot.kernel_file
    if target is None:
        return None, "not spliced: the manifest names no hotspot.kernel_file to hold the kernel"
    text = (f"/* Spliced by the App Agent (M2b): the admitted kernel of {kernel.case} ({kernel.backend}), verdict "
            f"{kernel.verdict_event}, source sha256 {kernel.source_hash}. */\n{kernel.source}")
    if not text.endswith("\n"):
        text += "\n"
    files = {**candidate.files, target: text}
    spliced = AppCandidate(
        "kernel-agent", f"the admitted {kernel.case} kernel in {target}" + (f", on top of: {candidate.subject}" if candidate.files else ""),
        f"the forged kernel ({kernel.speedup:.2f}x over its bound on {kernel.case}) runs the hot loop faster than the "
        f"application's own", files, unified_patch(loaded, files))
    event = record_candidate(loaded, spliced, actor)
    return str(event.event_id), f"spliced into {target} (candidate {event.event_id})"


def _finish(name: str, outcome: AppGateOutcome, actor: str) -> None:
    if outcome.verdict == "admitted":
        what = "the candidate patch" if outcome.verdict_event.data.get("candidate") else "the candidate variant"
        _milestone(name, "M4", f"integrated: {what} is the application's optimisation at {outcome.headline:.3f}x", actor,
                   {"verdict_event": str(outcome.verdict_event.event_id), "candidate_event": outcome.verdict_event.data.get("candidate")})
    _state(name, *state_after(outcome.verdict, outcome.reasons, outcome.headline, outcome.detail), actor,
           state_code(outcome.verdict, outcome.reasons))  # as `appgate run`


def _kernel_agent(case: str, backend: str, rounds: int, actor: str) -> tuple[str, dict, Any]:
    """Forge the hot operator's case (when rounds > 0), then ask the library for its kernel."""
    from forge.library import NoForgedKernel, lookup
    from forge.runner import run_campaign
    from forge.services import start_campaign

    evidence: dict = {"case": case, "backend": backend, "rounds": rounds}
    if rounds > 0:
        campaign = start_campaign([case], backend, "levers", rounds, actor)
        run_campaign(campaign, "levers", actor)
        evidence["campaign"] = campaign
    try:
        kernel = lookup(case, backend)
    except NoForgedKernel as missing:
        evidence["kernel"] = None
        return f"no admitted kernel for {case} to take back: {missing}", evidence, None
    evidence["kernel"] = {"case": kernel.case, "source_hash": kernel.source_hash, "verdict_event": kernel.verdict_event,
                          "speedup": kernel.speedup, "status": kernel.status}
    return (f"took back the admitted kernel for {kernel.case} ({kernel.speedup:.2f}x over its bound, {kernel.status})",
            evidence, kernel)


def _measure_baseline(loaded, scratch: Path, min_seconds: float,
                      prebuilt: dict[str, BuildResult] | None = None) -> tuple[dict, dict[str, BuildResult]]:
    """Build the baseline (once per distinct build_args, in the gate run's scratch: the gate
    reuses these builds; or take `prebuilt`) and run it once per dataset: its own verdict, time
    and hotspot share."""
    result: dict = {"problem": "", "code": "", "datasets": {}, "hotspot_fraction": None}
    built: dict[str, BuildResult] = dict(prebuilt or {})
    for build_args in builds.build_arguments(loaded):
        if build_args not in built:
            built[build_args] = builds.build(loaded, "baseline", scratch, build_args=build_args)
        if not built[build_args].ok:
            exit_ = _build_failed(built[build_args])
            result["problem"], result["code"] = exit_.reason.removeprefix("M1: "), exit_.code
            return result, built
    fractions = []
    for dataset in loaded.manifest.datasets:
        ran = runner.run(loaded, "baseline", built[dataset.build_args].binary, dataset, scratch)
        code, why = runner.judge_run(loaded, ran)
        seconds, hot = runner.seconds_of(loaded, ran), runner.hotspot_of(loaded, ran)
        if not code and seconds < min_seconds:
            code, why = "too_short", (f"{seconds * 1e3:.3g} ms by its clock ({loaded.manifest.timing.source}), "
                                      f"under the {min_seconds * 1e3:g} ms a fair timing needs")
        if code:
            result["problem"], result["code"] = f"the baseline fails on {dataset.name}: {why}", code
            return result, built
        # the run's wall time beside the program's clock: a gate runs each dataset ~17 times, so this,
        # not the kernel time, is what a device call's budget for the program must hold; to the microsecond: a
        # tiny program's run, under half a millisecond, rounded to the millisecond read 0.0
        result["datasets"][dataset.name] = {"seconds": seconds, "hotspot_seconds": hot, "wall_seconds": round(ran.wall_seconds, 6)}
        if seconds and hot is not None:
            fractions.append(min(1.0, hot / seconds))
    result["hotspot_fraction"] = statistics.median(fractions) if fractions else None
    return result, built
