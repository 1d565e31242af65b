"""Event types owned by the application gate and the App Agent."""
from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import Field

from ledger.event_types import Payload, event_type
from ledger.leases import WorkerIdentity

Milestone = Literal["M1", "M2a", "M2b", "M3", "M4"]
AppState = Literal["IN_PROGRESS", "OUT_OF_SCOPE", "BLOCKED", "RESEARCH", "DROPPED", "INTEGRATED"]
VariantName = Literal["baseline", "candidate"]


@event_type("AppRegistered", owner="appgate")
class AppRegistered(Payload):
    """A manifest accepted by the schema; a changed manifest registers again (a new version)."""

    app: str
    architecture: Literal["cpu", "cuda"]
    manifest: dict[str, Any]
    manifest_text: str
    manifest_hash: str
    manifest_path: str  # as given (relative to the project for bundled apps)
    source_dir: str


@event_type("AppMilestoneReached", owner="appgate")
class AppMilestoneReached(Payload):
    app: str
    milestone: Milestone
    detail: str
    evidence: dict[str, Any] = Field(default_factory=dict)


@event_type("AppStateChanged", owner="appgate")
class AppStateChanged(Payload):
    app: str
    state: AppState
    reason: str


@event_type("AppStateChanged", owner="appgate", version=2,
            upcast_from_previous=lambda payload: {**payload, "code": None})
class AppStateChangedV2(AppStateChanged):
    # v2 (issue 18): the reason as a machine-readable code beside its text, so that a table of a
    # hundred triaged programs can be counted by reason (docs/appgate.md#triage: needs_cuda,
    # build_failed, own_check_failed, too_short, ...; a gate verdict's name or first reason).
    # None: not recorded (v1).
    code: Optional[str] = Field(default=None, pattern=r"^[a-z][a-z0-9_]*$")


@event_type("AppCandidateProposed", owner="appgate")
class AppCandidateProposed(Payload):
    """A patch to the application (the anthropic proposer): the gate builds the candidate from it."""

    app: str
    proposer: str
    subject: str
    hypothesis: str
    files: dict[str, str]  # path in the source folder -> full new text
    base_hashes: dict[str, str]  # the baseline sha256 of each file the patch replaces
    patch: str  # the same change as a unified diff, for reviewers
    usage: dict[str, Any] = Field(default_factory=dict)


@event_type("AppVariantBuilt", owner="appgate")
class AppVariantBuilt(Payload):
    app: str
    run: str  # the gate run
    variant: VariantName
    ok: bool
    command: list[str]
    seconds: float
    output_tail: str = ""
    binary_hash: Optional[str] = None
    source_hashes: dict[str, str] = Field(default_factory=dict)


@event_type("AppVariantBuilt", owner="appgate", version=2,
            upcast_from_previous=lambda payload: {**payload, "build_args": "", "upstream": None})
class AppVariantBuiltV2(AppVariantBuilt):
    # v2 (issue 17): each variant is built from a fresh copy, once per distinct compile-time
    # arguments of the datasets; the baseline's build carries its check against the upstream git
    # commit: {"repository", "commit", "files": {name: {"path", "upstream_blob", "blob"}},
    # "differs": [names]}, None where the source is no git checkout (and for the candidate).
    build_args: str = ""
    upstream: Optional[dict[str, Any]] = None


@event_type("AppVariantBuilt", owner="appgate", version=3, upcast_from_previous=lambda payload: {**payload, "probe": None})
class AppVariantBuiltV3(AppVariantBuiltV2):
    # v3: the sha256 of the manifest's probe (correctness.probe), applied to this variant's source
    # before it built; None without one. The baseline is then upstream's code plus the probe.
    probe: Optional[str] = None


@event_type("AppDatasetMeasured", owner="appgate")
class AppDatasetMeasured(Payload):
    """One dataset: both variants' correctness runs and their interleaved timed passes."""

    app: str
    run: str
    dataset: str
    args: str
    correct: dict[str, bool]  # variant -> the program's own verdict on every run of it
    correctness_detail: dict[str, str]
    samples: dict[str, list[float]]  # variant -> seconds per pass (timing source)
    hotspot_samples: dict[str, list[float]] = Field(default_factory=dict)
    medians: dict[str, Optional[float]] = Field(default_factory=dict)
    spread: dict[str, Optional[float]] = Field(default_factory=dict)
    order: list[list[str]] = Field(default_factory=list)  # each pass's variant order
    speedup: Optional[float] = None
    speedup_ci: Optional[list[float]] = None
    hotspot_fraction: Optional[float] = None  # of the baseline
    noisy: bool = False
    timing_source: str


@event_type("AppDatasetMeasured", owner="appgate", version=2,
            upcast_from_previous=lambda payload: {**payload, "inputs": {}})
class AppDatasetMeasuredV2(AppDatasetMeasured):
    # v2 (issue 17): the sha256 of each input file placed in the run folders (dataset.inputs)
    inputs: dict[str, str] = Field(default_factory=dict)


@event_type("AppDatasetMeasured", owner="appgate", version=3,
            upcast_from_previous=lambda payload: {**payload, "clock_step": None})
class AppDatasetMeasuredV3(AppDatasetMeasuredV2):
    # v3 (session 20, first device calls): the step of the baseline's printed clock in seconds
    clock_step: Optional[float] = None


@event_type("AppDatasetMeasured", owner="appgate", version=4,
            upcast_from_previous=lambda payload: {
                **payload, "excused": {}, "wall_samples": {},
                "clock_step": {} if payload["clock_step"] is None else {"baseline": payload["clock_step"]}})
