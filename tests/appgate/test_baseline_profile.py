"""`appgate profile` (appgate/baseline_profile.py, docs/appgate.md#baseline-quality): the baseline's
quality measured beside an application's state, never through it. There is no GPU here, so two
things stand in for one: the machine's description (appgate.services.machine, which reads the
GPU; recorded with every profile) and Nsight Compute (tests/appgate/bin/ncu, a shell script that runs the program and prints
ncu's CSV rows for the launches the program says it made). Everything else is the real path:
the build and the profiled run in the sandbox, the ledger, the table and the app page."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from appgate import agent, baseline_profile, services
from appgate.agent import run_agent
from appgate.baseline_profile import profile_baseline
from appgate.models import AppRow
from appgate.services import AppGateError, AppProtocol, register
from frontend.tables import application_rows
from ledger.models import Event
from ledger.services import NewEvent, append
from tests.appgate.test_manifest import write_app

QUICK = AppProtocol(passes=2, warmup=0, max_attempts=1)
BIN = Path(__file__).resolve().parent / "bin"  # the stand-in ncu
# Prints its time (halved by -DFORGED), its result and verdict, and the kernels a profiler would
# see: name, GPU microseconds, memory and compute throughput in % of peak (what tests/appgate/bin/ncu
# turns into ncu's rows).
PROGRAM = r"""#include <stdio.h>
#include <stdlib.h>
int main(int argc, char** argv) {
    double ms = atof(argv[1]);
#ifdef FORGED
    ms /= 2;
#endif
    printf("launch stencil 30.5 62.35 56.50\nlaunch reduce 9.5 10.00 20.00\nlaunch stencil 29.5 75.80 40.10\n");
    printf("time_ms=%.6f\nresult=1.000000\nVERIFICATION: PASSED\n", ms);
    return 0;
}
"""
# ncu's speed of light as appgate.profiler weighs it: per launch the busier unit, by GPU time
QUALITY = (30.5 * 0.6235 + 9.5 * 0.20 + 29.5 * 0.758) / 69.5
STENCIL_SHARE = 60 / 69.5


def cuda_app(tmp_path: Path, program: str = PROGRAM, **changes) -> Path:
    tmp_path.mkdir(exist_ok=True)
    return write_app(tmp_path, program, **{
        "name": "profiled-cuda", "architecture": "cuda",
        "real_program": {"description": "a CUDA program's stand-in", "language": "cuda", "entry": "src/main.c"},
        "datasets": [{"name": "one", "args": "1.0"}, {"name": "two", "args": "2.0"}],
        "correctness": {"own_check": {"result_pattern": "VERIFICATION: PASSED",
                                      "failure_pattern": "VERIFICATION: FAILED"},
                        "compare": [{"source": "stdout", "pattern": "^result=([0-9.]+)$", "tolerance": 1e-12}]},
        "timing": {"source": "pattern", "pattern": r"time_ms=([0-9.]+)", "unit": "ms"},
        **changes})


@pytest.fixture
def gpu(monkeypatch):
    """What only a GPU machine has: ncu on the PATH and a CUDA machine to describe."""
    monkeypatch.setenv("PATH", f"{BIN}{os.pathsep}{os.environ['PATH']}")

    def described(architecture: str, loaded=None) -> dict:
        return {"backend": architecture, "device": "none: the tests' stand-in"}

    monkeypatch.setattr(services, "machine", described)
    monkeypatch.setattr(agent, "machine", described)
    monkeypatch.setattr(baseline_profile, "machine", described)


def without_throughput(loaded, binary, dataset, scratch) -> dict:
    """The M1 profile as the H200 triage's ncu took them (before session 19): kernel times, no throughput."""
    return {"tool": "ncu", "share": 0.9, "top": [{"name": "stencil", "seconds": 1e-3, "launches": 2, "share": 0.9}],
            "kernel_seconds": 1.1e-3, "problem": ""}


def app_row(name: str = "profiled-cuda") -> dict:
    return next(row for row in application_rows() if row["app"] == name)


def judged(name: str = "profiled-cuda") -> dict:
    """What the App Agent and the gate decided of the application (none of it is the profile's to change)."""
    return AppRow.objects.filter(name=name).values(
        "state", "state_code", "state_reason", "milestones", "status", "verdict", "headline", "headline_ci", "real",
        "verdict_event", "registered_position").get()


