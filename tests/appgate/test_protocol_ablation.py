"""`ablation protocol` with a real ledger and real measurements: an operator case on the CPU
backend and a small real C application built here. Every requirement records an event whose
values are recomputed here from the raw evidence it names; the correctness arm lets a wrong but
fast kernel through that the honest gate rejects."""
from __future__ import annotations

import hashlib
import math
import statistics
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from appgate.models import AppRow
from appgate.protocol_ablation import ARMS, REQUIREMENTS, ablate_app, half_work_twin
from appgate.services import AppProtocol
from ledger.models import Event
from ledger.records import RecordedEvent
from ledger.selectors import stream_events
from ledger.verification import verify_ledger
from measurement.backends.base import Kernel
from measurement.harness import codegen
from measurement.harness.cases import parse_case
from measurement.harness.plan import ProtocolSettings
from measurement.management.commands import _common
from measurement.models import OperatorResult
from tests.appgate.test_manifest import SOURCE, write_app

CHEATS = Path(__file__).parents[1] / "measurement" / "cheats"
CASE = "star_1/64x64x64/f32"
QUICK_APP = AppProtocol(passes=3, warmup=1, max_attempts=1)


def event(event_id: str) -> RecordedEvent:
    row = Event.objects.get(event_id=event_id)
    return RecordedEvent.from_body(row.body, row.prev_hash, row.hash)


def arms_of(stream: str) -> dict[str, dict]:
    found = [e.data for e in stream_events(stream) if e.type == "AblationMeasured"]
    assert len(found) == len({e["arm"] for e in found}), "one event per arm"
    return {e["arm"]: e for e in found}


def stream_of_output(out: str) -> str:
    return next(line for line in out.splitlines() if line.startswith("recorded ")).rsplit(" on ", 1)[1]


# ---- an operator case ---------------------------------------------------------------------


def case_speedup(evidence: dict, name: str = "candidate", bound: str | None = None) -> tuple[float, list[float], list[float]]:
    """Recomputed from the raw samples: median over passes of each pass's median launch, for the
    candidate and for the bound: the fastest usable baseline timed in the same measurement (the
    honest run), or the baseline named (an ablated run is read against the honest run's bound)."""
    def medians(variant):
        return [statistics.median(launches) for launches in variant["timing"]["samples"]]

    variants = {v["name"]: v for v in evidence["variants"]}
    baselines = [v for v in variants.values() if v["role"] == "baseline" and v["correctness"]["correct"] and v["timing"]
                 and not v["timing"]["impossible"] and v["timing"]["timed_output_ok"]]
    if bound is None:
        bound = min(baselines, key=lambda v: statistics.median(medians(v)))
        assert bound["name"] == evidence["bound"]["name"]
    else:
        bound = variants[bound]
    candidate = medians(variants[name])
    return statistics.median(medians(bound)) / statistics.median(candidate), medians(bound), candidate


@pytest.fixture
def quick_case_protocol(monkeypatch):
    """The command's protocol, shortened: one timing attempt (a shared 2-core CPU is rarely within
    the 2% band, and three attempts per arm would triple the test's time)."""
    monkeypatch.setitem(_common.DEFAULT_PROTOCOL, "cpu", ProtocolSettings(max_attempts=1))


