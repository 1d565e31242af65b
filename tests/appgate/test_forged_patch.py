"""An imported outside program forged as a patch (issue 18): its comparison declared by hand at
import (fixtures/suites/<suite>/compare/), triaged in scope, then the App Agent with the `patch`
proposer (a folder of candidate.patch and candidate.yaml, as fixtures/forged/ holds them): the
patched copy built with the suite's switch is gated against the untouched program. On a small
suite in HeCBench's layout (an `omp` program: it builds and runs here) whose clock is exact, so
each verdict is fixed by the source, never by this machine's speed."""
from __future__ import annotations

import difflib
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from appgate.agent import run_agent, triage
from appgate.manifest import SUITE_ROOTS_ENV, load_manifest
from appgate.models import AppRow
from appgate.proposers import PatchProposer
from appgate.services import AppProtocol
from appgate.suites import importer
from appgate.suites.importer import import_suite
from ledger.models import Event
from ledger.selectors import stream_events
from tests.appgate.fixtures import write_suite

QUICK = AppProtocol(passes=2, warmup=0, max_attempts=1)
# Prints the time it is given and a checksum of its result; its own check always passes.
STENCIL = r"""#include <stdio.h>
#include <stdlib.h>
int main(int argc, char** argv) {
  double ms = atof(argv[1]), sum = 0;
  for (int i = 1; i <= 1000; i++) sum += 0.5 * i;
  printf("Average kernel execution time %f (ms)\n", ms);
  printf("checksum %.6f\n", sum);
  printf("PASS\n");
  return 0;
}
"""
TIMED = r"(?:Average kernel execution time )([0-9.+-e]+)(?: \(ms\))"
FASTER = STENCIL.replace('  printf("Average', '#ifdef FORGED\n  ms = ms / 2;\n#endif\n  printf("Average')
WRONG = FASTER.replace("sum += 0.5 * i;", "sum += 0.5 * i;\n#ifdef FORGED\n  sum += 1e-3;\n#endif")
DECLARED = "- source: stdout\n  pattern: 'checksum ([0-9.]+)'\n  norm: max_rel\n  tolerance: 1.0e-09\n"


def forged(folder: Path, new_main: str, subject: str = "the kernel at half the time", base: str = STENCIL) -> Path:
    folder.mkdir(parents=True)
    (folder / "candidate.patch").write_text("".join(difflib.unified_diff(
        base.splitlines(keepends=True), new_main.splitlines(keepends=True), "a/main.c", "b/main.c")))
    (folder / "candidate.yaml").write_text(f"subject: {subject}\nhypothesis: the same sum in half the time\n"
                                           "risk: none here\n")
    return folder


@pytest.fixture
def manifest(ledger, tmp_path, monkeypatch) -> Path:
    """The suite imported with a declared comparison, and its program triaged in scope (a
    profile handed in, as the triage hands CUDA programs ncu's)."""
    root = write_suite(tmp_path / "suite", "omp", {"stencil": ({"regex": TIMED, "args": ["8"]}, STENCIL, "8")})
    (tmp_path / "declared" / "hecbench" / "compare").mkdir(parents=True)
    (tmp_path / "declared" / "hecbench" / "compare" / "stencil-omp.yaml").write_text(DECLARED)
    monkeypatch.setattr(importer, "DECLARED", tmp_path / "declared")
    monkeypatch.setenv(SUITE_ROOTS_ENV, f"synth={root}")
    report = import_suite(root, "hecbench", root_name="synth", model="omp", out=tmp_path / "m", actor="user:test")
    assert report["counts"]["imported"] == 1
    path = tmp_path / "m" / "synth-stencil-omp.yaml"
    assert triage(path, "agent:test", profile=profiled).state == "RESEARCH"
    return path


def profiled(loaded, binary, dataset, scratch) -> dict:
    return {"tool": "ncu", "share": 0.9, "top": [{"name": "stencil", "seconds": 1e-3, "launches": 10, "share": 0.9}],
            "kernel_seconds": 1.1e-3, "problem": ""}


