"""Importing a suite (appgate/suites, docs/appgate.md#import-a-suite) and the triage of what it
imported (appgate.agent.triage): a small suite in HeCBench's layout written for each test
(benchmarks.yaml, CORPUS.md, src/<name>-<model>/ with a Makefile and a main that checks itself and
prints its time), and the real corpus where it is checked out. The programs print the times they
are given, so that no assertion rests on this machine's speed."""
from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

from appgate.manifest import SUITE_ROOTS_ENV, ManifestError, load_manifest
from appgate.models import AppRow
from appgate.services import AppGateError, machine
from appgate.suites import sources
from appgate.suites.importer import SuiteImportError, import_suite
from appgate.triage import manifest_paths, triage_all
from ledger.models import Event
from ledger.services import NewEvent, append
from tests.appgate.fixtures import COMMIT, CORPUS, MAIN, MAKEFILE, TIMED, write_suite

UNITLESS = r"""#include <stdio.h>
int main(void) { printf("Kernel time : %f\n", 2.5); printf("PASS\n"); return 0; }
"""
TWO_TIMES = r"""#include <stdio.h>
int main(void) {
  printf("Total reference time %f (s)\n", 1.0);
  printf("Average kernel execution time %f (ms)\n", 2.0);
  printf("PASS\n");
  return 0;
}
"""
# Reads a file nobody gave it (upstream's data, left out of git): says so on stderr and fails.
OPENER = MAIN.replace("  double ms", '  if (!fopen("weights.bin", "rb")) { fprintf(stderr, "cannot open weights.bin\\n"); '
                                      "return 2; }\n  double ms")
PROGRAMS = {  # name: (benchmarks.yaml test block or None, main.c or None: no folder, the run target's arguments)
    "good": ({"regex": TIMED, "args": ["6"]}, MAIN, "40"),
    "failing": ({"regex": TIMED, "args": ["6", "1"]}, MAIN, "6 1"),
    "tiny": ({"regex": TIMED, "args": ["0.5"]}, MAIN, "0.5"),
    "opener": ({"regex": TIMED, "args": ["6"]}, OPENER, "6"),
    "unitless": ({"regex": r"(?:Kernel time : )([0-9.+-e]+)", "args": []}, UNITLESS, ""),
    "reader": ({"regex": TIMED, "args": ["../reader-omp/data/input.bin", "6"]}, MAIN, "6"),
    "fromsource": (None, MAIN, "6"),  # no metadata: its one printed time and its run target's arguments
    "twotimes": (None, TWO_TIMES, ""),  # no metadata: of the two times it prints, the kernel's
    "nometa": (None, UNITLESS, ""),  # no metadata, and no time printed with a unit
    "ghost": ({"regex": TIMED, "args": ["6"]}, None, ""),
}


@pytest.fixture
def suite(tmp_path, monkeypatch) -> Path:
    root = write_suite(tmp_path / "suite", "omp", PROGRAMS)
    monkeypatch.setenv(SUITE_ROOTS_ENV, f"synth={root}")
    return root


def imported(suite: Path, out: Path, **options) -> dict:
    return import_suite(suite, "hecbench", root_name="synth", model="omp", out=out, actor="user:test", **options)