@pytest.mark.one_database
def test_a_case_ablation_records_every_requirement_from_real_measurements(ledger, capsys, quick_case_protocol):
    call_command("ablation", "protocol", "--case", CASE, "--source", str(CHEATS / "honest.c"), "--launch", '{"threads": 1}',
                 "--passes", "3", "--launches", "3")
    out = capsys.readouterr().out
    stream = stream_of_output(out)
    for name in REQUIREMENTS:
        assert name in out
    assert "(none: control)" in out and "distortion" in out

    arms = arms_of(stream)
    assert set(arms) == set(ARMS)
    ablation = stream.split("/", 1)[1]
    for data in arms.values():
        assert (data["kind"], data["ablation"], data["case"], data["backend"]) == ("protocol", ablation, CASE, "cpu")
        assert data["subject"] == f"operator/cpu/{CASE}" and data["budget"] == 1 and data["unit"] == "x"
        assert data["status"] == "measured", data

    # the honest value, recomputed from the honest measurement's raw samples
    honest = event(arms["control"]["measurement_events"][0])
    assert honest.type == "CandidateMeasured" and honest.stream == stream
    assert "honest measurement" in honest.data["hypothesis"]
    value, bound_passes, candidate_passes = case_speedup(honest.data)
    bound = honest.data["bound"]["name"]
    for data in arms.values():
        assert data["honest_value"] == pytest.approx(value, rel=1e-12)
        assert data["honest_ci"][0] <= value <= data["honest_ci"][1]
        assert data["distortion"] == pytest.approx(data["ablated_value"] / data["honest_value"] - 1, rel=1e-9)

    # every re-measured arm: its value recomputed from its own evidence, with the one setting changed
    changed = {"warmup": ("warmup", 0), "cache_flush": ("flush", False), "interleaving": ("interleave", False)}
    for name in ("correctness_gate", "symmetric_timing", "warmup", "cache_flush", "interleaving", "control"):
        measured = event(arms[name]["measurement_events"][-1])
        assert measured.type == "CandidateMeasured" and measured.stream == stream
        credited = "half_work_twin" if name == "correctness_gate" else "candidate"
        assert arms[name]["ablated_value"] == pytest.approx(case_speedup(measured.data, credited, bound)[0], rel=1e-12)
        assert f"over {bound}" in arms[name]["detail"]
        protocol = measured.data["protocol"]
        assert protocol["ablated"]["arm"] == name and (protocol["passes"], protocol["launches"]) == (3, 3)
        for other, (setting, off) in changed.items():
            assert (protocol[setting] == off) == (other == name), (name, setting)
    order = event(arms["interleaving"]["measurement_events"][-1]).data["environment"]["order"]
    assert all(sequence == order[0] for sequence in order)
    rotated = event(arms["control"]["measurement_events"][-1]).data["environment"]["order"]
    assert rotated[0] != rotated[1]

    # symmetric timing: the subject's samples are one batch per pass, the baselines' are per launch
    asymmetric = event(arms["symmetric_timing"]["measurement_events"][-1]).data
    assert asymmetric["protocol"]["ablated"]["pipelined"] == ["candidate"]
    variants = {v["name"]: v for v in asymmetric["variants"]}
    assert all(len(set(launches)) == 1 for launches in variants["candidate"]["timing"]["samples"])
    per_launch = variants["candidate_per_launch"]
    assert per_launch["source_hash"] == variants["candidate"]["source_hash"]
    assert any(len(set(launches)) > 1 for launches in per_launch["timing"]["samples"])
    assert any(len(set(launches)) > 1 for launches in variants["straightforward"]["timing"]["samples"])

    # the correctness gate: the half-work twin is rejected honestly, then timed and credited without checks
    correctness = arms["correctness_gate"]
    checked, unchecked = (event(i).data for i in correctness["measurement_events"][1:3])
    twin = {v["name"]: v for v in checked["variants"]}["candidate"]
    assert twin["correctness"]["correct"] is False and twin["correctness"]["reason"] == "unwritten_output"
    assert twin["timing"] is None  # the honest protocol never times a rejected kernel
    timed = {v["name"]: v for v in unchecked["variants"]}
    timed_twin = timed["half_work_twin"]
    assert timed_twin["source_hash"] == twin["source_hash"] and timed_twin["correctness"]["correct"] is False
    assert timed_twin["timing"]["timed_output_ok"] is False
    # paired, in the same run: half the work takes less time than the whole (across runs, the
    # bound's identity and speed can change with the load of a shared machine)
    assert timed_twin["timing"]["median"] < timed["candidate"]["timing"]["median"], "half the work should look faster"
    assert correctness["ablated_value"] == pytest.approx(case_speedup(unchecked, "half_work_twin", bound)[0], rel=1e-12)
    assert "rejected (unwritten_output)" in correctness["detail"]

    # the single-dataset analogue: the best pass of the honest samples
    best = max(b / c for b, c in zip(bound_passes, candidate_passes))
    assert arms["all_dataset_headline"]["ablated_value"] == pytest.approx(best, rel=1e-12)
    assert arms["all_dataset_headline"]["ablated_value"] >= value

    # an ablation is not a verdict: nothing reaches the operator map
    assert not OperatorResult.objects.exists() and not Event.objects.filter(type="GateVerdict").exists()
    assert verify_ledger().ok


