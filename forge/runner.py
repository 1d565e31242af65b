"""Driving a campaign: one round task at a time per case, on the queue of the campaign's backend,
until every case converges; and resuming one whose worker died.

Without a broker (the embedded default) each round runs in this process. With one, the round
runs on a worker and the driver waits for the round's end in the ledger, never on the task's
result alone: a worker killed mid-round never answers. So the wait ends when the round ends, when
the reaper (run here too, every REAPER_INTERVAL_S) abandons it because its worker died, or when
no worker took it within FORGE_ROUND_CLAIM_TIMEOUT_S; the last two stop the run with a message
naming `manage.py forge resume CAMPAIGN`, which abandons what is left open and carries on.
"""
from __future__ import annotations

import time
from dataclasses import asdict
from typing import Any, Callable

from django.conf import settings

from ledger import leases
from ledger.selectors import stream_events

from .models import CaseCampaign, RoundRow
from .services import ForgeError, abandon_round, abandon_stale_rounds, round_outcome, round_stream, settle, start_round


def resume_campaign(campaign: str, actor: str) -> tuple[str, int]:
    """Close what a dead worker left open (rounds abandoned, a due branch resolved, convergence
    decided); returns the campaign's proposer and how many rounds were abandoned."""
    started = [e for e in stream_events(f"campaign/{campaign}") if e.type == "CampaignStarted"]
    if not started:
        raise ForgeError(f"no campaign {campaign} in this ledger")
    abandoned = abandon_stale_rounds(campaign, actor)
    for case in started[0].data["cases"]:
        settle(campaign, case, actor)
    return started[0].data["proposer"], abandoned


def run_campaign(campaign: str, proposer_name: str, actor: str,
                 progress: Callable[[str, Any], None] | None = None) -> list[CaseCampaign]:
    """Run every case of the campaign round by round until it converges. Resumable: rounds left
    open by a dead worker are abandoned first."""
    from .tasks import forge_round

    resume_campaign(campaign, actor)
    say = progress or (lambda case, outcome: None)
    for state in CaseCampaign.objects.filter(campaign=campaign).order_by("case"):
        queue = "gpu" if state.backend == "cuda" else "cpu"
        while True:
            round_id = start_round(campaign, state.case, proposer_name, actor)
            if round_id is None:
                break
            result = forge_round.apply_async(args=[round_id, proposer_name, actor], queue=queue)
            say(state.case, _await_round(round_id, result, queue, campaign, actor))
    return list(CaseCampaign.objects.filter(campaign=campaign).order_by("case"))


def _await_round(round_id: str, result, queue: str, campaign: str, actor: str) -> dict[str, Any]:
    """The ended round's outcome; ForgeError when it was abandoned, failed, or never taken."""
    row = RoundRow.objects.get(round=round_id)
    stream = round_stream(campaign, round_id)
    resume = f"`manage.py forge resume {campaign}` continues the campaign"
    claim_by = time.monotonic() + settings.FORGE_ROUND_CLAIM_TIMEOUT_S
    next_reap = time.monotonic() + settings.REAPER_INTERVAL_S
    claimed = False
    while True:
        row.refresh_from_db()
        if row.status in ("committed", "reverted"):
            return asdict(round_outcome(row))
        if row.status == "abandoned":
            raise ForgeError(f"round {row.number} of {row.case} was abandoned: {row.detail}; {resume}")
        if result.failed():
            raise ForgeError(f"round {row.number} of {row.case} failed on its worker: {result.result}; {resume}")
        claimed = claimed or row.status != "started" or leases.is_held(stream) is not None
        if not claimed and time.monotonic() > claim_by:
            unclaimed = f"no worker on queue {queue} took it within {settings.FORGE_ROUND_CLAIM_TIMEOUT_S:g} s"
            if abandon_round(round_id, unclaimed, None, actor=actor):  # a worker that takes it later finds it closed
                raise ForgeError(f"round {row.number} of {row.case}: {unclaimed}: start one "
                                 f"(`celery -A config worker -Q {queue}`); then {resume}")
            continue  # a worker took it just now
        if time.monotonic() >= next_reap:  # beat may not run here: do not wait on it for a dead worker
            leases.reap(keys=[stream])
            next_reap = time.monotonic() + settings.REAPER_INTERVAL_S
        time.sleep(0.5)
