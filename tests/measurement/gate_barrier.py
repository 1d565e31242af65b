"""A task the workers of tests/measurement/test_workers_gate.py load (`--include`): the real gate
(measurement.services.gate_candidate) on a real worker, whose first measurement waits, once it
has ended, until the test releases it. So two workers both read the result stream (no kernel
standing) and measure before either records its verdict, and the test chooses which records
first: the interleaving is made, not raced."""
from __future__ import annotations

import time
from pathlib import Path

import pytest
from celery import shared_task

from measurement import services
from measurement.backends.base import Kernel
from measurement.harness.plan import ProtocolSettings
from tests.conftest import lift_speed_rule

RELEASE_WAIT_S = 900


@shared_task(name="tests.gate_at_barrier")
def gate_at_barrier(case: str, source: str, launch: dict, protocol: dict, folder: str, name: str) -> dict:
    """Gate `source` on `case`; after the first measurement touch `<folder>/<name>.measured` and wait
    for `<folder>/<name>.release`. The speed rule is lifted (a shared 2-core CPU cannot promise a CI
    above the public bound), every other rule runs."""
    real = services.measure
    calls = []

    def measure(*args, **kwargs):
        report = real(*args, **kwargs)
        calls.append(1)
        if len(calls) == 1:
            Path(folder, f"{name}.measured").touch()
            deadline = time.monotonic() + RELEASE_WAIT_S
            while not Path(folder, f"{name}.release").exists():
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{name} was never released")
                time.sleep(0.05)
        return report

    with pytest.MonkeyPatch.context() as patch:
        lift_speed_rule(patch)
        patch.setattr(services, "measure", measure)
        outcome = services.gate_candidate(case, "cpu", Kernel(source, launch), f"agent:{name}",
                                          protocol=ProtocolSettings(**protocol))
    return {"verdict": outcome.verdict, "reasons": outcome.reasons, "detail": outcome.detail,
            "position": outcome.verdict_event.position, "measurements": len(calls)}