def test_the_half_work_twin_keeps_the_kernel_and_halves_the_outer_extent():
    case = parse_case(CASE)
    twin = half_work_twin(Kernel("void stencil(const float* u) {}", {"threads": 2}), case, "cpu")
    assert twin.launch == {"threads": 2}
    assert twin.source.startswith("#define stencil forgestencil_full_work\nvoid stencil(const float* u) {}")
    assert "forgestencil_full_work(u, a, y, coef, nz / 2 + 1, ny, nx);" in twin.source
    flat = half_work_twin(Kernel("void stencil(void) {}"), parse_case("star2d_1/512x512/f64"), "cpu")
    assert "forgestencil_full_work(u, a, y, coef, nz, ny / 2 + 1, nx);" in flat.source and "const double* u" in flat.source
    cuda = half_work_twin(Kernel(codegen.straightforward_cuda(case), {"block": [32, 8, 1]}), case, "cuda")
    assert cuda.source.count('extern "C" __global__ void stencil(') == 1
    assert 'extern "C" __device__ void forgestencil_full_work(' in cuda.source
    with pytest.raises(Exception, match="exactly one"):
        half_work_twin(Kernel("__global__ void other() {}"), case, "cuda")


# ---- an application ---------------------------------------------------------------------

# A real program with its own verification: smoothing by a 3-point stencil for `steps` steps;
# the baseline copies back each step, the candidate (-DFORGED) swaps pointers; -DWRONG (with
# FORGED) does half the steps: fast, and caught by the program's check against the plain
# algorithm, which runs after the timed region (so the wall clock is longer than time_s).
PROGRAM = r"""
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
static void step(const double* a, double* b, int n) {
    for (int i = 1; i < n - 1; i++) b[i] = 0.25 * a[i - 1] + 0.5 * a[i] + 0.25 * a[i + 1];
    b[0] = 0.75 * a[0] + 0.25 * a[1]; b[n - 1] = 0.25 * a[n - 2] + 0.75 * a[n - 1];
}
int main(int argc, char** argv) {
    if (argc < 3) return 2;
    int n = atoi(argv[1]), steps = atoi(argv[2]);
    double *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *r = malloc(n * sizeof *r), *s = malloc(n * sizeof *s);
    for (int i = 0; i < n; i++) a[i] = r[i] = (i % 13) * 0.25 - 1.5;
    memset(b, 0, n * sizeof *b); memset(s, 0, n * sizeof *s);  /* first touch outside the timed region */
    double t0 = now();
#ifdef FORGED
    int todo = steps;
#ifdef WRONG
    todo = steps / 2;
#endif
    for (int k = 0; k < todo; k++) { step(a, b, n); double* t = a; a = b; b = t; }
#else
    for (int k = 0; k < steps; k++) { step(a, b, n); memcpy(a, b, n * sizeof *a); }
#endif
    double t1 = now(), worst = 0;
    for (int k = 0; k < steps; k++) { step(r, s, n); memcpy(r, s, n * sizeof *r); }
    for (int i = 0; i < n; i++) worst = fmax(worst, fabs(a[i] - r[i]));
    printf("time_s=%.9f\n", t1 - t0);
    printf("VERIFICATION: %s (max difference %.3g)\n", worst <= 1e-12 ? "PASSED" : "FAILED", worst);
    return 0;
}
"""


def smoothing_app(tmp_path, **changes) -> Path:
    blocks = {
        "name": "smoothing",
        "real_program": {"description": "1D smoothing by a 3-point stencil, verified against the plain algorithm",
                         "language": "c", "entry": "src/main.c"},
        "build": {"command": "cc -O2 {switch} -o {out} src/main.c -lm"},
        "datasets": [{"name": "cached", "args": "2000 2000"}, {"name": "streaming", "args": "2000000 10"}],
        "correctness": {"own_check": {"result_pattern": "VERIFICATION: PASSED", "failure_pattern": "VERIFICATION: FAILED"},
                        "no_comparison": "the protocol ablation's subject: its own check against the plain algorithm"},
        "timing": {"source": "pattern", "pattern": r"time_s=([0-9.eE+-]+)"},
    }
    path = write_app(tmp_path, **{**blocks, **changes})
    (tmp_path / "src" / "main.c").write_text(PROGRAM)
    path.write_text(path.read_text().replace(hashlib.sha256(SOURCE.encode()).hexdigest(), hashlib.sha256(PROGRAM.encode()).hexdigest()))
    return path


