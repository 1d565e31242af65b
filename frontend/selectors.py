"""Page-specific reads of the audit UI that no other module owns: a case's forging history, the
ablation tables, the per-case figures of the operator table, the dashboard counts and the
events an event names by id.

The tables and provenance chains themselves come from frontend.tables and frontend.provenance
(one source of truth with the REST API); this module only adds what a page shows beside them.
"""
from __future__ import annotations

import uuid
from typing import Any, Iterable

from django.db.models import Count, Q

from appgate.models import AppRow
from forge.edges import edge_set_names
from forge.models import CaseCampaign, IdeaEntry, MapCell, PerfEntry, RoundRow
from ledger.models import Event
from ledger.records import RecordedEvent
from measurement.models import CaseRow, OperatorResult

from .models import RerunRow
from .recorded import stamp_times, time_of_record
from .tables import STANDING

BRANCH_EVENTS = ("BranchOpened", "BranchMerged", "BranchDropped")


def record(event: Event) -> RecordedEvent:
    return RecordedEvent.from_body(event.body, event.prev_hash, event.hash)


def recorded(event_ids: Iterable[str]) -> dict[str, RecordedEvent]:
    """Events by id (as strings), in one query; unknown or blank ids are left out."""
    ids = [i for i in {_uuid(str(i)) for i in event_ids if i} if i]
    return {str(e.event_id): record(e) for e in Event.objects.filter(event_id__in=ids)} if ids else {}


def positions(event_ids: Iterable[str]) -> dict[str, int]:
    """Ledger positions of events by id, in one query (links to the event pages)."""
    ids = [i for i in {_uuid(str(i)) for i in event_ids if i} if i]
    return {str(k): v for k, v in Event.objects.filter(event_id__in=ids).values_list("event_id", "position")} if ids else {}


def edge_shape_cases() -> set[str]:
    """Cases defined only by edge files (forge.edges): generalisation measurements of kernels
    admitted elsewhere, which the dashboard counts apart from the matrices' rows and figures."""
    edge_sets = edge_set_names()
    return {row["case"] for row in CaseRow.objects.values("case", "matrices")
            if row["matrices"] and set(row["matrices"]) <= edge_sets}


def dashboard_counts(event_types: dict[str, int], operator_rows: list[dict]) -> dict[str, Any]:
    """Row counts of small projections; campaigns and rounds (which grow with the ledger) from
    the event-type counts (one CampaignStarted per campaign, one RoundStarted per round), as
    `ledger.selectors.status()` read them. The operator table's rows are one per (backend, case),
    so they count both: a case of both matrices is two rows and one case."""
    by_backend: dict[str, set[str]] = {}
    for row in operator_rows:
        by_backend.setdefault(row["backend"], set()).add(row["case"])
    cases = {row["case"] for row in operator_rows}
    return {
        "operator_rows": len(operator_rows),
        "rows_by_backend": {backend: len(names) for backend, names in sorted(by_backend.items())},
        "cases": len(cases),
        "shared_cases": sum(1 for case in cases if sum(case in names for names in by_backend.values()) > 1),
        "operator_standing": sum(1 for row in operator_rows if row["status"] in STANDING),
        "operator_retracted": sum(1 for row in operator_rows if row["status"] == "retracted"),
        "applications": AppRow.objects.count(),
        "campaigns": event_types.get("CampaignStarted", 0),
        "rounds": event_types.get("RoundStarted", 0),
        "map_cells": MapCell.objects.count(),
    }


# ---- forging history -------------------------------------------------------------------