def test_a_declared_comparison_replaces_the_inferred_none_and_the_manifest_says_where_it_came_from(
        ledger, tmp_path, monkeypatch):
    root = write_suite(tmp_path / "suite", "omp", {"stencil": ({"regex": TIMED, "args": ["8"]}, STENCIL, "8")})
    monkeypatch.setenv(SUITE_ROOTS_ENV, f"synth={root}")
    monkeypatch.setattr(importer, "DECLARED", tmp_path / "declared")
    import_suite(root, "hecbench", root_name="synth", model="omp", out=tmp_path / "m", actor="user:test")
    inferred = load_manifest(tmp_path / "m" / "synth-stencil-omp.yaml").manifest.correctness
    assert inferred.compare in (None, []) and inferred.no_comparison

    (tmp_path / "declared" / "hecbench" / "compare").mkdir(parents=True)
    (tmp_path / "declared" / "hecbench" / "compare" / "stencil-omp.yaml").write_text(DECLARED)
    report = import_suite(root, "hecbench", root_name="synth", model="omp", out=tmp_path / "m", actor="user:test")
    assert report["programs"][0]["registered"] == "new" and report["programs"][0]["checks"] == ["compare", "own_check"]
    text = (tmp_path / "m" / "synth-stencil-omp.yaml").read_text()
    assert "# correctness.compare declared by hand: " in text and "stencil-omp.yaml (sha256 " in text
    declared = load_manifest(tmp_path / "m" / "synth-stencil-omp.yaml").manifest.correctness
    assert not declared.no_comparison and declared.compare[0].tolerance == 1e-9

    (tmp_path / "declared" / "hecbench" / "compare" / "stencil-omp.yaml").write_text("just words\n")
    report = import_suite(root, "hecbench", root_name="synth", model="omp", out=tmp_path / "m", actor="user:test")
    assert report["programs"][0]["refusals"][0]["code"] == "invalid_declared_comparison"



def test_a_forged_patch_is_gated_against_the_untouched_program_and_integrated(manifest, tmp_path, client):
    row = run_agent(manifest, "agent:test", protocol=QUICK, proposer=PatchProposer(forged(tmp_path / "f", FASTER)))
    assert (row.state, row.verdict, row.real) == ("INTEGRATED", "admitted", True)
    assert row.headline == pytest.approx(2.0)  # the program's own clock: 8 ms against 4 ms
    events = stream_events("app/synth-stencil-omp")
    m1 = [e.data["evidence"] for e in events if e.type == "AppMilestoneReached" and e.data["milestone"] == "M1"]
    assert m1[-1]["profile"]["from_event"] == str(next(  # the triage's profile, not a second one
        e.event_id for e in events if e.type == "AppMilestoneReached" and e.data["milestone"] == "M1"))
    proposed = next(e.data for e in events if e.type == "AppCandidateProposed")
    assert proposed["proposer"] == "patch" and proposed["subject"] == "the kernel at half the time"
    assert "+#ifdef FORGED" in proposed["patch"] and proposed["files"]["main.c"] == FASTER
    assert "sha256 " in proposed["hypothesis"] and "Risk: none here" in proposed["hypothesis"]
    page = client.get("/apps/synth-stencil-omp/").content.decode()  # the reviewer's view: the diff it was judged on
    diff = page.split('<pre id="candidate-diff">')[1].split("</pre>")[0]
    assert "+#ifdef FORGED" in diff and "+  ms = ms / 2;" in diff and "--- a/main.c" in diff


def test_a_forged_patch_that_changes_the_result_is_rejected_by_the_declared_comparison(manifest, tmp_path):
    row = run_agent(manifest, "agent:test", protocol=QUICK, proposer=PatchProposer(forged(tmp_path / "f", WRONG)))
    assert row.verdict == "rejected" and row.state == "RESEARCH" and not row.real
    verdict = [e.data for e in stream_events("app/synth-stencil-omp") if e.type == "AppGateVerdict"][-1]
    assert "compare.0" in verdict["detail"]


def test_a_patch_that_no_longer_applies_proposes_nothing_and_says_why(manifest, tmp_path):
    folder = forged(tmp_path / "f", FASTER)
    (folder / "candidate.patch").write_text((folder / "candidate.patch").read_text().replace(" int main", " int mane"))
    row = run_agent(manifest, "agent:test", protocol=QUICK, proposer=PatchProposer(folder))
    assert (row.state, row.state_code) == ("RESEARCH", "no_candidate")
    assert "the patch does not apply to synth-stencil-omp's baseline: main.c: the hunk at line" in row.state_reason
    assert not Event.objects.filter(type__in=["AppCandidateProposed", "AppGateVerdict"]).exists()


