"""Shared constants and helpers of the forge tests (the Kernel Agent's loop on the CPU backend): the
honest and broken kernels, a quick protocol, the case they run on, and a scripted proposer."""
from dataclasses import dataclass, field
from pathlib import Path

from forge.proposers.base import GenerationFailure, Proposal, RoundContext
from forge.services import execute_round, start_round
from measurement.harness.plan import ProtocolSettings

HONEST = (Path(__file__).parents[1] / "measurement" / "cheats" / "honest.c").read_text()
BROKEN = "void stencil( { this does not compile"
# Correct but always slower than the bound, whatever the load on the machine: the sweep 200 times.
SLOW = HONEST.replace("    #pragma omp parallel for", "    for (int rep = 0; rep < 200; ++rep)\n    #pragma omp parallel for", 1)
# Most of a CPU measurement is the cache flush before every launch (twice the last-level cache):
# two passes of two launches are enough for every assertion here (none is on a timing's precision).
QUICK = ProtocolSettings(passes=2, launches=2, warmup=1, max_attempts=1)
CASE = "star_1/64x64x64/f32"


@dataclass
class Scripted:
    """Proposes the given sources in order and remembers every context it was shown."""

    sources: list
    name: str = "scripted"
    seen: list = field(default_factory=list)

    def propose(self, context: RoundContext) -> Proposal:
        self.seen.append(context)
        source = self.sources[len(self.seen) - 1]
        if source is None:
            raise GenerationFailure("the model replied without a code block", usage={"output_tokens": 12}, kind="malformed")
        disruptive = isinstance(source, Rewrite)
        return Proposal(source=str(source), launch={"threads": 1}, hypothesis=f"idea {len(self.seen)}",
                        lever_tags=(f"tag{len(self.seen)}",), subject=f"change {len(self.seen)}", usage={},
                        disruptive=disruptive)


class Rewrite(str):
    """A source the scripted proposer marks as a disruptive rewrite (it opens a branch)."""


def run_rounds(campaign: str, case: str, proposer: Scripted) -> list:
    outcomes = []
    while (round_id := start_round(campaign, case, proposer.name, "agent:test")) is not None:
        outcomes.append(execute_round(round_id, proposer, "agent:test", QUICK))
    return outcomes
