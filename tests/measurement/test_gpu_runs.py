"""A GPU test run cannot pass by skipping (issue 20): the root conftest names why CuPy cannot run
(`gpu_unavailable`), and scripts/gpu_tests.sh exits non-zero before any test when CUDA is not
usable. Tested here, without a GPU, with a stand-in CuPy package first on PYTHONPATH: one whose
import fails as a CuPy built for another CUDA does, and one that imports and sees no device."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

ROOT = Path(settings.BASE_DIR)
BROKEN = 'raise ImportError("libcudart.so.13: cannot open shared object file: No such file or directory")\n'
DEVICELESS = ("class _Runtime:\n    @staticmethod\n    def getDeviceCount():\n        return 0\n\n\n"
              "class cuda:\n    runtime = _Runtime\n")


def stand_in_cupy(folder: Path, source: str) -> Path:
    (folder / "cupy").mkdir(parents=True)
    (folder / "cupy" / "__init__.py").write_text(source)
    return folder


def run(command: list[str], site: Path, **extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(site), **extra}
    env.pop("FORGESTENCIL_DATABASE_TESTS_ONLY", None)
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def gpu_pytest(site: Path, **extra: str) -> subprocess.CompletedProcess:
    return run([sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider",
                "tests/measurement/test_cuda_bounds.py"], site, **extra)


def test_a_broken_cupy_is_named_in_the_skip_reason_and_fails_a_run_that_requires_a_gpu(tmp_path):
    site = stand_in_cupy(tmp_path, BROKEN)
    skipped = gpu_pytest(site)
    assert skipped.returncode == 0, skipped.stdout
    assert ("needs CuPy and a CUDA GPU: CuPy does not import: ImportError('libcudart.so.13: cannot open shared "
            "object file") in skipped.stdout
    required = gpu_pytest(site, FORGESTENCIL_REQUIRE_GPU="1")
    assert required.returncode == pytest.ExitCode.USAGE_ERROR
    why = "gpu tests selected and this run requires a GPU: CuPy does not import: ImportError('libcudart"
    assert why in required.stdout


@pytest.mark.parametrize("cupy, why", [
    (BROKEN, "CuPy does not import: ImportError('libcudart.so.13: cannot open shared object file"),
    (DEVICELESS, "CuPy sees no CUDA device (0 devices)"),
])
def test_gpu_tests_sh_exits_non_zero_before_any_test_when_cuda_is_not_usable(tmp_path, cupy, why):
    site = stand_in_cupy(tmp_path / "site", cupy)
    (site / ".installed").touch()  # scripts/device_env.sh: the device wheels count as installed
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)  # the device image's python3, here this venv's
    done = run(["bash", "scripts/gpu_tests.sh"], site, FORGESTENCIL_SITE=str(site),
               PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"CUDA is not usable here, so no gpu test can run: {why}" in done.stderr
    assert "passed" not in done.stdout and "skipped" not in done.stdout
