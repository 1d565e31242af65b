"""A probe (correctness.probe, issue 18): a program that prints nothing result-dependent, only its
time and PASS, gets a small diff of ours applied to both variants before they build, which prints
its result; the declared comparison reads that line. On a small suite in HeCBench's layout (an
`omp` program: it builds and runs here) whose clock is exact, so each verdict is fixed by the source."""
from __future__ import annotations

import difflib
import hashlib
from pathlib import Path

import pytest
from django.utils.html import escape

from appgate.agent import run_agent, triage
from appgate.manifest import SUITE_ROOTS_ENV, load_manifest
from appgate.proposers import PatchProposer
from appgate.suites import importer
from appgate.suites.importer import import_suite
from ledger.selectors import stream_events
from tests.appgate.fixtures import write_suite
from tests.appgate.test_forged_patch import QUICK, TIMED, forged, profiled

# Its own check passes whatever the sum: only the probe makes the result visible.
SILENT = r"""#include <stdio.h>
#include <stdlib.h>
int main(int argc, char** argv) {
  double ms = atof(argv[1]), sum = 0;
  for (int i = 1; i <= 1000; i++) sum += 0.5 * i;
  printf("Average kernel execution time %f (ms)\n", ms);
  printf("PASS\n");
  return 0;
}
"""
PROBED = SILENT.replace('  printf("PASS\\n");', '  printf("PASS\\n");\n  printf("probe: sum %.6f\\n", sum);')
FASTER = SILENT.replace('  printf("Average', '#ifdef FORGED\n  ms = ms / 2;\n#endif\n  printf("Average')
WRONG = FASTER.replace("sum += 0.5 * i;", "sum += 0.5 * i;\n#ifdef FORGED\n  sum += 1e-3;\n#endif")
# Rewrites the PASS line the probe's hunk holds as context: the probe no longer fits the candidate.
MOVED = FASTER.replace('  printf("PASS\\n");', '  puts("PASS");')
# Copies the probe's lines into a branch that never runs, to choose where the probe lands.
DECOY = FASTER.replace("  double ms", '  if (argc < 0) {\n  printf("PASS\\n");\n  return 0;\n  }\n  double ms')
COMPARED = "- source: stdout\n  pattern: '^probe: sum ([0-9.]+)'\n  norm: exact\n"


def diff(old: str, new: str) -> str:
    """With one line of context: the probe's hunk holds the PASS line and `return 0;`, which FASTER keeps."""
    return "".join(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True), "a/main.c", "b/main.c", n=1))


def declare(tmp_path: Path, monkeypatch, *, probe: str | None, compare: str | None = COMPARED) -> dict:
    root = write_suite(tmp_path / "suite", "omp", {"silent": ({"regex": TIMED, "args": ["8"]}, SILENT, "8")})
    declared = tmp_path / "declared" / "hecbench"
    for kind, name, text in (("compare", "silent-omp.yaml", compare), ("probe", "silent-omp.patch", probe)):
        if text is not None:
            (declared / kind).mkdir(parents=True, exist_ok=True)
            (declared / kind / name).write_text(text)
    monkeypatch.setattr(importer, "DECLARED", tmp_path / "declared")
    monkeypatch.setenv(SUITE_ROOTS_ENV, f"synth={root}")
    return import_suite(root, "hecbench", root_name="synth", model="omp", out=tmp_path / "m", actor="user:test")


@pytest.fixture
def manifest(ledger, tmp_path, monkeypatch) -> Path:
    assert declare(tmp_path, monkeypatch, probe=diff(SILENT, PROBED))["counts"]["imported"] == 1
    path = tmp_path / "m" / "synth-silent-omp.yaml"
    assert triage(path, "agent:test", profile=profiled).state == "RESEARCH"
    return path


