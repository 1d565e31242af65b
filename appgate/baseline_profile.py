"""`appgate profile`: the baseline's quality (ncu's speed of light, appgate.profiler) measured on
its own, so that an application the triage or the App Agent already judged gets it without its
state changing (issue 18's application table, docs/appgate.md#baseline-quality).

Why not the triage again: it records a new M1 and state changes, so an INTEGRATED application
would pass through IN_PROGRESS and end in the triage's RESEARCH. Here the registered manifest's
baseline is built for its first dataset and run once under the profiler, in a gate run's scratch
under its lease (the reaper removes the folder if this process dies), and the one fact recorded
is AppBaselineProfiled on the app's stream: no AppStateChanged, no milestone. A baseline that
does not build or a profiled run that fails is recorded too, its `problem` saying why, so that a
device call's log and the ledger say the same of what was tried.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from ledger.records import RecordedEvent
from ledger.services import NewEvent, append

from . import builds, profiler
from .events import AppBaselineProfiled
from .manifest import baseline_mismatches, load_manifest
from .models import AppRow
from .services import AppGateError, gate_run_held, machine, register


# ncu launches measured: with the speed-of-light metrics each launch is replayed for several passes, and
# the triage's 200 did not end in 59 s (mask) or 77 s (haccmk) on the H200 (docs/benchmarks/
# hecbench_forged_h200_19.log, _20.log); the quality is of the first launches, as the profile says
LAUNCHES = 20


def profile_baseline(manifest: str | Path, actor: str, *, tool: str, timeout_s: float,
                     progress: Callable[[str], None] | None = None) -> RecordedEvent:
    """Profile the registered application of `manifest` with `tool` (one of profiler.TOOLS, on
    the programs' PATH) on its first dataset, the profiled run limited to `timeout_s`; returns the
    AppBaselineProfiled recorded. AppGateError, with nothing recorded, for a tool not here, an
    application never registered, a program that is not CUDA, or source files that are not the
    baseline the manifest declares (the profile would be of another program)."""
    say = progress or (lambda message: None)
    if not profiler.on_path(tool):
        raise AppGateError(f"{tool} is not on this machine's PATH: profile where it is (the GPU machine), "
                           f"or choose another with --profiler ({', '.join(profiler.TOOLS)})")
    loaded = load_manifest(manifest)
    if not AppRow.objects.filter(name=loaded.name).exists():
        raise AppGateError(f"{loaded.name} is not registered: register it first (`manage.py appgate register "
                           f"{manifest}`; a suite import registers its programs)")
    if loaded.manifest.architecture != "cuda":
        raise AppGateError(f"{loaded.name} is a {loaded.manifest.architecture} program: {tool} profiles GPU kernels, "
                           "so only CUDA programs have a baseline quality")
    changed = baseline_mismatches(loaded)
    if changed:
        raise AppGateError(f"{loaded.name}: the source's {', '.join(changed)} differ from the baseline the manifest "
                           "declares: restore the upstream files, or import the program again")
    described = machine(loaded.manifest.architecture, loaded)  # AppGateError where no GPU is here
    loaded, _ = register(manifest, actor)  # unchanged: records nothing; changed: the new version it profiles
    dataset = loaded.manifest.datasets[0]
    with gate_run_held(loaded.name) as (_, scratch):
        say(f"{loaded.name}: building the baseline for {dataset.name}")
        built = builds.build(loaded, "baseline", scratch, build_args=dataset.build_args)
        if built.ok:
            say(f"{loaded.name}: one run of {dataset.name} under {tool}")
            profile = profiler.measure(loaded, built.binary, dataset, scratch, tool=tool, timeout_s=timeout_s,
                                       launches=LAUNCHES)
        else:
            profile = profiler.unmeasured(f"the baseline does not build: {built.output_tail[-300:]}", tool)
    payload = AppBaselineProfiled(app=loaded.name, dataset=dataset.name, tool=tool, profile=profile,
                                  binary_hash=built.binary_hash,
                                  baseline_files=loaded.manifest.source.baseline_files, machine=described)
    return append(NewEvent(stream=f"app/{loaded.name}", type="AppBaselineProfiled", actor=actor,
                           payload=payload.model_dump(mode="json")))
