"""The triage at scale (appgate/triage.py, docs/appgate.md#triage): parallel builds, runs one at
a time or `run_jobs` at a time, a report saved after every program and resumed by a later call, per-program time limits
and a deadline. On a small suite in HeCBench's layout written for the test (C programs of the
`omp` model stand in for CUDA ones: the scheduling is the same), each program's outcome fixed by
its source, never by this machine's speed."""
from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from django.core.management import call_command

from appgate import triage as triage_module
from appgate.agent import triage
from appgate.manifest import SUITE_ROOTS_ENV
from appgate.profiler import (SPEED_OF_LIGHT, ncu_kernels, ncu_speed_of_light, nsys_kernels, overall_speed_of_light,
                              profiler)
from appgate.suites.importer import import_suite
from appgate.triage import Limits, manifest_paths, triage_all
from ledger.models import Event
from ledger.selectors import stream_events
from tests.appgate.fixtures import MAIN, MAKEFILE, TIMED, write_suite

HANGS = MAIN.replace("  double ms", "  for (;;) {}\n  double ms")
BROKEN = MAIN.replace("return 0;", "return 0")
PROGRAMS = {
    "good": ({"regex": TIMED, "args": ["6"]}, MAIN, "6"),
    "also-good": ({"regex": TIMED, "args": ["8"]}, MAIN, "8"),
    "failing": ({"regex": TIMED, "args": ["6", "1"]}, MAIN, "6 1"),
    "tiny": ({"regex": TIMED, "args": ["0.5"]}, MAIN, "0.5"),
    "hangs": ({"regex": TIMED, "args": ["6"]}, HANGS, "6"),
    "broken": ({"regex": TIMED, "args": ["6"]}, BROKEN, "6"),
    "slow-build": ({"regex": TIMED, "args": ["6"]}, MAIN, "6"),
}
EXPECTED = {
    "synth-good-omp": ("OUT_OF_SCOPE", "hotspot_unmeasured"), "synth-also-good-omp": ("OUT_OF_SCOPE", "hotspot_unmeasured"),
    "synth-failing-omp": ("BLOCKED", "own_check_failed"), "synth-tiny-omp": ("BLOCKED", "too_short"),
    "synth-hangs-omp": ("BLOCKED", "timed_out"), "synth-broken-omp": ("BLOCKED", "build_failed"),
    "synth-slow-build-omp": ("BLOCKED", "build_timed_out"),
}
LIMITS = {"build_timeout_s": 10.0, "run_timeout_s": 3.0}


@pytest.fixture
def manifests(tmp_path, monkeypatch) -> Path:
    """The suite imported (its manifests' folder); the slow build's Makefile sleeps past its limit."""
    root = write_suite(tmp_path / "suite", "omp", PROGRAMS)
    (root / "src" / "slow-build-omp" / "Makefile").write_text(
        MAKEFILE.format(run="6").replace("$(program): $(obj) Makefile\n", "$(program): $(obj) Makefile\n\tsleep 60\n"))
    monkeypatch.setenv(SUITE_ROOTS_ENV, f"synth={root}")
    report = import_suite(root, "hecbench", root_name="synth", model="omp", out=tmp_path / "m", actor="user:test")
    assert report["counts"]["imported"] == len(PROGRAMS)
    return tmp_path / "m"


def states(report: dict) -> dict[str, tuple[str, str]]:
    return {row["app"]: (row["state"], row["code"]) for row in report["apps"]}


def state_events(app: str) -> int:
    return Event.objects.filter(stream=f"app/{app}", type="AppStateChanged").count()


