"""Reads of forge projections (and the few ledger lookups the loop needs)."""
from __future__ import annotations

import math

from ledger.models import Event
from ledger.records import RecordedEvent
from measurement.backends.base import Kernel
from measurement.harness import codegen
from measurement.harness.cases import parse_case

from .models import CaseCampaign, IdeaEntry, MapCell, PerfEntry, RoundRow

LOG_WINDOW = 12


def map_cell(case: str, backend: str) -> MapCell | None:
    return MapCell.objects.filter(key=f"{backend}|{case}").first()


def nearest_cell(case_id: str, backend: str) -> MapCell | None:
    """The sealed cell most like this case (same type first, then precision, then size), itself excluded."""
    case = parse_case(case_id)

    def distance(cell: MapCell) -> float:
        other = parse_case(cell.case)
        return (
            (0 if other.type == case.type else 10)
            + (0 if other.stencil.family == case.stencil.family else 5)
            + (0 if other.precision == case.precision else 3)
            + abs(math.log2(other.points / case.points))
        )

    cells = [c for c in MapCell.objects.filter(backend=backend) if c.case != case.id]
    return min(cells, key=distance) if cells else None


def straightforward_kernel(case_id: str, backend: str) -> Kernel:
    case = parse_case(case_id)
    if backend == "cpu":
        return Kernel(codegen.straightforward_c(case), {})
    return Kernel(codegen.straightforward_cuda(case), codegen.straightforward_cuda_launch(case))


def perf_log(case: str) -> list[str]:
    entries = PerfEntry.objects.filter(case=case).order_by("-position")[:LOG_WINDOW]
    return [f"{e.change} -> {e.measurement}" for e in reversed(entries)]


def idea_log(case: str) -> list[str]:
    entries = IdeaEntry.objects.filter(case=case).order_by("-position")[:LOG_WINDOW]
    return [e.idea for e in reversed(entries)]


def recent_subjects(campaign: str, case: str, count: int = 5) -> list[str]:
    rounds = RoundRow.objects.filter(campaign=campaign, case=case).exclude(subject="").order_by("-position")[:count]
    return [r.subject for r in rounds]


def tried_tags(campaign: str, case: str) -> set[str]:
    tags: set[str] = set()
    for row in RoundRow.objects.filter(campaign=campaign, case=case):
        tags.update(row.lever_tags)
    return tags


def proposed_source_hashes(case: str) -> set[str]:
    """Sources any round of any campaign in this ledger proposed for the case: what a re-submission
    would only measure again."""
    return set(RoundRow.objects.filter(case=case).exclude(source_hash="").values_list("source_hash", flat=True))


def verdict_fraction(verdict_event: str | None) -> float | None:
    if not verdict_event:
        return None
    row = Event.objects.filter(event_id=verdict_event).first()
    return RecordedEvent.from_body(row.body, row.prev_hash, row.hash).data.get("fraction_of_copy") if row else None


def profile(state: CaseCampaign) -> dict:
    """What the proposer may know of the current kernel. Before anything is admitted, the
    bandwidth fraction is the latest measured round's of this case, so the first diagnoses are
    not blind."""
    best = state.best or {}
    fraction = verdict_fraction(best.get("verdict"))
    if fraction is None:
        latest = PerfEntry.objects.filter(case=state.case, fraction_of_copy__isnull=False).order_by("-position").first()
        fraction = latest.fraction_of_copy if latest else None
    return {
        "best_speedup_over_bound": best.get("speedup"),
        "fraction_of_copy_bandwidth": fraction,
        "rounds_so_far": state.rounds,
        "non_improving_streak": state.streak,
    }


def campaign_table(campaign: str) -> list[CaseCampaign]:
    return list(CaseCampaign.objects.filter(campaign=campaign).order_by("case"))
