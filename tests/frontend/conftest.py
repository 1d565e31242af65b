"""The frontend tests' shared forged result: a one-round forge campaign that admitted the honest kernel,
measured once a session (the admitted kernel without a round, `admit`, is in tests/conftest.py)."""
import pytest

from forge.models import RoundRow
from forge.services import start_campaign
from measurement import services
from measurement.models import OperatorResult
from tests.conftest import replay_or_record
from tests.forge.fixtures import Scripted, run_rounds
from tests.frontend.test_tables import HONEST, TINY


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