@pytest.mark.one_database  # real builds and runs to their time limits (subject: scheduling, resume); ordinary SQL
def test_a_parallel_triage_resumed_from_its_report_gives_each_program_one_state_equal_to_the_serial_ones(
        ledger, manifests, tmp_path):
    serial = triage_all(manifest_paths([str(manifests)]), "agent:test", limits=Limits(jobs=1, **LIMITS))
    assert states(serial) == EXPECTED
    assert serial["not_triaged"] == []

    first, report = sorted(manifests.glob("*.yaml"))[:3], tmp_path / "report.json"
    call_command("appgate", "triage", *map(str, first), "--jobs", "2", "--report", str(report),
                 "--build-timeout", "10", "--run-timeout", "3", "--profiler", "none")
    earlier = json.loads(report.read_text())
    assert [row["manifest"] for row in earlier["apps"]] == [str(p) for p in first]
    counted = {row["app"]: state_events(row["app"]) for row in earlier["apps"]}

    call_command("appgate", "triage", str(manifests), "--jobs", "2", "--resume", str(report),
                 "--build-timeout", "10", "--run-timeout", "3", "--profiler", "none")
    resumed = json.loads(report.read_text())
    assert [row["app"] for row in resumed["apps"]] == sorted(EXPECTED)  # each program once
    assert states(resumed) == states(serial)
    assert {app: state_events(app) for app in counted} == counted  # the resumed ones were not triaged again
    assert resumed["by_reason"]["OUT_OF_SCOPE/hotspot_unmeasured"] == 2 and resumed["not_triaged"] == []
    good = next(row for row in resumed["apps"] if row["app"] == "synth-good-omp")
    assert good["datasets"] == {"test": 0.006} and good["hotspot_fraction"] is None


@pytest.mark.one_database  # real runs cut by their time limit, then retried; ordinary SQL
def test_programs_that_timed_out_are_triaged_again_when_resumed_with_retry(ledger, manifests, tmp_path):
    """A run cut by a call's time limit is retried by a later call with a longer one; the rest stay."""
    report = tmp_path / "report.json"
    call_command("appgate", "triage", str(manifests), "--report", str(report), "--build-timeout", "10",
                 "--run-timeout", "3", "--profiler", "none")
    assert states(json.loads(report.read_text()))["synth-hangs-omp"] == ("BLOCKED", "timed_out")
    before = {app: state_events(app) for app in EXPECTED}
    call_command("appgate", "triage", str(manifests), "--resume", str(report), "--retry", "timed_out",
                 "--build-timeout", "10", "--run-timeout", "3", "--profiler", "none")
    again = json.loads(report.read_text())
    assert [row["app"] for row in again["apps"]].count("synth-hangs-omp") == 1
    assert {app for app, n in before.items() if state_events(app) != n} == {"synth-hangs-omp"}  # it alone again


def first_two_meet(real):
    """`real` (a function of a loaded manifest first) wrapped so that its first two calls wait for
    each other (a barrier): they pass only when two threads call it side by side. Also returns
    the names of the manifests it was called on."""
    met, calls = threading.Barrier(2, timeout=120), []

    def meeting(loaded, *args, **kwargs):
        calls.append(loaded.name)
        if len(calls) <= 2:
            met.wait()
        return real(loaded, *args, **kwargs)
    return meeting, calls


def test_builds_run_side_by_side_with_jobs_2(ledger, manifests, monkeypatch):
    """The first two builds wait for each other: with two build threads both pass, one by one
    the first would wait in vain (and the program would be reported as a triage error)."""
    meeting_build, _ = first_two_meet(triage_module.builds.build)
    monkeypatch.setattr(triage_module.builds, "build", meeting_build)
    paths = [p for p in manifest_paths([str(manifests)]) if "good" in p.name]
    report = triage_all(paths, "agent:test", limits=Limits(jobs=2, **LIMITS))
    assert states(report) == {app: EXPECTED[app] for app in ("synth-good-omp", "synth-also-good-omp")}


