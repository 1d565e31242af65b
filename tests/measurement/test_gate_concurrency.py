"""Two workers gating the same case (issue 21): the gate appends its verdict at the result stream's
version it read before the prior best, so a verdict admitted by another worker during its
measurement makes it decide again against that verdict's kernel. The interleaving is made, not
raced: the measuring step appends the competitor's admitted verdict (a real ledger) after timing."""
from pathlib import Path

import pytest

from ledger.selectors import stream_events
from ledger.review import retract
from ledger.services import NewEvent, append
from ledger.verification import verify_ledger
from measurement import services
from measurement.backends.base import Kernel
from measurement.harness.plan import ProtocolSettings
from measurement.models import OperatorResult
from measurement.reports import source_hash
from measurement.reruns import rerun_gate
from measurement.services import MeasurementError, gate_candidate, result_key

CHEATS = Path(__file__).parent / "cheats"
HONEST = (CHEATS / "honest.c").read_text()
QUICK = ProtocolSettings(passes=2, launches=2, warmup=1, max_attempts=1)  # the time goes on cache flushes
CASE = "star_1/64x64x64/f32"
KEY = result_key("cpu", CASE)
FAST = Kernel(HONEST, {"threads": 1})
# ~8 sin() per point: about 100x slower than FAST, far outside any noise of a shared CPU.
SLOW = Kernel(HONEST.replace("#include <stddef.h>", "#include <stddef.h>\n#include <math.h>").replace(
    "                y[i] = ", "                y[i] = (float)(1.0 + 0.0 * (sin(i + 1.0) + sin(i + 2.0) + "
    "sin(i + 3.0) + sin(i + 4.0) + sin(i + 5.0) + sin(i + 6.0) + sin(i + 7.0) + sin(i + 8.0))) * ", 1), {"threads": 1})
pytestmark = pytest.mark.one_database  # the gate's logic on real measurements


def admitted_elsewhere(kernel: Kernel, median: float) -> None:
    """Another worker's admission of `kernel`, as its gate records it (a GateVerdict on the result stream)."""
    append(NewEvent(stream=KEY, type="GateVerdict", actor="agent:other-worker", payload={
        "result": KEY, "case": CASE, "backend": "cpu", "verdict": "admitted", "state": "correct", "reasons": [],
        "detail": "admitted by another worker", "measurement": "00000000-0000-0000-0000-000000000000",
        "candidate_source_hash": source_hash(kernel.source), "candidate_source": kernel.source,
        "candidate_launch": kernel.launch, "candidate_median": median, "speedup": 1.5, "speedup_ci": [1.2, 1.8]}))


@pytest.fixture
def competitor(monkeypatch):
    """Makes the first measurement end with another writer's event (`meanwhile()`; by default
    `kernel` admitted by another worker); records the prior best each measurement was given."""
    real = services.measure
    given: list[str | None] = []

    def arm(kernel: Kernel | None = None, median: float = 0.0, meanwhile=None) -> list[str | None]:
        def measure(case_id, backend, candidate=None, prior_best=None, *args, **kwargs):
            report = real(case_id, backend, candidate, prior_best, *args, **kwargs)
            given.append(source_hash(prior_best.source) if prior_best else None)
            if len(given) == 1:
                meanwhile() if meanwhile else admitted_elsewhere(kernel, median)
            return report

        monkeypatch.setattr(services, "measure", measure)
        return given

    return arm


def test_a_slower_candidate_is_decided_again_against_the_kernel_admitted_during_its_measurement(
        ledger, speed_rule_lifted, competitor):
    given = competitor(FAST, 1e-4)
    outcome = gate_candidate(CASE, "cpu", SLOW, "agent:test", protocol=QUICK)
    assert given == [None, source_hash(FAST.source)]  # measured again, with the new prior best
    assert outcome.verdict == "rejected" and outcome.reasons == ["regresses_prior_best"], outcome.detail
    data = outcome.verdict_event.data
    assert data["prior_best"]["source_hash"] == source_hash(FAST.source) and data["prior_best"]["median"] > 0
    assert outcome.detail.startswith("decided again: the result changed while this candidate was measured")
    row = OperatorResult.objects.get(result=KEY)
    assert row.source == FAST.source and row.revisions == 0  # the faster kernel stands
    assert [e.type for e in stream_events(KEY)] == ["GateVerdict", "CandidateMeasured", "GateVerdict"]  # nothing stale
    assert verify_ledger().ok


def test_a_faster_candidate_is_admitted_over_the_slower_kernel_admitted_during_its_measurement(
        ledger, speed_rule_lifted, competitor):
    given = competitor(SLOW, 1e-2)
    outcome = gate_candidate(CASE, "cpu", FAST, "agent:test", protocol=QUICK)
    assert given == [None, source_hash(SLOW.source)]
    assert outcome.verdict == "admitted", outcome.detail
    prior = outcome.verdict_event.data["prior_best"]
    assert prior["source_hash"] == source_hash(SLOW.source)
    assert prior["median"] > outcome.verdict_event.data["candidate_median"]
    row = OperatorResult.objects.get(result=KEY)
    assert (row.source, row.revisions) == (FAST.source, 1)
    assert verify_ledger().ok


def test_a_candidate_failing_on_its_own_is_rejected_from_the_same_measurement(ledger, competitor):
    given = competitor(FAST, 1e-4)
    outcome = gate_candidate(CASE, "cpu", Kernel((CHEATS / "constant_output.c").read_text(), {"threads": 1}),
                             "agent:test", protocol=QUICK)
    assert given == [None]  # no second measurement: no prior best's timing changes a failed check
    assert outcome.verdict == "rejected" and outcome.reasons == ["constant_output"]
    assert outcome.verdict_event.data["prior_best"] == {"source_hash": source_hash(FAST.source), "median": None,
                                                         "correct": None}
    assert OperatorResult.objects.get(result=KEY).source == FAST.source
    assert verify_ledger().ok


def test_a_rerun_measures_the_kernel_admitted_during_its_measurement_and_revises_that_one(ledger, competitor):
    admitted_elsewhere(SLOW, 1e-2)
    given = competitor(FAST, 1e-4)
    outcome, _ = rerun_gate(CASE, "cpu", "user:reviewer", QUICK)
    assert given == [None, None]  # a re-run times the standing kernel alone, twice here
    assert outcome.report.variants["candidate"].variant.kernel == FAST
    standing = OperatorResult.objects.get(result=KEY)
    assert outcome.verdict_event.data["revises"] == str(standing.verdict_event)  # FAST's admission, not SLOW's
    assert verify_ledger().ok


def test_a_rerun_of_a_result_retracted_during_its_measurement_records_nothing(ledger, competitor):
    admitted_elsewhere(FAST, 1e-4)
    competitor(meanwhile=lambda: retract(KEY, "withdrawn by its author", "user:reviewer"))
    with pytest.raises(MeasurementError, match="no admitted kernel to re-run .status: retracted"):
        rerun_gate(CASE, "cpu", "user:reviewer", QUICK)
    assert [e.type for e in stream_events(KEY)] == ["GateVerdict", "ResultRetracted"]
    assert verify_ledger().ok