def forging_history(backend: str, case: str) -> dict[str, Any]:
    """Everything the Kernel Agent did on one (backend, case): its campaigns, rounds, logs, the
    rules that fired, its branches, the operator map cell and the diagnosis it borrowed."""
    campaigns = list(CaseCampaign.objects.filter(case=case, backend=backend).order_by("campaign"))
    rounds = list(RoundRow.objects.filter(case=case, backend=backend).order_by("position"))
    round_ids = [r.round for r in rounds]
    round_streams = [f"round/{r.campaign}/{r.round}" for r in rounds]
    campaign_streams = [f"campaign/{c.campaign}" for c in campaigns]
    verdicts = positions(r.verdict_event for r in rounds)
    rules = [record(e) for e in Event.objects.filter(type="RuleTriggered", stream__in=round_streams).order_by("position")]
    branches = [e for e in (record(row) for row in Event.objects.filter(
        type__in=BRANCH_EVENTS, stream__in=campaign_streams + round_streams).order_by("position")) if e.data["case"] == case]
    by_campaign: dict[str, list[RoundRow]] = {}
    for r in rounds:
        by_campaign.setdefault(r.campaign, []).append(r)
    return {
        "backend": backend,
        "case": case,
        "defined": CaseRow.objects.filter(case=case).exists(),
        "campaigns": campaigns,
        "rounds": [{"row": r, "verdict_position": verdicts.get(r.verdict_event)} for r in rounds],
        "trajectories": [{"label": campaign[:8], "rounds": [{"number": r.number, "speedup": r.speedup, "status": r.status}
                                                           for r in rows]}
                         for campaign, rows in by_campaign.items()],
        "perf_log": list(PerfEntry.objects.filter(round__in=round_ids).order_by("position")),
        "idea_log": list(IdeaEntry.objects.filter(round__in=round_ids).order_by("position")),
        "rules": rules,
        "branches": branches,
        "map_cell": MapCell.objects.filter(key=f"{backend}|{case}").first(),
        "borrowed": [c for c in campaigns if c.borrowed_from],
    }


# ---- campaigns -------------------------------------------------------------------------


def campaigns() -> list[dict[str, Any]]:
    """Every forging campaign (its CampaignStarted), newest first by time of record (imports keep
    their own order), with how far it got: rounds run and committed, cases planned and converged.
    Three queries whatever the number of campaigns."""
    started = sorted((record(e) for e in Event.objects.filter(type="CampaignStarted")), key=time_of_record, reverse=True)
    rounds = {row["campaign"]: row for row in RoundRow.objects.values("campaign").annotate(
        rounds=Count("round"), committed=Count("round", filter=Q(status="committed")))}
    cases = {row["campaign"]: row for row in CaseCampaign.objects.values("campaign").annotate(
        planned=Count("key"), converged=Count("key", filter=~Q(converged="")))}
    return [{**event.data, "position": event.position, **stamp_times(event),
             "rounds": rounds.get(event.data["campaign"], {}).get("rounds", 0),
             "committed": rounds.get(event.data["campaign"], {}).get("committed", 0),
             "planned": cases.get(event.data["campaign"], {}).get("planned", 0),
             "converged": cases.get(event.data["campaign"], {}).get("converged", 0)} for event in started]


def campaign(campaign_id: str) -> dict[str, Any] | None:
    """One campaign: its start and every case it planned, with its rounds, streak, best and
    convergence (None: no such campaign)."""
    started = Event.objects.filter(type="CampaignStarted", stream=f"campaign/{campaign_id}").order_by("position").first()
    if started is None:
        return None
    event = record(started)
    return {**event.data, "position": event.position, **stamp_times(event),
            "cases": list(CaseCampaign.objects.filter(campaign=campaign_id).order_by("case"))}


# ---- ablations -------------------------------------------------------------------------


def ablation_tables() -> dict[str, list[dict[str, Any]]]:
    """The AblationMeasured events as the two tables of design §8, one row per arm, arms of one
    run together (runs newest first)."""
    tables: dict[str, list[dict[str, Any]]] = {"protocol": [], "search": []}
    for event in Event.objects.filter(type="AblationMeasured").order_by("-position"):
        data = record(event).data
        tables[data["kind"]].append({**data, "position": event.position, "recorded_at": event.recorded_at})
    for rows in tables.values():
        run_order = {row["ablation"]: index for index, row in reversed(list(enumerate(rows)))}
        rows.sort(key=lambda row: (run_order[row["ablation"]], row["position"]))
    return tables