def test_the_command_refuses_a_patch_folder_without_its_claims_before_any_run(manifest, tmp_path):
    folder = forged(tmp_path / "f", FASTER)
    (folder / "candidate.yaml").write_text("subject: ''\n")
    with pytest.raises(CommandError, match="needs non-empty strings 'subject' and 'hypothesis'"):
        call_command("appgate", "agent", str(manifest), "--proposer", "patch", "--patch", str(folder))
    with pytest.raises(CommandError, match="--patch FOLDER goes with --proposer patch"):
        call_command("appgate", "agent", str(manifest), "--patch", str(folder))
    for budget in ("0", "-5", "nan"):
        with pytest.raises(CommandError, match="--gate-budget must be a positive number of seconds"):
            call_command("appgate", "agent", str(manifest), "--gate-budget", budget)
    assert AppRow.objects.get(name="synth-stencil-omp").state == "RESEARCH"  # nothing ran


def test_a_declared_larger_dataset_is_added_after_upstreams_and_a_name_clash_refused(ledger, tmp_path, monkeypatch):
    root = write_suite(tmp_path / "suite", "omp", {"stencil": ({"regex": TIMED, "args": ["8"]}, STENCIL, "8")})
    monkeypatch.setenv(SUITE_ROOTS_ENV, f"synth={root}")
    monkeypatch.setattr(importer, "DECLARED", tmp_path / "declared")
    (tmp_path / "declared" / "hecbench" / "datasets").mkdir(parents=True)
    declared = tmp_path / "declared" / "hecbench" / "datasets" / "stencil-omp.yaml"
    declared.write_text("# sized for the GPU: 64 times upstream's\n- name: large\n  args: '512'\n")
    report = import_suite(root, "hecbench", root_name="synth", model="omp", out=tmp_path / "m", actor="user:test")
    assert report["programs"][0]["datasets"] == ["test", "large"]
    manifest = tmp_path / "m" / "synth-stencil-omp.yaml"
    assert "# datasets declared by hand: " in manifest.read_text()
    assert [d.args for d in load_manifest(manifest).manifest.datasets] == ["8", "512"]

    declared.write_text("- name: test\n  args: '512'\n")
    report = import_suite(root, "hecbench", root_name="synth", model="omp", out=tmp_path / "m", actor="user:test")
    assert report["programs"][0]["refusals"] == [{"code": "invalid_declared_datasets", "detail":
                                                  "stencil-omp.yaml: dataset names already inferred from upstream: test"}]


def test_without_an_earlier_profile_the_agent_profiles_the_baseline_itself(ledger, tmp_path, monkeypatch):
    """A program the triage never profiled (BLOCKED too_short at upstream's size, then given a
    larger dataset): the agent's own profile decides its scope; with neither, it is out of scope."""
    root = write_suite(tmp_path / "suite", "omp", {"stencil": ({"regex": TIMED, "args": ["8"]}, STENCIL, "8")})
    monkeypatch.setenv(SUITE_ROOTS_ENV, f"synth={root}")
    monkeypatch.setattr(importer, "DECLARED", tmp_path / "declared")
    (tmp_path / "declared" / "hecbench" / "compare").mkdir(parents=True)
    (tmp_path / "declared" / "hecbench" / "compare" / "stencil-omp.yaml").write_text(DECLARED)
    import_suite(root, "hecbench", root_name="synth", model="omp", out=tmp_path / "m", actor="user:test")
    path, folder = tmp_path / "m" / "synth-stencil-omp.yaml", forged(tmp_path / "f", FASTER)
    assert run_agent(path, "agent:test", protocol=QUICK, proposer=PatchProposer(folder)).state_code == "hotspot_unmeasured"
    row = run_agent(path, "agent:test", protocol=QUICK, proposer=PatchProposer(folder), profile=profiled)
    assert (row.state, row.verdict, row.real) == ("INTEGRATED", "admitted", True)
    m1 = [e.data["evidence"] for e in stream_events("app/synth-stencil-omp")
          if e.type == "AppMilestoneReached" and e.data["milestone"] == "M1"]
    assert m1[-1]["profile"]["share"] == 0.9 and "from_event" not in m1[-1]["profile"]  # its own, measured now