def test_runs_of_two_programs_go_side_by_side_with_run_jobs_2_and_their_evidence_says_so(ledger, manifests, monkeypatch):
    """The first two programs' runs wait for each other: with two run threads both pass (one at
    a time, the first would wait in vain and fail); the states are the serial ones, and M1's
    evidence records that the baseline ran beside another (its times are a triage's)."""
    meeting_measure, calls = first_two_meet(triage_module.measure_m1)
    monkeypatch.setattr(triage_module, "measure_m1", meeting_measure)
    paths = [p for p in manifest_paths([str(manifests)]) if p.name in
             ("synth-good-omp.yaml", "synth-also-good-omp.yaml", "synth-failing-omp.yaml", "synth-broken-omp.yaml")]
    report = triage_all(paths, "agent:test", limits=Limits(jobs=2, run_jobs=2, **LIMITS))
    assert states(report) == {app: EXPECTED[app] for app in
                              ("synth-good-omp", "synth-also-good-omp", "synth-failing-omp", "synth-broken-omp")}
    assert sorted(calls) == ["synth-also-good-omp", "synth-failing-omp", "synth-good-omp"]  # a failed build needs no run
    m1 = [e.data["evidence"] for e in stream_events("app/synth-good-omp") if e.type == "AppMilestoneReached"]
    assert [evidence["concurrent_runs"] for evidence in m1] == [2]
    assert not any(t.name.startswith("ThreadPoolExecutor") for t in threading.enumerate())  # both pools shut down


def test_a_deadline_too_close_for_a_build_starts_nothing_and_lists_every_program_as_not_triaged(ledger, manifests):
    limits = Limits(jobs=2, deadline=time.monotonic() + triage_module.MIN_BUILD_S / 2)
    report = triage_all(manifest_paths([str(manifests)]), "agent:test", limits=limits)
    assert report["apps"] == [] and report["not_triaged"] == sorted(f"{app}.yaml" for app in EXPECTED)
    assert not Event.objects.filter(type="AppStateChanged").exists()  # registered by the import, no more


def test_a_program_whose_runs_would_pass_the_deadline_is_built_but_left_for_the_next_call(ledger, manifests):
    # builds may start (more than MIN_BUILD_S left), a run may not (its limit: the metadata's 60 s)
    limits = Limits(jobs=2, deadline=time.monotonic() + triage_module.MIN_BUILD_S + 20)
    paths = [p for p in manifest_paths([str(manifests)]) if p.name in ("synth-good-omp.yaml", "synth-broken-omp.yaml")]
    report = triage_all(paths, "agent:test", limits=limits)
    assert states(report) == {"synth-broken-omp": ("BLOCKED", "build_failed")}  # no run needed to decide it
    assert report["not_triaged"] == ["synth-good-omp.yaml"]
    assert state_events("synth-good-omp") == 0


@pytest.mark.parametrize("share, state, code", [(0.75, "RESEARCH", "in_scope"),
                                                (0.1, "OUT_OF_SCOPE", "hotspot_below_share")])
def test_a_profiled_top_kernel_puts_a_program_without_a_hotspot_case_in_scope_from_a_fifth_of_the_time(
        ledger, manifests, share, state, code):
    """The profile of a program whose manifest declares no hotspot (here a CPU program handed a
    profile as the triage hands CUDA ones nsys's) decides its scope by the top kernel's share."""
    def profile(loaded, binary, dataset, scratch):
        assert binary.is_file() and dataset.name == "test"
        return {"tool": "nsys", "share": share, "top": [{"name": "stencil", "seconds": 3e-3, "launches": 100,
                                                         "share": share}], "kernel_seconds": 4e-3, "problem": ""}

    row = triage(manifests / "synth-good-omp.yaml", "agent:test", profile=profile)
    assert (row.state, row.state_code) == (state, code)
    if state == "RESEARCH":
        assert row.state_reason == "M1: in scope, not yet forged: hotspot kernel stencil (nsys) carries 75% of the time"
    evidence = [e.data["evidence"] for e in stream_events("app/synth-good-omp") if e.type == "AppMilestoneReached"][-1]
    assert evidence["profile"]["top"][0]["name"] == "stencil" and evidence["hotspot_fraction"] == share


def test_without_a_profiler_the_share_is_unknown_and_says_why():
    measured = profiler(None, 10.0)(None, Path("/bin/true"), None, Path("/tmp"))
    assert measured["share"] is None and measured["problem"].startswith("no profiler (nsys, ncu) on this machine")


