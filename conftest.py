"""Root test configuration: the GPU skip, the database pass of `./dev test` and the CPU baselines
the suite measures by default. (The scratch
var/ directory of a test session is set by tests/scratch_var.py, loaded before the settings.)"""
import os

import pytest


def gpu_unavailable() -> str | None:
    """Why the `gpu` tests cannot run here, or None when CuPy sees a CUDA device. A CuPy that is
    installed but does not import (a wheel for another CUDA, a missing library) is named with its
    error, never taken for plain "no GPU" (issue 20: a broken CuPy gave 56 skipped and exit 0)."""
    try:
        import cupy
    except ModuleNotFoundError as error:
        if error.name == "cupy":
            return "CuPy is not installed"
        return f"CuPy does not import: {error!r}"
    except Exception as error:  # ImportError from a missing CUDA library, or anything its import raises
        return f"CuPy does not import: {error!r}"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as error:
        return f"CuPy sees no CUDA device: {error!r}"
    return None if count > 0 else "CuPy sees no CUDA device (0 devices)"


def pytest_configure(config):
    """CPU measurements in the suite time the straightforward kernel, scipy and pystencils by
    default. Halide and Devito each add a JIT or lowering step to both harness children of every
    CPU measurement (seconds each, on CI's 2 cores: the suite went from 11 to 22 minutes with
    them everywhere), so the tests about them, and one real measurement with every baseline
    (tests/measurement/test_gate.py), set FORGESTENCIL_CPU_BASELINES themselves. A value already
    in the environment wins."""
    os.environ.setdefault("FORGESTENCIL_CPU_BASELINES", "scipy.ndimage,pystencils")


DATABASE_FIXTURES = {"db", "transactional_db", "live_server"}  # pytest-django puts django_db_blocker in every closure


def _uses_database(item) -> bool:
    return item.get_closest_marker("django_db") is not None or bool(DATABASE_FIXTURES & set(item.fixturenames))


def _runs_in_database_pass(item) -> bool:
    """Kept by the second pass: every test that uses a database, and every test marked
    `one_database` (the first pass deselects those with -m, so they run exactly once)."""
    return _uses_database(item) or item.get_closest_marker("one_database") is not None


# When `./dev test` runs its two passes side by side (FORGESTENCIL_ONE_DATABASE_SPLIT=1 in both), the SQLite
# pass takes the `one_database` tests of these folders that start no real worker (`services`), so that both end at
# about the same time (docs/testing.md). tests/forge/'s went back to the PostgreSQL pass in session 42: with the CPU
# flush made cheap, that pass ended 230 s before the SQLite pass in a fresh clone.
SQLITE_SHARE = ("tests/appgate/",)


def _in_sqlite_share(item) -> bool:
    return (item.get_closest_marker("one_database") is not None and item.get_closest_marker("services") is None
            and item.nodeid.startswith(SQLITE_SHARE))


def _kept(item) -> bool:
    """Whether this pass runs the test: with FORGESTENCIL_DATABASE_TESTS_ONLY=1 (the second pass) as
    `_runs_in_database_pass` says, less the SQLite pass's share when the passes are split; in a split
    SQLite pass, every test but the other pass's `one_database` ones."""
    split = os.environ.get("FORGESTENCIL_ONE_DATABASE_SPLIT") == "1"
    if os.environ.get("FORGESTENCIL_DATABASE_TESTS_ONLY") == "1":
        return _runs_in_database_pass(item) and not (split and _in_sqlite_share(item))
    return not split or item.get_closest_marker("one_database") is None or _in_sqlite_share(item)


def pytest_collection_modifyitems(config, items):
    """Tests marked `gpu` run only where CuPy sees a CUDA device; elsewhere they are skipped with
    the reason, or, with FORGESTENCIL_REQUIRE_GPU=1 (scripts/gpu_tests.sh), the run stops with it.

    With FORGESTENCIL_DATABASE_TESTS_ONLY=1 (the second, PostgreSQL pass of `./dev test`) the
    tests that never touch a database are deselected: the first pass ran them, and a second
    run against another database could not tell anything new. Tests marked `one_database` are
    kept (the first pass, `-m "not one_database"`, left them to this one), except, when the passes run
    side by side, the SQLite pass's share of them (`SQLITE_SHARE`)."""
    dropped = [item for item in items if not _kept(item)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if _kept(item)]
    gpu_items = [item for item in items if "gpu" in item.keywords]
    why = gpu_unavailable() if gpu_items else None
    if why is None:
        return
    if os.environ.get("FORGESTENCIL_REQUIRE_GPU") == "1":
        pytest.exit(f"{len(gpu_items)} gpu tests selected and this run requires a GPU: {why}",
                    returncode=pytest.ExitCode.USAGE_ERROR)
    skip = pytest.mark.skip(reason=f"needs CuPy and a CUDA GPU: {why} (run `scripts/gpu_tests.sh` on the device)")
    for item in gpu_items:
        item.add_marker(skip)

