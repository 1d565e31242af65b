"""Root test configuration: each test session gets its own scratch var/ directory (signing key,
SQLite test database), so tests never touch the developer's ledger."""
import os
import tempfile

os.environ.setdefault("FORGESTENCIL_VAR_DIR", tempfile.mkdtemp(prefix="forgestencil-test-"))


def _gpu_available() -> bool:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # no cupy, no driver, no device: all mean "no GPU here"
        return False


def pytest_collection_modifyitems(config, items):
    """Tests marked `gpu` run only where CuPy sees a CUDA device; elsewhere they are skipped."""
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if not gpu_items or _gpu_available():
        return
    import pytest

    skip = pytest.mark.skip(reason="needs CuPy and a CUDA GPU (run `scripts/gpu_tests.sh` on the device)")
    for item in gpu_items:
        item.add_marker(skip)
