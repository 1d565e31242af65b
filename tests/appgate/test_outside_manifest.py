"""The outside program of docs/appgate.md's "Bring your own program" (HPCCG from the HeCBench
corpus, by path): its manifest is valid, its baseline byte-identical to the corpus, both variants
build from fresh copies into different binaries and agree under the comparison. Skipped where the
corpus is not at its path (it is not part of this project)."""
from __future__ import annotations

from pathlib import Path

import pytest

from appgate import runner
from appgate.manifest import baseline_mismatches, load_manifest

MANIFEST = Path(__file__).resolve().parents[2] / "fixtures" / "apps" / "outside" / "hpccg.cpu.yaml"
CORPUS = Path("/work/shared/corpora/hecbench/src/miniFE-cuda/basic/optional/ThreadPool")

pytestmark = pytest.mark.skipif(not CORPUS.is_dir(), reason=f"the HeCBench corpus is not at {CORPUS}")


def test_the_outside_program_builds_from_fresh_copies_and_both_variants_agree(tmp_path):
    loaded = load_manifest(MANIFEST)
    assert loaded.source_dir == CORPUS and baseline_mismatches(loaded) == []
    before = sorted(p.name for p in CORPUS.rglob("*"))
    built = {v: runner.build(loaded, v, tmp_path) for v in runner.VARIANTS}
    assert all(b.ok for b in built.values()), {v: b.output_tail for v, b in built.items()}
    assert built["baseline"].binary_hash != built["candidate"].binary_hash
    check = runner.check_dataset(loaded, {v: b.binary for v, b in built.items()}, loaded.manifest.datasets[0], tmp_path)
    assert all(check.correct.values()), check.detail
    assert sorted(p.name for p in CORPUS.rglob("*")) == before
