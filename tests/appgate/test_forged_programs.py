"""The forged HeCBench programs as they ship (fixtures/forged/hecbench/<app>/, issue 18): each is a
patch proposer that loads, whose patch applies to the upstream checkout's baseline files as the
gate would apply it, keeps upstream's code behind the `-DFORGED` switch, and has a comparison
declared in fixtures/suites/hecbench/compare/ (or says why none), and whose probe (when it has one,
fixtures/suites/hecbench/probe/) applies to both variants' files; whether each is right and faster
is the H200 gate's to say (scripts/h200_forge_apps.sh), never this test's."""
from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest
import yaml

from appgate import diffs
from appgate.manifest_checks import Comparison
from appgate.proposers import PatchProposer
from tests.appgate.fixtures import CORPUS

ROOT = Path(__file__).resolve().parents[2]
FORGED = sorted((ROOT / "fixtures" / "forged" / "hecbench").iterdir()) if (ROOT / "fixtures" / "forged").is_dir() else []
DECLARED = ROOT / "fixtures" / "suites" / "hecbench" / "compare"
PROBES = sorted((ROOT / "fixtures" / "suites" / "hecbench" / "probe").glob("*.patch"))
PROGRAMS = CORPUS / "src"


def upstream_folder(app: str) -> Path:
    """The program's folder in the checkout: the application's name is its folder's in lower case."""
    return next(folder for folder in PROGRAMS.iterdir() if folder.name.lower() == app)


def test_there_are_forged_programs():
    assert len(FORGED) >= 1


@pytest.mark.parametrize("folder", FORGED, ids=[f.name for f in FORGED])
def test_a_forged_program_loads_and_says_what_it_changes(folder):
    proposer = PatchProposer(folder)
    assert proposer.subject and proposer.paths
    # the candidate names the exact diff it is (what the ledger records beside its files) and its risk
    assert f"sha256 {hashlib.sha256(proposer.text.encode()).hexdigest()[:16]})" in proposer.hypothesis
    assert " Risk: " in proposer.hypothesis


@pytest.mark.skipif(not PROGRAMS.is_dir(), reason=f"the HeCBench corpus is not at {CORPUS}")
@pytest.mark.parametrize("folder", FORGED, ids=[f.name for f in FORGED])
def test_a_forged_patch_applies_to_upstream_and_keeps_its_code_behind_the_switch(folder):
    source = upstream_folder(folder.name)
    text = (folder / "candidate.patch").read_text()
    files = diffs.apply({path: diffs.read_source(source / path) for path in diffs.parse(text)}, text)
    for path, patched in files.items():
        assert re.search(r"^#\s*if(?:def)?\s+(?:defined\s*\(?\s*)?FORGED\b", patched, re.MULTILINE), path
        # without the flag the preprocessor sees upstream's code: every removed line is back in an #else
        removed = [line[1:].strip() for line in text.splitlines() if line.startswith("-") and not line.startswith("---")]
        assert all(line in patched for line in removed if line), path


@pytest.mark.parametrize("folder", FORGED, ids=[f.name for f in FORGED])
def test_each_forged_program_has_a_declared_comparison_or_says_why_not(folder):
    declared = yaml.safe_load((DECLARED / f"{folder.name}.yaml").read_text())
    if isinstance(declared, dict):
        assert len(declared["no_comparison"]) >= 10
    else:
        for item in declared:
            Comparison.model_validate(item)


@pytest.mark.skipif(not PROGRAMS.is_dir(), reason=f"the HeCBench corpus is not at {CORPUS}")
@pytest.mark.parametrize("probe", PROBES, ids=[p.stem for p in PROBES])
def test_a_probe_applies_to_both_variants_and_its_comparison_reads_its_lines(probe):
    """As appgate.builds applies it: on upstream's files (the baseline) and on upstream's with the
    forged patch written over them (the candidate)."""
    source, text = upstream_folder(probe.stem), probe.read_text()
    forged = ROOT / "fixtures" / "forged" / "hecbench" / probe.stem / "candidate.patch"
    candidate_patch = forged.read_text() if forged.is_file() else None
    paths = set(diffs.parse(text)) | (set(diffs.parse(candidate_patch)) if candidate_patch else set())
    upstream = {path: diffs.read_source(source / path) for path in paths}
    candidate = {**upstream, **(diffs.apply(upstream, candidate_patch) if candidate_patch else {})}
    for files in (upstream, candidate):
        probed = diffs.apply(files, text, unique=True)
        assert all("probe:" in probed[path] for path in probed)
    declared = yaml.safe_load((DECLARED / f"{probe.stem}.yaml").read_text())
    assert isinstance(declared, list) and declared, "a probe needs a declared comparison"
    assert all(Comparison.model_validate(item).source == "stdout" and "probe:" in item["pattern"] for item in declared)
