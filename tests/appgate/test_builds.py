"""The gate's build and run side (issue 17): every variant built from its own fresh copy of the
source (a stale object file in the source folder is never reused, nothing is written there),
identical binaries refused, the baseline checked against its upstream git commit, the declared
environment honoured and recorded, {src} in dataset arguments, inputs placed and hashed, and
compile-time problem sizes as datasets. Real C/OpenMP programs built here."""
from __future__ import annotations

import hashlib
import subprocess

import pytest

from appgate import runner
from appgate.manifest import load_manifest
from appgate.services import AppProtocol, run_gate
from ledger.models import Event
from ledger.services import record_from_row
from tests.appgate.test_manifest import write_app

QUICK = AppProtocol(passes=2, warmup=0, max_attempts=1)

# Sums scale * i + offset over i < N (N fixed at compile time); scale comes from a file named on
# the command line, offset from an input placed in the run folder. FORGED uses the closed form.
# Its own check: it ran with the three OpenMP threads its manifest declares.
PROGRAM = r"""
#include <stdio.h>
#include <omp.h>
#ifndef N
#define N 1000
#endif
int main(int argc, char** argv) {
    FILE *f = argc > 1 ? fopen(argv[1], "r") : NULL, *g = fopen("data/offset.txt", "r");
    double scale = 0, offset = 0, sum = 0;
    if (!f || fscanf(f, "%lf", &scale) != 1 || !g || fscanf(g, "%lf", &offset) != 1) {
        printf("VERIFICATION: FAILED (no inputs)\n");
        return 0;
    }
#ifdef FORGED
    sum = scale * ((double)N * (N - 1) / 2) + offset * N;
#else
    #pragma omp parallel for reduction(+:sum)
    for (int i = 0; i < N; i++) sum += scale * i + offset;
#endif
    printf("n=%d\nthreads=%d\nsum=%.6f\n", N, omp_get_max_threads(), sum);
    printf("VERIFICATION: %s\n", omp_get_max_threads() == 3 ? "PASSED" : "FAILED (not the declared 3 threads)");
    return 0;
}
"""
CHECKS = {"own_check": {"result_pattern": "VERIFICATION: PASSED", "failure_pattern": "VERIFICATION: FAILED"},
          "compare": [{"source": "stdout", "pattern": r"sum=(\S+)", "norm": "max_rel", "tolerance": 1e-12}]}


def summing_app(tmp_path, **changes):
    (tmp_path / "data").mkdir(exist_ok=True)
    (tmp_path / "data" / "scale.txt").write_text("0.5\n")
    (tmp_path / "data" / "offset.txt").write_text("2\n")
    blocks = {
        "name": "summing",
        "build": {"command": "cc -O2 -fopenmp {switch} {build_args} -o {out} src/main.c"},
        "run": {"command": "{out} {args}", "timeout_s": 20},
        "env": {"OMP_NUM_THREADS": 3},
        "datasets": [{"name": "small", "args": "{src}/data/scale.txt", "inputs": ["data/offset.txt"], "build_args": "-DN=1000"},
                     {"name": "large", "args": "{src}/data/scale.txt", "inputs": ["data/offset.txt"], "build_args": "-DN=4000"}],
        "correctness": CHECKS,
    }
    return write_app(tmp_path, PROGRAM, **{**blocks, **changes})


def payloads(kind: str) -> list[dict]:
    return [record_from_row(e).data for e in Event.objects.filter(type=kind).order_by("position")]


def listing(folder) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_the_declared_environment_src_args_placed_inputs_and_build_args_reach_every_run(ledger, tmp_path, monkeypatch,
                                                                                         tmp_path_factory):
    monkeypatch.setenv("OMP_NUM_THREADS", "7")  # the service's own setting never reaches the app
    outcome = run_gate(summing_app(tmp_path), "user:test", QUICK)
    assert outcome.reasons in ([], ["below_floor"]), outcome.detail
    built = payloads("AppVariantBuilt")
    assert [(b["variant"], b["build_args"]) for b in built] == [
        ("baseline", "-DN=1000"), ("candidate", "-DN=1000"), ("baseline", "-DN=4000"), ("candidate", "-DN=4000")]
    assert len({b["binary_hash"] for b in built}) == 4
    measured = {p["dataset"]: p for p in payloads("AppDatasetMeasured")}
    offset = hashlib.sha256(b"2\n").hexdigest()
    assert measured["small"]["inputs"] == measured["large"]["inputs"] == {"data/offset.txt": offset}
    machine = outcome.verdict_event.data["machine"]
    assert machine["environment"]["declared"] == {"OMP_NUM_THREADS": "3"}
    assert "OMP_NUM_THREADS" not in machine["environment"]["inherited"]
    assert "cc" in machine["toolchain"]["versions"] and "flags" not in machine and "compiler" not in machine
    loaded, scratch = load_manifest(tmp_path / "manifest.yaml"), tmp_path_factory.mktemp("scratch")
    ran = runner.run(loaded, "baseline", runner.build(loaded, "baseline", scratch, build_args="-DN=4000").binary,
                     loaded.manifest.datasets[1], scratch)
    assert "n=4000\nthreads=3\nsum=4007000.000000" in ran.stdout, ran.stdout + ran.problem