# As nsys 2024 prints `nsys stats --report cuda_gpu_kern_sum --format csv --output -` (a line of its
# own first), and as ncu prints `--csv --metrics gpu__time_duration.sum` between the program's lines.
NSYS_CSV = """Processing [/w/forgestencil-profile.sqlite] with [/opt/nvidia/nsight-systems/reports/cuda_gpu_kern_sum.py]...
"Time (%)","Total Time (ns)","Instances","Avg (ns)","Med (ns)","Min (ns)","Max (ns)","StdDev (ns)","Name"
75.0,3000000,100,30000.0,30000.0,29000,31000,500.0,"void stencil<float>(const float *, float *, int)"
25.0,1000000,100,10000.0,10000.0,9000,11000,500.0,"reduce(float *, int)"
"""
NCU_CSV = """==PROF== Connected to process 1234
Average kernel execution time 0.5 (ms)
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Section Name","Metric Name","Metric Unit","Metric Value"
"0","1234","main","h","stencil","1","7","Command line profiler metrics","gpu__time_duration.sum","usecond","30.50"
"1","1234","main","h","reduce","1","7","Command line profiler metrics","gpu__time_duration.sum","nsecond","9,500"
"2","1234","main","h","stencil","1","7","Command line profiler metrics","gpu__time_duration.sum","usecond","29.50"
PASS
"""
# The same launches with the speed-of-light metrics the profiler asks for too (memory %, compute %).
LIGHT = {("0", "stencil"): ("62.35", "56.50"), ("1", "reduce"): ("10.00", "20.00"), ("2", "stencil"): ("75.80", "40.10")}


def with_light(light: dict) -> str:
    rows = "".join(f'"{launch}","1234","main","h","{kernel}","1","7","Command line profiler metrics","{metric}","%","{value}"\n'
                   for (launch, kernel), values in light.items() for metric, value in zip(SPEED_OF_LIGHT, values))
    return NCU_CSV.replace("PASS\n", rows + "PASS\n")


NCU_LIGHT_CSV = with_light(LIGHT)


def test_the_kernel_summaries_of_nsys_and_ncu_give_each_kernels_time_and_launches():
    assert nsys_kernels(NSYS_CSV) == {"void stencil<float>(const float *, float *, int)": (pytest.approx(3e-3), 100),
                                      "reduce(float *, int)": (pytest.approx(1e-3), 100)}
    assert ncu_kernels(NCU_CSV) == {"stencil": (pytest.approx(60e-6), 2), "reduce": (pytest.approx(9.5e-6), 1)}


def test_ncu_gives_each_kernels_time_weighted_speed_of_light_the_busier_of_memory_and_compute():
    assert ncu_kernels(NCU_LIGHT_CSV) == ncu_kernels(NCU_CSV)  # the extra metrics change no kernel time
    # stencil: launch 0 at 30.5 us and 62.35% (memory), launch 2 at 29.5 us and 75.80%; reduce: 20% (compute)
    light = ncu_speed_of_light(NCU_LIGHT_CSV)
    assert light == {"stencil": (pytest.approx(60e-6), pytest.approx((30.5 * 0.6235 + 29.5 * 0.758) / 60)),
                     "reduce": (pytest.approx(9.5e-6), pytest.approx(0.20))}
    assert overall_speed_of_light(light) == pytest.approx((30.5 * 0.6235 + 29.5 * 0.758 + 9.5 * 0.20) / 69.5)
    # a launch without the metrics counts in no weight: the same as if reduce had never run
    unmeasured = with_light({**LIGHT, ("1", "reduce"): ("10.00",)})  # its compute throughput missing
    assert overall_speed_of_light(ncu_speed_of_light(unmeasured)) == pytest.approx(light["stencil"][1])
    assert ncu_speed_of_light(NCU_CSV) == {} and overall_speed_of_light({}) is None  # not measured, never guessed
