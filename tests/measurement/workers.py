"""Real Celery workers for the tests of issue 21: the README's worker command (the prefork pool), one
process each with `--concurrency 1` (the layout of one worker per GPU), against the test database
and the real broker. Started and stopped by the test; their logs are returned for the asserts."""
from __future__ import annotations

import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest
from django.conf import settings

from tests.conftest import broker_unreachable, subprocess_env

ROOT = Path(settings.BASE_DIR)
START_S = 240  # a cold worker imports Django, Celery and numpy: seconds, more on a loaded 2-core machine


def skip_without_broker() -> None:
    """The suite's convention (README, "Tests and CI"): tests needing Redis run when
    CELERY_BROKER_URL is set and answers, and are skipped with the reason otherwise."""
    if not settings.CELERY_BROKER_URL:
        pytest.skip("CELERY_BROKER_URL is not set: there is no broker for a real worker")
    problem = broker_unreachable()
    if problem:
        pytest.skip(problem)


def wait_for(condition, what: str, seconds: float = 300):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"waited {seconds} s for {what}")


@contextmanager
def celery_workers(folder: Path, queues: list[str], include: str | None = None, **env: str) -> Iterator[list[Path]]:
    """One worker per entry of `queues` (its comma-separated queues), named w1, w2, …; `include`: a
    further task module; `env`: settings for the workers. Yields their log files once all are
    ready; stops them (warm shutdown: a running task ends first) when the block ends."""
    environment = subprocess_env(FORGESTENCIL_VAR_DIR=str(settings.VAR_DIR), **env)  # this process's keys
    celery = str(Path(sys.executable).parent / "celery")
    started: list[tuple[subprocess.Popen, Path]] = []
    try:
        for number, queue in enumerate(queues, 1):
            log = folder / f"w{number}.log"
            command = [celery, "-A", "config", "worker", "-Q", queue, "--concurrency", "1", "-n", f"w{number}@%h",
                       "-l", "info", *(["--include", include] if include else [])]
            with log.open("w") as handle:
                started.append((subprocess.Popen(command, cwd=ROOT, env=environment, stdout=handle,
                                                 stderr=subprocess.STDOUT), log))
        for process, log in started:
            wait_for(lambda: " ready." in log.read_text() or process.poll() is not None, f"{log.stem} to start", START_S)
            assert process.poll() is None, log.read_text()[-3000:]
        yield [log for _, log in started]
    finally:
        for process, _ in started:
            process.terminate()
        for process, _ in started:
            try:
                process.wait(timeout=120)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