def listing(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def test_a_suite_imports_a_valid_manifest_per_program_and_refuses_what_it_cannot_infer(ledger, suite, tmp_path):
    before = listing(suite)
    report = imported(suite, tmp_path / "manifests")

    by_name = {p["name"]: p for p in report["programs"]}
    assert {n: p["status"] for n, p in by_name.items()} == {
        "good": "imported", "failing": "imported", "tiny": "imported", "opener": "imported", "fromsource": "imported",
        "twotimes": "imported", "unitless": "refused", "reader": "refused", "nometa": "refused", "ghost": "refused"}
    assert {n: [r["code"] for r in by_name[n]["refusals"]] for n in ("unitless", "reader", "nometa", "ghost")} == {
        "unitless": ["timing_unit_unknown"], "reader": ["missing_input"], "nometa": ["no_test_metadata"],
        "ghost": ["missing_source"]}
    assert "'Kernel time : %f\\\\n'" in by_name["unitless"]["refusals"][0]["detail"]  # the format it prints, no unit
    assert "../reader-omp/data/input.bin" in by_name["reader"]["refusals"][0]["detail"]
    assert by_name["nometa"]["refusals"][0]["detail"] == ("benchmarks.yaml has no test block for nometa, and the "
                                                          "source prints no time with a unit")
    assert report["counts"]["refused_by_first_reason"] == {"timing_unit_unknown": 1, "missing_input": 1,
                                                           "no_test_metadata": 1, "missing_source": 1}
    assert report["notes_of_every_import"]["compare_not_inferred"] == "it prints no checksum line to compare"
    assert set(report["notes_of_every_import"]) == {"compare_not_inferred", "larger_dataset_not_inferred",
                                                    "hotspot_unmeasured"} and by_name["good"]["notes"] == []

    loaded = load_manifest(tmp_path / "manifests" / by_name["good"]["manifest"])
    m = loaded.manifest
    assert loaded.source_dir == suite / "src" / "good-omp"
    assert (m.source.root, m.source.path) == ("synth", "src/good-omp")
    assert m.source.baseline_files == {f: hashlib.sha256((suite / "src" / "good-omp" / f).read_bytes()).hexdigest()
                                       for f in ("Makefile", "main.c")}
    assert m.provenance.version == COMMIT and m.provenance.licence == "BSD-3-Clause"
    assert m.provenance.upstream.endswith(f"/tree/{COMMIT}/src/good-omp")
    assert m.build.command == "make -C {src} program={out} EXTRA_CFLAGS={switch}" and m.architecture == "cpu"
    assert [(d.name, d.args) for d in m.datasets] == [("test", "6"), ("make-run", "40")]
    assert (m.timing.pattern, m.timing.unit, m.timing.match) == (TIMED, "ms", "sum")
    own = m.correctness.own_check
    assert (own.result_pattern, own.failure_pattern) == (r"\b(?:PASS)\b", r"\b(?:FAIL)\b")
    assert m.correctness.compare == [] and "no checksum line" in m.correctness.no_comparison
    from_source = load_manifest(tmp_path / "manifests" / by_name["fromsource"]["manifest"]).manifest
    assert [(d.name, d.args) for d in from_source.datasets] == [("make-run", "6")]
    assert (from_source.timing.pattern, from_source.timing.unit) == (
        r"Average kernel execution time \s*([-+0-9.eE]+) \(ms\)", "ms")
    assert "timing_from_source" in {n["code"] for n in by_name["fromsource"]["notes"]}
    two = load_manifest(tmp_path / "manifests" / by_name["twotimes"]["manifest"]).manifest
    assert (two.timing.pattern, two.timing.unit) == (from_source.timing.pattern, "ms")
    assert [(d.name, d.args) for d in two.datasets] == [("make-run", "")]
    assert "timing_of_the_kernel" in {n["code"] for n in by_name["twotimes"]["notes"]}
    registered = Event.objects.filter(type="AppRegistered")
    assert sorted(json.loads(e.body)["payload"]["app"] for e in registered) == [
        "synth-failing-omp", "synth-fromsource-omp", "synth-good-omp", "synth-opener-omp", "synth-tiny-omp",
        "synth-twotimes-omp"]
    assert listing(suite) == before  # nothing written into the checkout

    again = imported(suite, tmp_path / "manifests")  # the same manifests register nothing new
    assert {p["registered"] for p in again["programs"] if p["status"] == "imported"} == {"unchanged"}
    assert Event.objects.filter(type="AppRegistered").count() == 6


def test_manifests_name_the_checkout_by_its_root_and_load_wherever_the_root_points(ledger, suite, tmp_path,
                                                                                  monkeypatch):
    path = tmp_path / "manifests" / imported(suite, tmp_path / "manifests", only=("good",))["programs"][0]["manifest"]
    moved = shutil.copytree(suite, tmp_path / "elsewhere")
    monkeypatch.setenv(SUITE_ROOTS_ENV, f"synth={moved}")
    assert load_manifest(path).source_dir == moved / "src" / "good-omp"
    monkeypatch.delenv(SUITE_ROOTS_ENV)
    with pytest.raises(ManifestError) as error:
        load_manifest(path)
    assert error.value.problems[0].startswith(
        f"source.root: 'synth' is not a configured suite root: set {SUITE_ROOTS_ENV}=")


def test_an_import_under_a_root_that_names_another_folder_is_refused_before_anything_is_written(ledger, suite, tmp_path,
                                                                                              monkeypatch):
    monkeypatch.setenv(SUITE_ROOTS_ENV, f"synth={tmp_path}")
    with pytest.raises(SuiteImportError, match=f"set {SUITE_ROOTS_ENV}=synth={suite}"):
        imported(suite, tmp_path / "manifests")
    assert not (tmp_path / "manifests").exists() and not Event.objects.filter(type="AppRegistered").exists()


def test_triage_on_the_cpu_blocks_a_program_whose_own_check_fails_and_one_too_short_to_time(ledger, suite, tmp_path):
    imported(suite, tmp_path / "manifests", only=("good", "failing", "tiny", "opener"))
    report = triage_all(manifest_paths([str(tmp_path / "manifests")]), "agent:test")

    states = {a["app"]: (a["state"], a["code"]) for a in report["apps"]}
    assert states == {"synth-failing-omp": ("BLOCKED", "own_check_failed"), "synth-tiny-omp": ("BLOCKED", "too_short"),
                      "synth-opener-omp": ("BLOCKED", "missing_input"),
                      "synth-good-omp": ("OUT_OF_SCOPE", "hotspot_unmeasured")}
    reasons = {a["app"]: a["reason"] for a in report["apps"]}
    assert reasons["synth-failing-omp"] == "M1: the baseline fails on test: the program reported failure (FAIL)"
    assert reasons["synth-tiny-omp"].startswith(
        "M1: the baseline fails on test: 0.5 ms by its clock (pattern), under the 1 ms")
    assert reasons["synth-opener-omp"] == "M1: the baseline fails on test: exit status 2: cannot open weights.bin"
    assert report["by_reason"] == {"BLOCKED/own_check_failed": 1, "BLOCKED/too_short": 1, "BLOCKED/missing_input": 1,
                                   "OUT_OF_SCOPE/hotspot_unmeasured": 1}
    good = AppRow.objects.get(name="synth-good-omp")
    assert good.state_code == "hotspot_unmeasured" and [m["milestone"] for m in good.milestones] == ["M1"]
    measured = json.loads(Event.objects.get(type="AppMilestoneReached").body)["payload"]["evidence"]["datasets"]
    walls = {name: values.pop("wall_seconds") for name, values in measured.items()}
    assert measured == {"test": {"seconds": 0.006, "hotspot_seconds": None},  # both kernels' times added up
                        "make-run": {"seconds": 0.04, "hotspot_seconds": None}}
    assert all(0 < wall < 30 for wall in walls.values()), walls  # the run's own wall time, within the run cap
    assert not Event.objects.filter(type__in=["AppCandidateProposed", "AppGateVerdict"]).exists()


def test_a_cuda_program_on_a_machine_without_cuda_is_blocked_with_needs_cuda_not_a_crash(ledger, tmp_path, monkeypatch):
    try:
        machine("cuda")
    except AppGateError:
        pass
    else:
        pytest.skip("this machine runs CUDA applications")
    cuda_make = MAKEFILE.replace("CC        = cc", "CC        = nvcc\nARCH      = sm_60").replace(".c", ".cu")
    root = write_suite(tmp_path / "suite", "cuda", {"vec": ({"regex": TIMED, "args": ["6"]}, MAIN, "6")})
    (root / "src" / "vec-cuda" / "main.c").rename(root / "src" / "vec-cuda" / "main.cu")
    (root / "src" / "vec-cuda" / "Makefile").write_text(cuda_make.format(run="6"))
    monkeypatch.setenv(SUITE_ROOTS_ENV, f"synth={root}")
    report = import_suite(root, "hecbench", root_name="synth", arch="sm_90", out=tmp_path / "m", actor="user:test")
    manifest = load_manifest(tmp_path / "m" / report["programs"][0]["manifest"]).manifest
    assert manifest.build.command == "make -C {src} ARCH=sm_90 program={out} EXTRA_CFLAGS={switch}"
    assert (manifest.architecture, manifest.real_program.language) == ("cuda", "cuda")

    app = triage_all(manifest_paths([str(tmp_path / "m")]), "agent:test")["apps"][0]
    assert (app["state"], app["code"]) == ("BLOCKED", "needs_cuda")
    assert app["reason"].startswith("M1: this machine cannot run cuda applications: ")
    assert not Event.objects.filter(type="AppVariantBuilt").exists()


@pytest.mark.parametrize("regex, unit", [
    (r"(?:Average kernel execution time )([0-9.+-e]+)(?: \(us\))", "us"),
    (r"(?:Average GPU kernel time \(ms\) : )([0-9.+-e]+)", "ms"),
    (r"([0-9.+-e]+)(?:\s*#runtime \[s\])", "s"),
    (r"([0-9.+-e]+)(?: usec/iter)", "us"),
    (r"(?:Device time: )([0-9.+-e]+)(?: (?:s|ms|us))", ""),  # several: the source decides
    (r"(?:elapsed time=)([0-9.+-e]+)(?: )", ""),
    (r"(?:The average performance of reduction is )([0-9.+-e]+)(?: GBytes/sec)", None),  # a rate
])
def test_the_unit_of_a_timing_regex_is_read_from_the_regex(regex, unit):
    assert sources.regex_unit(regex)[0] == unit


def test_the_unit_the_regex_leaves_open_is_read_from_the_format_that_prints_it():
    regex = r"(?:Total task execution time for [0-9.+-e]+ iterations: )([0-9.+-e]+)(?: \((?:s|ms|us)\))"
    source = 'printf("Total task execution time for %d iterations: %f (ms)\\n", n, t);'
    assert sources.printed_unit([source], re.compile(regex)) == ("ms", "")
    unitless = re.compile(r"(?:Kernel time : )([0-9.+-e]+)")
    assert sources.printed_unit(['printf("Kernel time : %f\\n", t);'], unitless)[0] is None


@pytest.mark.parametrize("source, check", [
    ('printf("%s\\n", ok ? "PASS" : "FAIL");', (r"\b(?:PASS)\b", r"\b(?:FAIL)\b")),
    ('printf("%s\\n", ok ? "SUCCESS" : "FAILURE");', (r"\b(?:SUCCESS)\b", r"\b(?:FAILURE)\b")),
    ('printf("[PASSED] keys\\n"); printf("[NOT PASSED] keys\\n");', None),  # negated: unclear
    ('printf("%d tests FAILED\\n", n); printf("PASS\\n");', None),  # counted: unclear
    ('if (bad) printf("FAIL\\n");', None),  # failure only: nothing says it passed
    ('// printf("PASS");\nputs("done");', None),  # a comment is not output
])
def test_the_own_check_is_the_pass_and_fail_words_the_program_prints(source, check):
    found, why = sources.own_check([source])
    assert (found and (found["result_pattern"], found["failure_pattern"])) == check or (check is None and found is None)
    assert bool(why) == (check is None)


def test_an_integer_checksum_is_compared_exactly_and_a_float_one_is_named_not_compared():
    compare, _ = sources.checksum_compare(['printf("Checksum = %llu\\n", sum);'])
    assert compare == [{"source": "stdout", "pattern": r"Checksum = (-?(?:0[xX])?[0-9a-fA-F]+)", "norm": "exact"}]
    compare, why = sources.checksum_compare(['printf("Checksum: %lf\\n", sum);'])
    assert compare == [] and "floating-point checksum" in why


def test_a_state_change_of_schema_v1_reads_with_no_code(ledger, suite, tmp_path):
    imported(suite, tmp_path / "manifests", only=("good",))
    old = append(NewEvent(stream="app/synth-good-omp", type="AppStateChanged", actor="user:test", schema_version=1,
                          payload={"app": "synth-good-omp", "state": "BLOCKED", "reason": "before codes"}))
    assert old.data == {"app": "synth-good-omp", "state": "BLOCKED", "reason": "before codes", "code": None}
    row = AppRow.objects.get(name="synth-good-omp")
    assert (row.state, row.state_code) == ("BLOCKED", "")


@pytest.mark.one_database  # the importer over the real corpus; the SQL is ordinary appends
@pytest.mark.skipif(not (CORPUS / "benchmarks.yaml").is_file(), reason=f"the HeCBench corpus is not at {CORPUS}")
def test_the_real_corpus_imports_at_least_100_programs_and_reports_each_of_the_rest_with_a_reason(ledger, tmp_path,
                                                                                                  monkeypatch):
    monkeypatch.setenv(SUITE_ROOTS_ENV, f"hecbench={CORPUS}")
    report = import_suite(CORPUS, "hecbench", arch="sm_90", out=tmp_path / "m", actor="user:test")  # no builds
    counts = report["counts"]
    assert counts["imported"] >= 100 and counts["imported"] + counts["refused"] == counts["programs"]
    assert all(p["refusals"] and p["refusals"][0]["code"] and p["refusals"][0]["detail"]
               for p in report["programs"] if p["status"] == "refused")
    assert report["upstream"] == {"repository": "https://github.com/zjin-lcf/HeCBench", "commit": COMMIT}
    assert Event.objects.filter(type="AppRegistered").count() == counts["imported"]
    haccmk = load_manifest(tmp_path / "m" / "hecbench-haccmk-cuda.yaml").manifest
    assert haccmk.build.command == "make -C {src} ARCH=sm_90 program={out} EXTRA_CFLAGS={switch}"
    assert (haccmk.source.root, haccmk.source.path, haccmk.timing.unit) == ("hecbench", "src/haccmk-cuda", "s")


def test_the_packed_suite_holds_what_the_import_takes_and_imports_the_same_manifests_unpacked(ledger, suite, tmp_path,
                                                                                             monkeypatch):
    tarball = tmp_path / "suite.tar.xz"
    done = subprocess.run([sys.executable, "scripts/pack_suite.py", str(suite), "--model", "omp", "--root-name", "synth",
                           "--out", str(tarball)], capture_output=True, text=True, cwd=Path(__file__).parents[2])
    assert done.returncode == 0, done.stderr
    assert "6 programs" in done.stdout and "every manifest inferred again from the unpacked copy is the same" in done.stdout
    with tarfile.open(tarball) as tar:
        names = set(tar.getnames())
        packed = tar.extractfile("PACKED").read().decode().split()
        tar.extractall(tmp_path / "unpacked", filter="data")
    assert packed == sorted(packed)
    assert set(packed) == {"good", "failing", "tiny", "opener", "fromsource", "twotimes"}
    assert {"benchmarks.yaml", "CORPUS.md", "LICENSE", "src/good-omp/main.c", "src/good-omp/Makefile"} <= names
    assert not any(n.startswith(("src/unitless-omp", "src/reader-omp", "src/nometa-omp")) for n in names)  # refused

    original = imported(suite, tmp_path / "m1")
    monkeypatch.setenv(SUITE_ROOTS_ENV, f"synth={tmp_path / 'unpacked'}")
    copy = imported(tmp_path / "unpacked", tmp_path / "m2", only=tuple(packed))
    assert copy["counts"]["imported"] == len(packed) and listing(tmp_path / "m2") == {
        name: digest for name, digest in listing(tmp_path / "m1").items()
        if name in {f"{e['app']}.yaml" for e in original["programs"] if e["status"] == "imported"}}