def test_without_a_declared_thread_count_the_services_setting_does_not_leak_in(tmp_path, monkeypatch, tmp_path_factory):
    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    loaded, scratch = load_manifest(summing_app(tmp_path, env={})), tmp_path_factory.mktemp("scratch")
    built = runner.build(loaded, "baseline", scratch, build_args="-DN=1000")
    ran = runner.run(loaded, "baseline", built.binary, loaded.manifest.datasets[0], scratch)
    assert "threads=7" not in ran.stdout and "FAILED (not the declared 3 threads)" in ran.stdout, ran.stdout


def test_a_switch_that_changes_nothing_is_refused_as_identical_binaries(ledger, tmp_path):
    path = summing_app(tmp_path, switch={"kind": "build_flag", "baseline": "-DBASELINE", "candidate": "-DUNUSED"})
    outcome = run_gate(path, "user:test", QUICK)
    assert outcome.verdict == "rejected" and outcome.reasons == ["identical_binaries"]
    assert "the switch '-DUNUSED' changed nothing" in outcome.detail and "sha256" in outcome.detail
    assert not Event.objects.filter(type="AppDatasetMeasured").exists()


MAKEFILE = """$(OUT): main.o
\tcc -fopenmp main.o -o $(OUT)
main.o: src/main.c
\tcc -O2 -fopenmp $(FLAGS) -DN=1000 -c src/main.c -o main.o
"""


def test_a_stale_object_in_the_source_folder_is_not_reused_and_nothing_is_written_there(ledger, tmp_path):
    """The issue's HeCBench case: the program's own Makefile, an object file already in the
    source folder (newer than its source, so make would take it for both variants)."""
    path = summing_app(tmp_path, build={"command": "make OUT={out} FLAGS={switch}"},
                       datasets=[{"name": "small", "args": "{src}/data/scale.txt", "inputs": ["data/offset.txt"]}])
    (tmp_path / "Makefile").write_text(MAKEFILE)
    subprocess.run(["cc", "-O2", "-fopenmp", "-DBASELINE", "-DN=1000", "-c", "src/main.c", "-o", "main.o"], cwd=tmp_path,
                   check=True)
    before = listing(tmp_path)
    outcome = run_gate(path, "user:test", QUICK)
    assert outcome.reasons in ([], ["below_floor"]), outcome.detail
    baseline, candidate = payloads("AppVariantBuilt")
    assert baseline["binary_hash"] != candidate["binary_hash"]
    assert listing(tmp_path) == before


def git(folder, *args):
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args], cwd=folder, check=True,
                   capture_output=True)


def test_the_baseline_is_checked_byte_identical_to_its_upstream_commit(ledger, tmp_path):
    path = summing_app(tmp_path, datasets=[{"name": "small", "args": "{src}/data/scale.txt", "inputs": ["data/offset.txt"]}])
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "src/main.c", "data")
    git(tmp_path, "commit", "-q", "-m", "upstream")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True).stdout.strip()
    outcome = run_gate(path, "user:test", QUICK)
    upstream = outcome.verdict_event.data["upstream"]
    assert upstream["commit"] == head and upstream["differs"] == []
    blob = subprocess.run(["git", "hash-object", "src/main.c"], cwd=tmp_path, capture_output=True, text=True).stdout.strip()
    assert upstream["files"]["src/main.c"] == {"path": "src/main.c", "upstream_blob": blob, "blob": blob}

    # A baseline edited after the checkout, its declared hash updated to match: upstream says no.
    modified = PROGRAM.replace("int main(", "/* tuned */\nint main(")
    path = summing_app(tmp_path, datasets=[{"name": "small", "args": "{src}/data/scale.txt", "inputs": ["data/offset.txt"]}])
    (tmp_path / "src" / "main.c").write_text(modified)
    path.write_text(path.read_text().replace(hashlib.sha256(PROGRAM.encode()).hexdigest(),
                                             hashlib.sha256(modified.encode()).hexdigest()))
    outcome = run_gate(path, "user:test", QUICK)
    assert outcome.reasons == ["baseline_modified"] and f"upstream commit {head}" in outcome.detail
    assert "src/main.c" in outcome.detail and outcome.verdict_event.data["upstream"]["differs"] == ["src/main.c"]


@pytest.mark.parametrize("datasets, problem", [
    ([{"name": "one", "args": "{out}"}], "datasets.0.args: unknown placeholder {out}"),
    ([{"name": "one", "build_args": "-DN=1"}], "build.command: datasets declare build_args"),
])
def test_placeholders_in_datasets_are_checked(tmp_path, datasets, problem):
    from appgate.manifest import ManifestError

    with pytest.raises(ManifestError) as error:
        load_manifest(write_app(tmp_path, PROGRAM, correctness=CHECKS, datasets=datasets))
    assert any(p.startswith(problem) for p in error.value.problems), error.value.problems


def test_builds_and_measurements_recorded_before_issue_17_read_with_the_new_fields(ledger):
    from ledger.services import NewEvent, append

    built = append(NewEvent(stream="app/old", type="AppVariantBuilt", actor="user:test", schema_version=1, payload={
        "app": "old", "run": "r", "variant": "baseline", "ok": True, "command": ["cc"], "seconds": 0.1}))
    measured = append(NewEvent(stream="app/old", type="AppDatasetMeasured", actor="user:test", schema_version=1, payload={
        "app": "old", "run": "r", "dataset": "d", "args": "", "correct": {}, "correctness_detail": {}, "samples": {},
        "timing_source": "wall"}))
    assert (built.data["build_args"], built.data["upstream"], built.data["probe"]) == ("", None, None)
    assert "build_args" not in built.payload
    assert measured.data["inputs"] == {} and "inputs" not in measured.payload
