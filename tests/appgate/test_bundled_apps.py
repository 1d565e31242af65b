"""The bundled real applications (fixtures/apps): every manifest is valid and its baseline
byte-identical to the declared hashes; every CPU app builds in both variants and passes its own
verification (or, for the comparing modes, both variants agree) on its first dataset, through the
gate's own runner (appgate/runner.py); the gate runs end to end on every CPU app; every CUDA
variant compiles (where nvcc is installed) and runs and verifies on a GPU (marked gpu).
"""
from __future__ import annotations

import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from appgate import runner
from appgate.manifest import baseline_mismatches, load_manifest
from appgate.services import AppProtocol, run_gate
from measurement.harness.cases import parse_case

APPS_DIR = Path(__file__).resolve().parents[2] / "fixtures" / "apps"
MANIFESTS = sorted(APPS_DIR.glob("*/manifest.*.yaml"))
CPU = [p for p in MANIFESTS if p.name == "manifest.cpu.yaml"]
CUDA = [p for p in MANIFESTS if p.name == "manifest.cuda.yaml"]
NVCC = shutil.which("nvcc")


def _id(path: Path) -> str:
    return f"{path.parent.name}-{path.name.split('.')[1]}"


def build_all(paths: list[Path], scratch: Path) -> dict[tuple[str, str], runner.BuildResult]:
    """Apps in parallel, each app's two variants one after the other in a scratch of its own (a
    build folder is reused by the next build: appgate.builds)."""
    def both(loaded):
        return [runner.build(loaded, v, scratch / _id(loaded.path)) for v in runner.VARIANTS]

    apps = [load_manifest(p) for p in paths]
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        results = list(pool.map(both, apps))
    return {(_id(loaded.path), v): built for loaded, pair in zip(apps, results) for v, built in zip(runner.VARIANTS, pair)}


def verify_first_dataset(path: Path, builds: dict, scratch: Path) -> None:
    """Both variants pass the gate's correctness check on the first dataset, and report a time
    and a hotspot no longer than it."""
    loaded = load_manifest(path)
    binaries = {}
    for variant in runner.VARIANTS:
        built = builds[(_id(path), variant)]
        assert built.ok, f"{loaded.name} {variant} did not build:\n{built.output_tail}"
        binaries[variant] = built.binary
    dataset = loaded.manifest.datasets[0]
    check = runner.check_dataset(loaded, binaries, dataset, scratch)
    assert all(check.correct.values()), f"{loaded.name} ({dataset.name}): {check.detail}"
    ran = runner.run(loaded, "baseline", binaries["baseline"], dataset, scratch)
    seconds, hotspot = runner.seconds_of(loaded, ran), runner.hotspot_of(loaded, ran)
    assert seconds and seconds > 0 and hotspot is not None and 0 <= hotspot <= seconds * 1.05 + 1e-3, (seconds, hotspot)


# ---------------------------------------------------------------- manifests

@pytest.mark.parametrize("path", MANIFESTS, ids=_id)
def test_manifest_is_valid(path):
    loaded = load_manifest(path)  # raises ManifestError listing every problem
    m = loaded.manifest
    assert m.name == f"{path.parent.name}-{m.architecture}"
    assert path.name == f"manifest.{m.architecture}.yaml"
    assert m.real_program.language == ("c" if m.architecture == "cpu" else "cuda")
    assert m.provenance.upstream == "bundled" and m.provenance.licence == "MIT"
    assert m.timing.source == "pattern" and m.hotspot.source == "pattern"
    parse_case(m.hotspot.case)  # a valid operator case id


@pytest.mark.parametrize("path", MANIFESTS, ids=_id)
def test_declared_baseline_hashes_match_the_files(path):
    loaded = load_manifest(path)
    assert baseline_mismatches(loaded) == []


def test_the_bundle_covers_the_issue():
    # outside/ holds manifests of programs the project does not ship (docs/appgate.md, "Bring your own program")
    apps = sorted(p.name for p in APPS_DIR.iterdir() if p.is_dir() and p.name != "outside")
    assert len(apps) >= 6, apps
    for app in apps:
        folder = APPS_DIR / app
        assert (folder / "manifest.cpu.yaml").is_file() and (folder / "manifest.cuda.yaml").is_file(), app
        assert (folder / "README.md").is_file(), app
    loaded = [load_manifest(p) for p in MANIFESTS]
    several = {lm.manifest.name.rsplit("-", 1)[0] for lm in loaded if lm.manifest.architecture == "cpu" and len(lm.manifest.datasets) >= 2}
    assert len(several) >= 2, several
    assert {lm.manifest.switch.kind for lm in loaded} == {"build_flag", "env", "cli_flag"}
    # two checks everywhere: the program's own and a comparison of outputs (printed values, a file, exact counts)
    assert all(lm.manifest.correctness.own_check and lm.manifest.correctness.compare for lm in loaded)
    compared = {(c.source, c.norm) for lm in loaded for c in lm.manifest.correctness.compare}
    assert {("stdout", "max_rel"), ("file", "max_rel"), ("stdout", "exact")} <= compared, compared


# ---------------------------------------------------------------- CPU: build, run, verify

@pytest.fixture(scope="module")
def cpu_builds(tmp_path_factory):
    if not shutil.which("cc"):
        pytest.skip("no C compiler (cc) here")
    return build_all(CPU, tmp_path_factory.mktemp("cpu-builds"))


@pytest.mark.parametrize("path", CPU, ids=_id)
def test_cpu_app_builds_runs_and_verifies(path, cpu_builds, tmp_path):
    verify_first_dataset(path, cpu_builds, tmp_path)


@pytest.mark.one_database
@pytest.mark.parametrize("path", CPU, ids=_id)
def test_the_gate_runs_end_to_end_on_every_cpu_app(ledger, path):
    """Two interleaved passes per dataset (CI's noise decides admitted vs below the floor, so
    only the verdict's completeness is asserted here; benchmarks/appgate_bundled.py commits the
    seven-pass table)."""
    outcome = run_gate(path, "user:test", AppProtocol(passes=2, warmup=0, max_attempts=1))
    assert outcome.reasons in ([], ["below_floor"]), outcome.detail
    loaded = load_manifest(path)
    assert set(outcome.datasets) == {d.name for d in loaded.manifest.datasets}
    assert all(p["correct"] == {"baseline": True, "candidate": True} for p in outcome.measured)


# ---------------------------------------------------------------- CUDA: compile here, run on a GPU

@pytest.fixture(scope="module")
def cuda_builds(tmp_path_factory):
    if not NVCC:
        pytest.skip("nvcc is not installed here")
    return build_all(CUDA, tmp_path_factory.mktemp("cuda-builds"))


@pytest.mark.parametrize("path", CUDA, ids=_id)
def test_cuda_app_compiles(path, cuda_builds):
    for variant in runner.VARIANTS:
        built = cuda_builds[(_id(path), variant)]
        assert built.ok, f"{path.parent.name} {variant} did not compile:\n{built.output_tail}"


@pytest.mark.gpu
@pytest.mark.parametrize("path", CUDA, ids=_id)
def test_cuda_app_runs_and_verifies_on_a_gpu(path, tmp_path):
    if not NVCC:
        pytest.skip("nvcc is not installed here")
    verify_first_dataset(path, build_all([path], tmp_path), tmp_path)
