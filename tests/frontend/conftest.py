"""The frontend tests' shared real result: an admitted kernel, gated once a session."""
from dataclasses import dataclass

import pytest

from ledger.models import Event
from ledger.records import RecordedEvent
from ledger.selectors import stream_events
from ledger.services import record_from_row
from measurement import services
from measurement.backends.base import Kernel
from tests.conftest import replay_or_record
from tests.frontend.test_tables import HONEST, QUICK, TINY


@dataclass
class Admitted:
    verdict_event: RecordedEvent
    measured_event: RecordedEvent

    @property
    def speedup(self) -> float:
        return self.verdict_event.data["speedup"]


@pytest.fixture
def admit(recorded_runs, speed_rule_lifted):
    """`admit()` gives this test's ledger a real admitted result: the honest kernel gated on a
    tiny CPU case. The gate runs once a session (tests.conftest.replay_or_record). On a loaded
    2-core machine a launch-overhead estimate can still push an honest tiny kernel under the
    physics floor; then the gate runs again, at most three times."""

    def record() -> None:
        details = []
        for _ in range(3):
            outcome = services.gate_candidate(TINY, "cpu", Kernel(HONEST, {"threads": 1}), "agent:test", protocol=QUICK)
            if outcome.verdict == "admitted":
                return
            details.append(outcome.detail)
        pytest.fail(f"the gate admitted the honest kernel in none of three runs: {details}")

    def admitted() -> Admitted:
        replay_or_record(recorded_runs, "admitted-tiny", record)
        verdict = next(e for e in reversed(stream_events(services.result_key("cpu", TINY)))
                       if e.type == "GateVerdict" and e.data["verdict"] == "admitted")
        measured = record_from_row(Event.objects.get(event_id=verdict.data["measurement"]))
        return Admitted(verdict, measured)

    return admitted


