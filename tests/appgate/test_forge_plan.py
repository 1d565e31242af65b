"""A forge call plans each program from its last M1 that timed its runs
(appgate.agent.planned_gate_seconds, read by scripts/h200_forge_apps.sh): a program whose gate
needs more than the call has left waits for the next call instead of being started and cut, as
attention-cuda was at 207 s in session 21's third call (docs/gpu.md). Read from the shipped export,
whose M1 milestones the H200 recorded."""
from __future__ import annotations

import pytest

from appgate.agent import planned_gate_seconds
from appgate.services import AppProtocol
from ledger.transfer import import_ledger
from tests.appgate.fixtures import SHIPPED_FORGED


@pytest.fixture
def shipped(ledger):
    import_ledger(SHIPPED_FORGED, "user:test")


def test_the_plan_is_the_gates_runs_by_the_last_m1_that_timed_them(shipped):
    protocol = AppProtocol()
    runs = 2 * (1 + protocol.warmup + protocol.passes)  # both variants: a correctness run, warm-ups, passes
    # attention's three M1s (calls 12, 13 and 19) timed make-run at 7.895, 7.913 and 9.813 s, test at 1.959,
    # 1.99 and 2.679 s a run: the plan is the last one's
    assert planned_gate_seconds("hecbench-attention-cuda")[0] == pytest.approx((9.813 + 2.679) * runs)
    assert planned_gate_seconds("hecbench-concat-cuda")[0] == pytest.approx(21.607 * runs)  # over any call's budget
    assert planned_gate_seconds("hecbench-mask-cuda", AppProtocol(passes=3))[0] == \
        pytest.approx(9.726 * 2 * (1 + AppProtocol().warmup + 3))  # its M1 of call 18 (8.506 s in call 13)


def test_the_plan_holds_a_second_attempt_of_the_longest_dataset(shipped):
    """A noisy dataset is timed again (warm-ups and passes, not the correctness run): the longest
    one's second attempt is what a call has to hold beside the runs for the gate to make it."""
    protocol = AppProtocol()
    again = 2 * (protocol.warmup + protocol.passes)
    # hmm's last M1 (session 24's call 22) timed test at 10.555 s a run: its noisy first attempt then
    # left no time for the second (AppDatasetMeasured "attempt 2 not started: about 156 s")
    assert planned_gate_seconds("hecbench-hmm-cuda") == pytest.approx((10.555 * 2 * (1 + protocol.warmup + protocol.passes),
                                                                      10.555 * again))
    assert planned_gate_seconds("hecbench-attention-cuda")[1] == pytest.approx(9.813 * again)  # make-run, not test


def test_a_program_only_the_triage_measured_has_no_plan(shipped):
    # the triage's M1 (four programs at once, no wall time a run) says nothing about a gate's runs
    assert planned_gate_seconds("hecbench-crossentropy-cuda") is None
    assert planned_gate_seconds("hecbench-no-such-program") is None
