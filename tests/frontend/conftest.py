"""The frontend tests' shared real results, each measured once a session: an admitted kernel, and a
one-round forge campaign that admitted one."""
from dataclasses import dataclass

import pytest

from forge.models import RoundRow
from forge.services import start_campaign
from ledger.models import Event
from ledger.records import RecordedEvent
from ledger.selectors import stream_events
from ledger.services import record_from_row
from measurement import services
from measurement.backends.base import Kernel
from measurement.models import OperatorResult
from tests.conftest import replay_or_record
from tests.forge.fixtures import Scripted, run_rounds
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


@pytest.fixture
def forged(ledger, speed_rule_lifted, recorded_runs):
    """A one-round campaign whose honest kernel the gate admitted on TINY (the case converges and
    seals its map cell), run once a session and imported by later tests (tests.conftest.replay_or_record).
    On a loaded 2-core machine a measurement can still fail a check the speed rule does not cover
    (say, a launch overhead measured above the kernel's time): then another one-round campaign,
    at most three. Returns the result's key."""
    result = services.result_key("cpu", TINY)

    def record() -> None:
        for _ in range(3):
            run_rounds(start_campaign([TINY], "cpu", "scripted", 1, "user:test"), TINY, Scripted([HONEST]))
            if OperatorResult.objects.filter(result=result, status="admitted").exists():
                return
        pytest.fail(f"the gate admitted none of three rounds: {list(RoundRow.objects.values_list('state', 'detail'))}")

    replay_or_record(recorded_runs, "forged-one-round", record)
    return result