def test_a_probed_program_is_compared_and_its_faster_candidate_integrated_real(manifest, tmp_path, client):
    assert "# correctness.probe declared by hand: " in manifest.read_text()
    assert load_manifest(manifest).manifest.correctness.probe == diff(SILENT, PROBED)
    row = run_agent(manifest, "agent:test", protocol=QUICK, proposer=PatchProposer(forged(tmp_path / "f", FASTER, base=SILENT)))
    assert (row.state, row.verdict, row.real) == ("INTEGRATED", "admitted", True)
    events = stream_events("app/synth-silent-omp")
    built = [e.data for e in events if e.type == "AppVariantBuilt"]
    assert {b["probe"] for b in built} == {hashlib.sha256(diff(SILENT, PROBED).encode()).hexdigest()}
    verdict = [e.data for e in events if e.type == "AppGateVerdict"][-1]
    assert verdict["checks"] == ["own_check", "compare"]  # not self-checked: the probe's line was read in both
    page = client.get("/apps/synth-silent-omp/").content.decode()  # the reviewer sees what both were built with
    shown = page.split('<pre id="probe-diff">')[1].split("</pre>")[0]
    assert escape('+  printf("probe: sum %.6f\\n", sum);') in shown


def test_a_candidate_whose_result_only_the_probe_shows_wrong_is_rejected(manifest, tmp_path):
    row = run_agent(manifest, "agent:test", protocol=QUICK, proposer=PatchProposer(forged(tmp_path / "f", WRONG, base=SILENT)))
    assert row.verdict == "rejected" and not row.real  # its own check said PASS on every run
    verdict = [e.data for e in stream_events("app/synth-silent-omp") if e.type == "AppGateVerdict"][-1]
    assert "compare.0" in verdict["detail"]


def test_a_candidate_that_moves_the_probes_lines_fails_its_build_and_says_so(manifest, tmp_path):
    row = run_agent(manifest, "agent:test", protocol=QUICK, proposer=PatchProposer(forged(tmp_path / "f", MOVED, base=SILENT)))
    assert row.verdict == "rejected" and not row.real
    failed = [e.data for e in stream_events("app/synth-silent-omp") if e.type == "AppVariantBuilt" and not e.data["ok"]]
    assert [b["variant"] for b in failed] == ["candidate"]
    assert failed[0]["output_tail"].startswith("the probe (correctness.probe) does not apply to the candidate's source: "
                                               "main.c: the hunk at line")


def test_a_candidate_that_copies_the_probes_lines_elsewhere_fails_its_build(manifest, tmp_path):
    row = run_agent(manifest, "agent:test", protocol=QUICK, proposer=PatchProposer(forged(tmp_path / "f", DECOY, base=SILENT)))
    assert row.verdict == "rejected" and not row.real
    failed = [e.data for e in stream_events("app/synth-silent-omp") if e.type == "AppVariantBuilt" and not e.data["ok"]]
    assert [b["variant"] for b in failed] == ["candidate"]
    assert "main.c: the lines of the hunk at line 7 stand 2 times in the file, the patch changes them at 1 place(s)" in failed[0]["output_tail"]


def test_a_probe_without_a_comparison_or_that_does_not_fit_upstream_is_refused_at_import(ledger, tmp_path, monkeypatch):
    report = declare(tmp_path, monkeypatch, probe=diff(SILENT, PROBED), compare=None)
    assert report["programs"][0]["refusals"][0] == {"code": "invalid_declared_probe", "detail": (
        "silent-omp.patch: a probe needs a comparison that reads what it prints (declare it in compare/<app>.yaml)")}
    report = declare(tmp_path / "again", monkeypatch, probe=diff(FASTER, FASTER.replace("ms = ms / 2;", "ms = ms / 4;")))  # written against another file
    refusal = report["programs"][0]["refusals"][0]
    assert refusal["code"] == "invalid_manifest" and "correctness.probe: does not apply to the baseline: main.c:" in refusal["detail"]
    other = diff(SILENT, PROBED).replace("a/main.c", "a/other.c").replace("b/main.c", "b/other.c")
    refusal = declare(tmp_path / "third", monkeypatch, probe=other)["programs"][0]["refusals"][0]
    assert refusal["code"] == "invalid_manifest" and "correctness.probe: changes other.c, not among source.baseline_files" in refusal["detail"]