class AppDatasetMeasuredV4(AppDatasetMeasuredV2):
    # v4 (session 20, after review): each variant's printed clock's step in seconds (none for wall
    # time), and the spread of a variant whose passes one step excused (appgate.verdicts.spread),
    # as measured; the speedup CI widened by half a step on each median (step_widened_ci); each
    # timed run's wall time, beside the printed clock the candidate's program prints
    clock_step: dict[str, float] = Field(default_factory=dict)
    excused: dict[str, float] = Field(default_factory=dict)
    wall_samples: dict[str, list[float]] = Field(default_factory=dict)


@event_type("AppDatasetMeasured", owner="appgate", version=5,
            upcast_from_previous=lambda payload: {**payload, "attempts": None, "attempt_not_started": None})
class AppDatasetMeasuredV5(AppDatasetMeasuredV4):
    # v5 (session 23): the timing attempts made (None: not recorded), and why a further attempt of a
    # noisy dataset was not started (the gate's deadline, AppProtocol.deadline), None when none was due
    attempts: Optional[int] = None
    attempt_not_started: Optional[str] = None


@event_type("AppGateVerdict", owner="appgate")
class AppGateVerdict(Payload):
    result: str  # app/<architecture>/<name>
    app: str
    run: str
    # A re-run (`revises` set) whose timing was noisy is inconclusive: it changes nothing.
    verdict: Literal["admitted", "rejected", "inconclusive"]
    reasons: list[str]
    detail: str = ""  # an inconclusive re-run's starts with why ("noisy: spread 9.1% on small, CI …; …")
    headline: Optional[float] = None  # geometric mean over every dataset
    headline_ci: Optional[list[float]] = None
    datasets: dict[str, Optional[float]] = Field(default_factory=dict)  # shown, never the headline
    real: bool = False
    architecture: str
    machine: dict[str, Any] = Field(default_factory=dict)
    hotspot_fraction: Optional[float] = None
    hotspot_speedup: Optional[float] = None
    amdahl_ceiling: Optional[float] = None  # 1/(1-f+f/S) with S the measured hotspot speedup
    amdahl_limit: Optional[float] = None  # 1/(1-f): no hotspot speedup can beat it
    measurements: list[str] = Field(default_factory=list)  # AppDatasetMeasured / AppVariantBuilt ids
    revises: Optional[str] = None
    candidate: Optional[str] = None  # the AppCandidateProposed id when the candidate is a patch


@event_type("AppGateVerdict", owner="appgate", version=2,
            upcast_from_previous=lambda payload: {**payload, "upstream": None})
class AppGateVerdictV2(AppGateVerdict):
    # v2 (issue 17): the baseline files against the upstream git commit of the source (the
    # baseline's AppVariantBuilt `upstream`), None where the source is no git checkout. The
    # declared environment and the app's own toolchain are in `machine` ("environment",
    # "toolchain"), which no longer names the operator backend's compiler and flags.
    upstream: Optional[dict[str, Any]] = None


@event_type("AppGateVerdict", owner="appgate", version=3,
            upcast_from_previous=lambda payload: {**payload, "checks": None, "noisy": None})
class AppGateVerdictV3(AppGateVerdictV2):
    # v3 (issue 17, appgate.verdicts): a noisy dataset makes any run inconclusive, not only a
    # re-run; a manifest that compares no output gets "self-checked" (never REAL). `checks`: the
    # correctness checks the verdict rests on ("own_check", "compare"); `noisy`: the datasets
    # whose spread still exceeded the band after every attempt. None: not recorded (v1, v2).
    verdict: Literal["admitted", "self-checked", "rejected", "inconclusive"]
    checks: Optional[list[Literal["own_check", "compare"]]] = None
    noisy: Optional[list[str]] = None


@event_type("AppGateAbandoned", owner="appgate")
class AppGateAbandoned(Payload):
    """The reaper's: the process running gate run `run` died before its verdict (ledger/leases.py).
    It closes the run: its AppVariantBuilt / AppDatasetMeasured events get no verdict."""

    app: str
    run: str
    reason: str
    worker: WorkerIdentity


@event_type("AppGateAbandoned", owner="appgate", version=2, upcast_from_previous=lambda payload: payload)
class AppGateAbandonedV2(AppGateAbandoned):
    # v2: None where no process held the run when it was closed (`appgate settle`: a run left open
    # in a ledger imported from another machine, whose leases do not travel with its events)
    worker: Optional[WorkerIdentity] = None


@event_type("AppBaselineProfiled", owner="appgate")
class AppBaselineProfiled(Payload):
    """The registered baseline run once under a profiler outside any gate run or milestone (`appgate
    profile`, appgate/baseline_profile.py): its quality for the application table without the
    application's state changing (docs/appgate.md#baseline-quality)."""

    app: str
    dataset: str  # the manifest's first, as M1 profiles
    tool: Literal["nsys", "ncu"]
    # appgate.profiler.measure's result: top kernels, share, speed_of_light (ncu); `problem` says
    # why nothing was measured (the baseline did not build, the profiled run failed)
    profile: dict[str, Any]
    binary_hash: Optional[str]  # None: the baseline did not build
    # the registration's sha256 per baseline file: the program profiled (a profile of other files
    # is of another program, and the table does not take it)
    baseline_files: dict[str, str]
    # the measuring machine (appgate.services.machine): the quality is a fraction of this GPU's peak
    machine: dict[str, Any] = Field(default_factory=dict)
