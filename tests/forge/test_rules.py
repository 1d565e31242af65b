"""The Kernel Agent's rules on synthetic values, each threshold at its edge (forge.rulebook): the
improvement of an admitted round, the non-improving streak and the outside-history rule, where a
candidate goes (main line, branch head, reverted), when a branch is due and when a case
converges. The loop runs them on real measurements in test_rounds.py; benchmarks/mutation_score.py
checks that these tests fail when a rule is broken."""
from __future__ import annotations

import pytest

from forge import rulebook
from forge.rulebook import (
    RULEBOOK,
    as_text,
    branch_due,
    convergence,
    improvement,
    line_of,
    outside_history_due,
    round_improves,
    rule,
)


def test_the_rules_thresholds_are_those_their_text_states():
    assert RULEBOOK["version"] == 2  # campaigns record it: a rule changed here changes the version and this test
    assert rule("outside_history")["threshold"] == 3 and "After 3 consecutive" in rule("outside_history")["text"]
    assert (rule("branch")["patience"], rule("branch")["min_gain"]) == (5, 0.02)
    assert "more than 2% faster" in rule("branch")["text"] and "after 5 rounds" in rule("branch")["text"]
    assert (rule("convergence")["window"], rule("convergence")["min_improvement"]) == (3, 0.05)
    assert "last 3 rounds improved it by less than 5%" in rule("convergence")["text"]


def test_the_rulebook_is_shown_numbered_in_order():
    lines = as_text().splitlines()
    assert len(lines) == len(RULEBOOK["rules"]) == 5
    assert lines[0] == "1. Propose exactly one change per round." and lines[4].startswith("5. Consult the operator map")
    assert rule("".join(["bra", "nch"]))["patience"] == 5  # an id read from an event: compared by value


def test_an_admitted_rounds_improvement_is_relative_to_the_best_or_to_1x():
    assert improvement(1.5, 1.2) == pytest.approx(0.25)
    assert improvement(1.5, None) == pytest.approx(0.5)
    assert improvement(0.9, 1.0) == pytest.approx(-0.1)
    assert improvement(2.5, None) == pytest.approx(1.5)


@pytest.mark.parametrize("committed, to_branch, gain, improves", [
    (True, False, 0.001, True), (True, False, 0.0, False), (True, False, -0.1, False),
    (True, True, 0.0, True),  # a new branch head is progress
    (False, False, 0.3, False), (False, True, 0.3, False),
])
def test_only_a_committed_round_that_gains_resets_the_streak(committed, to_branch, gain, improves):
    assert round_improves(committed, to_branch, gain) == improves


@pytest.mark.parametrize("streak, due", [(2, False), (3, True), (4, True)])
def test_the_next_proposal_leaves_the_history_after_3_non_improving_rounds(streak, due):
    assert outside_history_due(streak) == due


def test_an_admitted_candidate_goes_to_the_main_line_branch_or_not():
    assert line_of("admitted", "correct", 1.1, None, None) == "main"
    assert line_of("admitted", "correct", 1.1, "branch-1", 9.0) == "main"
    # a verdict and a state read back from events are new string objects: compared by value
    assert line_of("".join(["admit", "ted"]), "correct", 1.1, None, None) == "main"
    assert line_of("rejected", "".join(["cor", "rect"]), 1.5, "branch-1", 1.0) == "branch-1"


@pytest.mark.parametrize("speedup, head, line", [
    (1.0201, 1.0, "branch-1"), (1.0199, 1.0, None), (1.02, 1.0, None),  # more than 2% faster than the head
    (0.5, None, "branch-1"),  # the branch's first correct kernel is its head, however slow
    (None, None, None),  # not timed
])
def test_a_rejected_correct_candidate_becomes_the_branch_head_only_when_faster_by_more_than_2_percent(
        speedup, head, line):
    assert line_of("rejected", "correct", speedup, "branch-1", head) == line


def test_a_rejected_candidate_off_a_branch_or_incorrect_is_reverted():
    assert line_of("rejected", "correct", 3.0, None, None) is None
    assert line_of("rejected", "mismatch", 3.0, "branch-1", None) is None
    assert line_of("rejected", "compilation_failure", 3.0, "branch-1", None) is None


@pytest.mark.parametrize("stale, rounds, budget, due", [
    (4, 3, 10, False), (5, 3, 10, True), (6, 3, 10, True), (0, 9, 10, False), (0, 10, 10, True), (0, 11, 10, True),
])
def test_a_branch_is_due_after_5_rounds_without_progress_or_when_the_budget_is_spent(stale, rounds, budget, due):
    assert branch_due(stale, rounds, budget) == due


@pytest.mark.parametrize("rounds, improvements, has_best, reason", [
    (10, [0.5, 0.5, 0.5], True, "budget_spent"),
    (12, [], False, "budget_spent"),
    (4, [0.3, 0.02, 0.02, 0.0], True, "improvement_below_threshold"),  # the last 3 sum to 0.04
    (4, [0.0, 0.02, 0.02, 0.0099], True, "improvement_below_threshold"),  # 0.0499
    (4, [0.0, 0.02, 0.02, 0.0101], True, None),  # 0.0501
    (4, [0.0, 0.0, 0.0, 0.05], True, None),  # exactly 5%: not less
    (2, [0.0, 0.0], True, None),  # fewer rounds than the window
    (3, [0.0, 0.0, 0.0], True, "improvement_below_threshold"),
    (3, [0.0, 0.0, 0.0], False, None),  # nothing admitted yet: no convergence by improvement
])
def test_a_case_converges_when_its_budget_is_spent_or_its_last_3_rounds_gained_less_than_5_percent(
        rounds, improvements, has_best, reason):
    assert convergence(rounds, 10, improvements, has_best) == reason


def test_the_rules_read_the_rulebook_not_copies_of_its_numbers(monkeypatch):
    """A rule changed in the rulebook (a new version) changes the decision: no number is copied."""
    rules = [dict(r) for r in RULEBOOK["rules"]]
    monkeypatch.setitem(RULEBOOK, "rules", rules)
    rule("outside_history")["threshold"] = 5
    rule("branch").update(patience=2, min_gain=0.5)
    rule("convergence").update(window=2, min_improvement=0.5)
    assert not outside_history_due(4) and rulebook.outside_history_due(5)
    assert line_of("rejected", "correct", 1.4, "b", 1.0) is None and branch_due(2, 0, 10)
    assert convergence(4, 10, [0.0, 0.0, 0.3, 0.3], True) is None
    assert convergence(4, 10, [0.0, 0.3, 0.2, 0.2], True) == "improvement_below_threshold"