def test_a_profile_records_the_speed_of_light_and_leaves_an_integrated_application_as_it_was(
        ledger, gpu, tmp_path, client):
    path = cuda_app(tmp_path)
    row = run_agent(path, "agent:test", protocol=QUICK, profile=without_throughput)
    assert (row.state, row.verdict, row.real) == ("INTEGRATED", "admitted", True)
    assert app_row()["baseline_quality"] is None  # M1's profile measured no throughput
    before, decisions = judged(), Event.objects.filter(type__in=["AppStateChanged", "AppMilestoneReached"]).count()

    event = profile_baseline(path, "agent:h200-forge", tool="ncu", timeout_s=30.0)

    assert (event.type, event.stream) == ("AppBaselineProfiled", "app/profiled-cuda")
    data = event.data
    assert (data["app"], data["dataset"], data["tool"]) == ("profiled-cuda", "one", "ncu")
    assert data["profile"]["problem"] == "" and data["profile"]["speed_of_light"] == pytest.approx(QUALITY)
    assert data["profile"]["top"][0]["name"] == "stencil" and data["profile"]["share"] == pytest.approx(STENCIL_SHARE)
    assert len(data["binary_hash"]) == 64 and data["machine"]["device"] == "none: the tests' stand-in"
    assert data["profile"]["launches_measured"] == "the first 20 launches at most"  # not the triage's 200
    assert data["baseline_files"] == {"src/main.c": hashlib.sha256(PROGRAM.encode()).hexdigest()}
    assert judged() == before  # state, reason, milestones, verdict, headline: as they were
    assert Event.objects.filter(type__in=["AppStateChanged", "AppMilestoneReached"]).count() == decisions

    shown = app_row()
    assert shown["baseline_quality"] == pytest.approx(QUALITY) and shown["state"] == "INTEGRATED"
    assert (shown["hotspot_kernel"], shown["hotspot_share"]) == ("stencil", pytest.approx(STENCIL_SHARE))
    page = client.get("/apps/profiled-cuda/").content.decode()
    source = page.split('id="profile-source"')[1].split("</p>")[0]
    assert f">#{event.position}</a> <code>{event.event_id}</code>" in source and "appgate profile" in source
    assert f'<strong id="baseline-quality">{QUALITY * 100:.1f}%</strong>' in source


def test_only_a_profile_of_the_registered_baseline_files_that_measured_the_speed_of_light_is_shown(
        ledger, gpu, tmp_path):
    path = cuda_app(tmp_path)
    register(path, "user:test")
    first = profile_baseline(path, "user:test", tool="ncu", timeout_s=30.0)
    assert app_row()["baseline_quality"] == pytest.approx(QUALITY)

    def later(files: dict, profile: dict) -> None:
        append(NewEvent(stream="app/profiled-cuda", type="AppBaselineProfiled", actor="user:test", payload={
            **first.data, "baseline_files": files, "profile": {**first.data["profile"], **profile}}))

    other = {"src/main.c": "0" * 64}  # another program: another upstream commit's file, say
    later(other, {"speed_of_light": 0.99})
    later(first.data["baseline_files"], {"tool": "nsys", "speed_of_light": None})  # nsys: no throughput
    later(first.data["baseline_files"], {"speed_of_light": None, "problem": "the profiled run failed: exit status 1"})
    assert app_row()["baseline_quality"] == pytest.approx(QUALITY)
    later(first.data["baseline_files"], {"speed_of_light": 0.5})  # the latest of the same baseline
    assert app_row()["baseline_quality"] == 0.5


def test_a_baseline_that_does_not_build_is_recorded_with_why_and_changes_nothing_else(ledger, gpu, tmp_path):
    path = cuda_app(tmp_path, build={"command": "cc {switch} -o {out} src/absent.c"})
    register(path, "user:test")
    before = judged()
    event = profile_baseline(path, "user:test", tool="ncu", timeout_s=30.0)
    assert event.data["profile"]["problem"].startswith("the baseline does not build: exit status 1")
    assert event.data["binary_hash"] is None and event.data["profile"]["top"] == []
    assert judged() == before and app_row()["baseline_quality"] is None


def test_the_command_prints_each_apps_quality_and_refuses_an_unknown_or_cpu_app_recording_nothing(
        ledger, gpu, tmp_path, capsys):
    path = cuda_app(tmp_path / "cuda")
    register(path, "user:test")
    call_command("appgate", "profile", str(path), "--profiler", "ncu", "--timeout", "30")
    event = Event.objects.get(type="AppBaselineProfiled")
    assert capsys.readouterr().out == f"profiled-cuda: baseline quality {QUALITY:.1%} (ncu) (event #{event.position})\n"

    unknown = cuda_app(tmp_path / "unknown", name="never-registered")
    (tmp_path / "cpu").mkdir()
    cpu = write_app(tmp_path / "cpu", name="cpu-app")
    register(cpu, "user:test")
    recorded = Event.objects.count()
    with pytest.raises(CommandError) as refused:
        call_command("appgate", "profile", str(unknown), str(cpu), "--profiler", "ncu")
    said = str(refused.value)
    assert said.startswith(f"2 refused, nothing recorded for them: {unknown}: never-registered is not registered")
    assert "cpu-app is a cpu program: ncu profiles GPU kernels" in said
    assert Event.objects.count() == recorded


def test_without_the_profiler_on_the_path_nothing_is_tried(ledger, gpu, tmp_path, monkeypatch):
    path = cuda_app(tmp_path)
    register(path, "user:test")
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    recorded = Event.objects.count()
    with pytest.raises(AppGateError, match="ncu is not on this machine's PATH: profile where it is"):
        profile_baseline(path, "user:test", tool="ncu", timeout_s=30.0)
    with pytest.raises(CommandError, match=r"no profiler \(nsys, ncu\) on this machine's PATH"):
        call_command("appgate", "profile", str(path))
    assert Event.objects.count() == recorded
