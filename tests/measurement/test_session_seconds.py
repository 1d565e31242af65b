"""Where a measurement's baselines' child spends its time is recorded with the measurement
(description["baseline_seconds"]): the whole-matrix re-run must fit a device call, and its own
events are where the next cut is found (docs/gpu.md, session 25)."""
import pytest

from measurement.services import measure
from tests.forge.fixtures import CASE, QUICK


@pytest.mark.one_database  # a real measurement's own timing record; its SQL is ordinary reads
def test_each_baselines_preparation_and_checks_are_timed_within_the_session(db):
    report = measure(CASE, "cpu", protocol=QUICK)
    seconds = report.description["baseline_seconds"]
    baselines = [name for name in report.variants if report.variants[name].variant.role == "baseline"]
    assert set(seconds) == {*baselines, "session"}, seconds
    parts = [seconds[name]["prepare"] + seconds[name]["checks"] for name in baselines]
    assert all(value >= 0 for name in baselines for value in seconds[name].values())
    assert sum(parts) <= seconds["session"] + 0.001 * len(parts)  # each figure is rounded to the millisecond
    assert seconds["straightforward"]["checks"] > 0  # four checks ran