# ---- figures of the operator table -----------------------------------------------------


def operator_figures_data(results: list[str]) -> list[dict[str, Any]]:
    """Per admitted result (keys operator/<backend>/<case>): its speedup over each baseline of
    the measurement behind its current verdict, and the kernel's and the bound's fraction of
    measured copy bandwidth. Two queries whatever the number of results."""
    rows = list(OperatorResult.objects.filter(result__in=results).order_by("backend", "case"))
    verdicts = recorded(r.verdict_event for r in rows)
    measurements = recorded(v.data["measurement"] for v in verdicts.values())
    figures = []
    for row in rows:
        verdict = verdicts.get(row.verdict_event)
        measurement = measurements.get(verdict.data["measurement"]) if verdict else None
        if measurement is None:
            continue
        timed = {v["name"]: v for v in measurement.data["variants"] if v["timing"]}
        candidate = timed.get("candidate")
        if candidate is None:
            continue
        bound = (measurement.data.get("bound") or {}).get("name")
        figures.append({
            "label": f"{row.case} [{row.backend}]",
            "speedup": row.speedup,
            "against": {name: v["timing"]["median"] / candidate["timing"]["median"]
                        for name, v in timed.items() if v["role"] == "baseline"},
            "kernel": candidate["timing"]["fraction_of_copy"],
            "bound": timed[bound]["timing"]["fraction_of_copy"] if bound in timed else None,
            "quality": timed[bound]["timing"]["fraction_of_copy"] if bound in timed else None,
        })
    return figures



# ---- event page --------------------------------------------------------------------------

REFERENCE_FIELDS = ("measurement", "verdict_event", "rerun", "revises", "measurement_events", "measurements")


def event_references(event: RecordedEvent) -> list[dict[str, Any]]:
    """The events this event's payload names by id (a verdict's measurement, a revision's
    re-run, an ablation's evidence), with their positions: one click from a verdict to the
    event holding its raw samples."""
    data = event.payload
    named = []
    for field in REFERENCE_FIELDS:
        value = data.get(field)
        for event_id in (value if isinstance(value, list) else [value]):
            if isinstance(event_id, str) and event_id:
                named.append((field, event_id))
    ids = [u for u in (_uuid(i) for _, i in named) if u]
    found = {str(e.event_id): e for e in Event.objects.filter(event_id__in=ids).only("event_id", "position", "type")}
    return [{"field": field, "event_id": event_id, "position": found[event_id].position, "type": found[event_id].type}
            for field, event_id in named if event_id in found]


def _uuid(value: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(value)
    except ValueError:
        return None


def rerun_page(stream: str) -> str | None:
    """The page of the re-run whose stream (rerun/<id>: request, progress, end) `stream` is."""
    from django.urls import reverse

    rerun = stream.removeprefix("rerun/")
    if rerun != stream and RerunRow.objects.filter(rerun=rerun).exists():
        return reverse("rerun", args=[rerun])
    return None


def target_page(kind: str, backend: str, target: str) -> str:
    """The provenance page of a re-run's target: a case on its backend, or an application."""
    from django.urls import reverse

    return reverse("case_detail", args=[backend, target]) if kind == "case" else reverse("app_detail", args=[target])


def result_page(result: str | None) -> str | None:
    """The provenance page of a result key (operator/<backend>/<case>, app/<architecture>/<name>)."""
    from django.urls import reverse

    parts = (result or "").split("/", 2)
    if len(parts) == 3 and parts[0] == "operator" and OperatorResult.objects.filter(result=result).exists():
        return reverse("case_detail", args=[parts[1], parts[2]])
    if len(parts) == 3 and parts[0] == "app" and AppRow.objects.filter(name=parts[2]).exists():
        return reverse("app_detail", args=[parts[2]])
    return None