@pytest.mark.one_database
def test_an_app_ablation_records_every_requirement(ledger, tmp_path):
    result = ablate_app(str(smoothing_app(tmp_path)), "user:test", QUICK_APP, wrong_switch="-DFORGED -DWRONG")
    arms = arms_of(result.stream)
    assert set(arms) == set(ARMS) and {a.arm for a in result.arms} == set(ARMS)
    assert arms["cache_flush"]["status"] == "not_run" and "fresh process" in arms["cache_flush"]["reason"]
    measured = {name: data for name, data in arms.items() if data["status"] == "measured"}
    assert set(measured) == set(ARMS) - {"cache_flush"}

    # the honest headline: the geometric mean over both datasets of median(baseline)/median(candidate)
    honest = [event(i).data for i in measured["control"]["measurement_events"] if event(i).type == "AppDatasetMeasured"][:2]
    assert [p["dataset"] for p in honest] == ["cached", "streaming"] and all(p["run"].endswith("/honest") for p in honest)
    speedups = {p["dataset"]: statistics.median(p["samples"]["baseline"]) / statistics.median(p["samples"]["candidate"]) for p in honest}
    value = math.sqrt(speedups["cached"] * speedups["streaming"])
    for data in arms.values():
        assert (data["kind"], data["case"], data["backend"], data["subject"]) == ("protocol", "smoothing", "cpu", "app/cpu/smoothing")
        assert data["honest_value"] == pytest.approx(value, rel=1e-12)
        if data["status"] == "measured":
            assert data["distortion"] == pytest.approx(data["ablated_value"] / value - 1, rel=1e-9)

    def own_payloads(name):
        payloads = [event(i).data for i in arms[name]["measurement_events"] if event(i).type == "AppDatasetMeasured"]
        return [p for p in payloads if p["run"].endswith(f"/{name}")]

    for name in ("warmup", "interleaving", "control", "symmetric_timing", "correctness_gate"):
        payloads = own_payloads(name)
        assert len(payloads) == 2, name
        credited = "wrong" if name == "correctness_gate" else "candidate"
        recomputed = math.sqrt(math.prod(statistics.median(p["samples"]["baseline"]) / statistics.median(p["samples"][credited])
                                         for p in payloads))
        assert arms[name]["ablated_value"] == pytest.approx(recomputed, rel=1e-12), name
    assert all(p["order"] == [["baseline"]] * 3 + [["candidate"]] * 3 for p in own_payloads("interleaving"))

    # the correctness gate: the wrong variant fails its own verification, and is credited anyway
    correctness = arms["correctness_gate"]
    assert "rejected (cached: the program reported failure" in correctness["detail"]
    unchecked = own_payloads("correctness_gate")
    assert all(p["correct"]["wrong"] is False and len(p["samples"]["wrong"]) == 3 for p in unchecked)
    assert all(p["correct"]["candidate"] is True and p["correct"]["baseline"] is True for p in unchecked)
    # paired, in the same runs: half the steps take less time than all of them
    paired = math.prod(statistics.median(p["samples"]["candidate"]) / statistics.median(p["samples"]["wrong"]) for p in unchecked)
    assert paired > 1, "half the steps should look faster"
    # asymmetric clocks: the baseline's wall clock includes start-up and the verification after time_s
    assert arms["symmetric_timing"]["ablated_value"] > value
    assert all(p["timing_source"].startswith("baseline: wall") for p in own_payloads("symmetric_timing"))
    assert arms["all_dataset_headline"]["ablated_value"] == pytest.approx(max(speedups.values()), rel=1e-12)

    # no gate verdict: the app is registered, its table row untouched by the ablation
    assert not Event.objects.filter(type="AppGateVerdict").exists()
    assert AppRow.objects.get(name="smoothing").status == ""
    assert verify_ledger().ok


