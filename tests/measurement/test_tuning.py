"""Tuning runs of the Halide baseline (measurement.tuning) and the bound they set, end to end on
the CPU backend with real children, measurements and events."""
from io import StringIO
from pathlib import Path

import numpy as np
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from ledger.models import Event
from ledger.selectors import stream_events
from measurement import tuning
from measurement.backends import cpu
from measurement.backends.base import Kernel, Variant, scheduled
from measurement.events import tuning_stream
from measurement.harness.cases import parse_case
from measurement.harness.codegen import straightforward_c
from measurement.harness.isolation import run_isolated
from measurement.harness.plan import ProtocolSettings
from measurement.harness.protocol import TimingSpec, time_variants
from measurement.selectors import tuned
from measurement.services import MeasurementError, gate_candidate
from measurement.tuning import tune_baseline

# No cache flush: flushing this machine's last-level cache takes 0.27 s, most of a quick timing
# run's time, and what is tested here (which schedule is chosen, which bound the gate then holds
# a slow candidate to) does not depend on it.
QUICK = ProtocolSettings(passes=2, launches=2, warmup=1, max_attempts=1, flush=False)
# box_2 in f32: the straightforward kernel is scalar (125 loads a point and no restrict: gcc does
# not vectorise its x loop), Halide's schedules are vectorised and parallel. The slow candidate is
# vectorised, but on one thread and computing every point eight times: well behind Halide whatever
# else the machine runs (at twice it was once admitted over Halide on a loaded machine).
CASE = "box_2/48x48x48/f32"
SLOW = (Path(__file__).parent / "cheats" / "slow_box2.c").read_text()
FAMILY = ["vec_par_z", "vec_par_rows", "tiled", "vec_unroll_y2"]


@pytest.mark.one_database
def test_tuning_records_every_schedule_and_the_gate_then_holds_candidates_to_it(ledger, monkeypatch):
    children = []

    def counted(function, args, timeout):
        children.append(function)
        return run_isolated(function, args, timeout)

    monkeypatch.setattr(tuning, "run_isolated", counted)
    event = tune_baseline(CASE, "cpu", actor="user:test", protocol=QUICK)
    assert len(children) == 2  # one child checks every schedule, one times them all in the same passes
    data = event.data
    assert [c["name"] for c in data["candidates"]] == FAMILY and data["version"] == "21.0.0"
    assert all(c["correct"] and c["median"] > 0 and len(c["pass_medians"]) == QUICK.passes for c in data["candidates"])
    assert data["chosen"] == min(data["candidates"], key=lambda c: c["median"])["name"]
    assert data["chosen_text"].startswith("out.") or "hl.Var" in data["chosen_text"]
    assert [e.type for e in stream_events(tuning_stream("cpu", CASE))] == ["BaselineTuned"]
    assert tuned("cpu", CASE) == {"halide": data["chosen"]}

    # Halide is now part of the case's bound: a gate without it is refused, and records nothing.
    monkeypatch.setenv(cpu.BASELINES_ENV, "")
    before = Event.objects.count()
    with pytest.raises(MeasurementError, match=r"no verdict on box_2/48x48x48/f32 \(cpu\) without its library baselines "
                                               r"\(halide: not among the baselines offered here \(straightforward\)"):
        gate_candidate(CASE, "cpu", Kernel(SLOW, {"threads": 1}), "agent:test", protocol=QUICK)
    assert Event.objects.count() == before

    monkeypatch.setenv(cpu.BASELINES_ENV, "halide")  # the other libraries are not what this test is about
    outcome = gate_candidate(CASE, "cpu", Kernel(SLOW, {"threads": 1}), "agent:test", protocol=QUICK)
    identity = outcome.report.description["identities"]["halide"]
    assert identity["schedule"] == data["chosen"] and identity["tuned"] is True
    # Which of the candidate and the straightforward kernel is faster is left to the timings
    # (a loaded 2-core machine can swap them: once measured so here); what the gate must do is
    # hold the candidate to the fastest baseline, the tuned Halide schedule, and reject it.
    assert outcome.verdict == "rejected" and outcome.reasons == ["not_faster_than_public_bound"]
    assert outcome.verdict_event.data["bound"]["name"] == "halide"
    assert outcome.verdict_event.data["state"] == "correct"


def test_schedules_time_in_the_same_passes_and_one_that_cannot_run_is_left_out_with_its_error():
    """What a tuning run's timing child does: every schedule in every pass, rotated; a schedule
    that fails before the passes (here: one the family does not have) is left out, not fatal."""
    case = parse_case("star_1/16x16x16/f32")
    variants = [scheduled("halide", "vec_par_z"), Variant("straightforward", Kernel(straightforward_c(case))),
                scheduled("halide", "no_such_schedule")]
    spec = TimingSpec(passes=2, launches=1, warmup=0, flush=False, seed=3, sample_seed=4, sample_count=500)
    coefficients = tuple(float(c) for c in case.coefficients())
    timed = run_isolated(time_variants, ("cpu", case.id, variants, coefficients, spec, (), True), 120)
    assert timed.ok, timed.error
    run = timed.value
    assert list(run.left_out) == ["halide[no_such_schedule]"]
    assert "no_such_schedule" in run.left_out["halide[no_such_schedule]"]
    assert run.order == [["halide[vec_par_z]", "straightforward"], ["straightforward", "halide[vec_par_z]"]]
    assert np.all(np.isfinite(run.output_samples["halide[vec_par_z]"]))


@pytest.mark.one_database
def test_a_library_without_a_schedule_family_is_refused_and_nothing_is_recorded(ledger):
    errors = StringIO()
    with pytest.raises(CommandError, match="1 of 1 cases not tuned: star_1/16x16x16/f32"):
        call_command("tune_baselines", "--backend", "cpu", "--case", "star_1/16x16x16/f32", "--library", "devito",
                     stderr=errors)
    assert "the CPU backend has no schedule family for 'devito'" in errors.getvalue()
    assert stream_events(tuning_stream("cpu", "star_1/16x16x16/f32")) == []
