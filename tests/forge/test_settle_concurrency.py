"""Two processes settling one case at once (a worker ending its round, `forge resume`): branch and
convergence events are appended at the campaign stream's version read before the case's state, so
the second one reads again and finds nothing left to do (issue 21). The interleaving is made, not
raced: the other process settles the case between this one's read and its append."""

import pytest

from forge import services
from forge.models import CaseCampaign
from forge.proposers.base import Proposal, RoundContext
from forge.services import execute_round, start_campaign, start_round
from ledger import decide
from ledger.models import Event
from ledger.verification import verify_ledger
from measurement.harness.plan import ProtocolSettings

BROKEN = "void stencil( { this does not compile"  # a compilation failure: no timing, a cheap round
QUICK = ProtocolSettings(passes=2, launches=2, warmup=1, max_attempts=1)
CASE = "star_1/64x64x64/f32"


class Broken:
    """Proposes a kernel that does not compile; the first proposal is a disruptive rewrite (a branch)."""

    name = "broken"

    def __init__(self) -> None:
        self.rounds = 0

    def propose(self, context: RoundContext) -> Proposal:
        self.rounds += 1
        return Proposal(source=BROKEN, launch={"threads": 1}, hypothesis="idea", lever_tags=(), subject="change",
                        usage={}, disruptive=self.rounds == 1)


@pytest.fixture
def other_process_first(monkeypatch):
    """Before this process appends an event of `event_type`, another process settles the case."""
    real = decide.append_many
    raced: list[str] = []

    def arm(campaign: str, event_type: str) -> list[str]:
        def append_many(events):
            if events[0].type == event_type and not raced:
                raced.append(event_type)
                services.settle(campaign, CASE, "agent:other-process")
            return real(events)

        monkeypatch.setattr(decide, "append_many", append_many)
        return raced

    return arm


def run(campaign: str) -> None:
    proposer = Broken()
    while (round_id := start_round(campaign, CASE, proposer.name, "agent:test")) is not None:
        execute_round(round_id, proposer, "agent:test", QUICK)


def actors(campaign: str, event_type: str) -> list[str]:
    return list(Event.objects.filter(stream=f"campaign/{campaign}", type=event_type).values_list("actor", flat=True))


@pytest.mark.parametrize("budget, raced_on", [
    (1, "CaseConverged"),  # the budget spent after the first round: its branch is dropped, the case converges
    (6, "BranchDropped"),  # a branch without progress for five rounds is dropped, then the case converges
])
def test_a_case_settled_by_two_processes_at_once_is_settled_once(ledger, other_process_first, budget, raced_on):
    campaign = start_campaign([CASE], "cpu", "broken", budget, "user:test")
    raced = other_process_first(campaign, raced_on)
    run(campaign)
    assert raced == [raced_on]
    assert actors(campaign, raced_on) == ["agent:other-process"]  # this process read it done and wrote nothing
    assert actors(campaign, "BranchOpened") == ["agent:test"]
    assert len(actors(campaign, "BranchDropped")) == 1
    assert len(actors(campaign, "CaseConverged")) == 1
    assert CaseCampaign.objects.get(campaign=campaign).converged == "budget_spent"
    assert verify_ledger().ok