@pytest.mark.one_database
def test_the_app_command_prints_the_table_and_says_what_it_could_not_run(ledger, tmp_path, capsys):
    path = smoothing_app(tmp_path, datasets=[{"name": "cached", "args": "20000 100"}], timing={"source": "wall"})
    call_command("ablation", "protocol", "--app", str(path), "--passes", "2")
    out = capsys.readouterr().out
    arms = arms_of(stream_of_output(out))
    assert arms["correctness_gate"]["status"] == "not_run" and "--wrong-switch" in arms["correctness_gate"]["reason"]
    assert arms["symmetric_timing"]["status"] == "not_run" and "no time of its own" in arms["symmetric_timing"]["reason"]
    assert arms["all_dataset_headline"]["distortion"] == 0.0 and "one dataset" in arms["all_dataset_headline"]["detail"]
    assert "requirement removed" in out and "not_run" in out and "(none: control)" in out
    # the app is now registered: its name is enough
    call_command("ablation", "protocol", "--app", "smoothing", "--passes", "1")
    assert "protocol ablation" in capsys.readouterr().out


# ---- bad input ----------------------------------------------------------------------------


@pytest.mark.parametrize("args, message", [
    (["--case", "star_9/64x64x64/f32"], "radius must be 1..4"),
    (["--case", CASE, "--source", "/nonexistent.c"], "no such file"),
    (["--case", CASE, "--launch", '{"threads": 1}'], "--launch needs --source"),
    (["--case", CASE, "--wrong-switch=-DX"], "--wrong-switch applies to --app only"),
    (["--case", CASE, "--passes", "0"], "--passes must be at least 1"),
    (["--app", "no-such-app"], "neither a manifest file, a registered application nor a bundled one"),
    (["--app", "x", "--source", __file__], "--source applies to --case only"),
    (["--app", "x", "--backend", "cuda"], "--backend applies to --case only"),
])
def test_bad_input_is_a_clear_error(ledger, args, message):
    with pytest.raises(CommandError, match=message):
        call_command("ablation", "protocol", *args)
    assert not Event.objects.filter(type="AblationMeasured").exists()


def test_neither_or_both_subjects_is_refused(ledger):
    with pytest.raises(CommandError):
        call_command("ablation", "protocol")
    with pytest.raises(CommandError):
        call_command("ablation", "protocol", "--case", CASE, "--app", "x")


@pytest.mark.one_database
def test_a_wrong_subject_is_refused_not_ablated(ledger, quick_case_protocol):
    with pytest.raises(CommandError, match="does not admit a speedup .*unwritten_output"):
        call_command("ablation", "protocol", "--case", CASE, "--source", str(CHEATS / "half_output.c"), "--passes", "2", "--launches", "2")
    assert not Event.objects.filter(type="AblationMeasured").exists()


@pytest.mark.one_database
def test_an_app_whose_candidate_is_wrong_is_refused(ledger, tmp_path):
    path = smoothing_app(tmp_path, switch={"kind": "build_flag", "baseline": "", "candidate": "-DFORGED -DWRONG"})
    with pytest.raises(CommandError, match="the candidate is not correct"):
        call_command("ablation", "protocol", "--app", str(path), "--passes", "1")
    assert not Event.objects.filter(type="AblationMeasured").exists()


def test_an_app_is_found_by_file_folder_registered_or_bundled_name(ledger, tmp_path):
    from appgate.protocol_ablation import AblationError, bundled_manifests, resolve_manifest
    from appgate.services import register

    path = smoothing_app(tmp_path)
    assert resolve_manifest(str(path)) == path and resolve_manifest(str(tmp_path)) == path
    register(path, "user:test")
    assert resolve_manifest("smoothing").resolve() == path.resolve()
    for name, manifest in bundled_manifests().items():  # fixtures/apps: manifest*.yaml, by their `name`
        assert resolve_manifest(name) == manifest
    (tmp_path / "manifest.cuda.yaml").write_text(path.read_text())
    with pytest.raises(AblationError, match="several manifests"):
        resolve_manifest(str(tmp_path))
