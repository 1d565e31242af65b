"""Projections of forge events. Everything here can be rebuilt from the ledger alone."""
from __future__ import annotations

from ledger.projection_base import Projection, RowStore
from ledger.records import RecordedEvent

from . import rulebook
from .models import CaseCampaign, IdeaEntry, MapCell, PerfEntry, RoundRow

ROUND_END = {"RoundCommitted": "committed", "RoundReverted": "reverted"}


def campaign_key(campaign: str, case: str) -> str:
    return f"{campaign}|{case}"


class Rounds(Projection):
    name = "forge_rounds"
    model = RoundRow
    handles = frozenset({"RoundStarted", "CandidateProposed", "RoundCommitted", "RoundReverted", "RoundAbandoned"})

    def key(self, event: RecordedEvent) -> str:
        return event.data["round"]

    def apply(self, event: RecordedEvent, rows: RowStore) -> None:
        data = event.data
        if event.type == "RoundStarted":
            rows.put(data["round"], {
                "round": data["round"], "campaign": data["campaign"], "case": data["case"], "backend": data["backend"],
                "number": data["number"], "status": "started", "state": "", "subject": "", "detail": "", "lever_tags": [],
                "source_hash": "", "verdict_event": "", "speedup": None, "improvement": None, "position": event.position,
            })
            return
        row = rows.get(data["round"])
        if row is None:
            return
        if event.type == "CandidateProposed":
            row.update(status="proposed", subject=data["subject"], lever_tags=data["lever_tags"], source_hash=data["source_hash"])
        elif event.type == "RoundAbandoned":
            row.update(status="abandoned", state="", detail=data["reason"])
        else:
            row.update(status=ROUND_END[event.type], state=data["state"], detail=data["detail"], verdict_event=data["verdict_event"] or "",
                       speedup=data["speedup"], improvement=data["improvement"])
        rows.put(data["round"], row)


class PerfLog(Projection):
    name = "forge_perf_log"
    model = PerfEntry
    handles = frozenset({"PerfLogged"})

    def key(self, event: RecordedEvent) -> str:
        return event.data["round"]

    def apply(self, event: RecordedEvent, rows: RowStore) -> None:
        data = event.data
        rows.put(data["round"], {
            "round": data["round"], "case": data["case"], "change": data["change"], "state": data["state"],
            "measurement": data["measurement"], "speedup": data["speedup"], "fraction_of_copy": data["fraction_of_copy"],
            "position": event.position,
        })


class IdeaLog(Projection):
    name = "forge_idea_log"
    model = IdeaEntry
    handles = frozenset({"IdeaLogged"})

    def key(self, event: RecordedEvent) -> str:
        return event.data["round"]

    def apply(self, event: RecordedEvent, rows: RowStore) -> None:
        data = event.data
        rows.put(data["round"], {"round": data["round"], "case": data["case"], "idea": data["idea"], "position": event.position})


class CaseCampaigns(Projection):
    name = "forge_case_campaigns"
    model = CaseCampaign
    handles = frozenset({"CampaignStarted", "CasePlanned", "RoundStarted", "CandidateProposed", "RoundCommitted",
                         "RoundReverted", "RoundAbandoned", "RuleTriggered", "CaseConverged",
                         "BranchOpened", "BranchMerged", "BranchDropped"})

    def apply(self, event: RecordedEvent, rows: RowStore) -> None:
        data = event.data
        if event.type == "CampaignStarted":
            for case in data["cases"]:
                rows.put(campaign_key(data["campaign"], case), {
                    "key": campaign_key(data["campaign"], case), "campaign": data["campaign"], "case": case,
                    "backend": data["backend"], "budget": data["rounds_per_case"], "rounds": 0, "streak": 0,
                    "must_leave_history": False, "improvements": [], "borrowed_from": "", "borrowed_diagnosis": "",
                    "pending": None, "best": None, "branch": None, "converged": "",
                })
            return
        campaign = data.get("campaign") or self._campaign_of_round(event)
        if campaign is None:
            return
        key = campaign_key(campaign, data["case"]) if "case" in data else None
        row = rows.get(key) if key else None
        if row is None:
            return
        if event.type == "CasePlanned":
            row.update(borrowed_from=data["borrowed_from"] or "", borrowed_diagnosis=data["borrowed_diagnosis"] or "")
        elif event.type == "RoundStarted":
            row["pending"] = {"round": data["round"]}
        elif event.type == "CandidateProposed":
            if row["pending"] and row["pending"]["round"] == data["round"]:
                row["pending"].update(source=data["source"], launch=data["launch"], plan=data["plan"],
                                      hash=data["source_hash"], tags=data["lever_tags"], subject=data["subject"])
        elif event.type in ("RoundCommitted", "RoundReverted"):
            self._end_round(event, row)
        elif event.type == "BranchOpened":
            row["branch"] = {"id": data["branch"], "base_hash": data["base_hash"], "opened_round": data["round"],
                             "stale": 0, "head": None}
        elif event.type == "BranchMerged":
            head = (row["branch"] or {}).get("head")
            if head and (row["best"] or {}).get("hash") != data["head_hash"]:  # merged by a resolution measurement
                row.update(best={**head, "speedup": data["speedup"], "verdict": data["verdict_event"]}, streak=0)
            row["branch"] = None
        elif event.type == "BranchDropped":
            row["branch"] = None
        elif event.type == "RoundAbandoned":
            row["pending"] = None
        elif event.type == "RuleTriggered" and data["rule"] == "outside_history":
            row.update(must_leave_history=True, streak=0)
        elif event.type == "CaseConverged":
            row["converged"] = data["reason"]
        rows.put(key, row)

    @staticmethod
    def _end_round(event: RecordedEvent, row: dict) -> None:
        data = event.data
        committed = event.type == "RoundCommitted"
        to_branch = committed and data.get("line", "main") != "main"
        improvement = data["improvement"] if data["improvement"] is not None else 0.0
        improving = rulebook.round_improves(committed, to_branch, improvement)
        candidate = row["pending"] if row["pending"] and "source" in row["pending"] else None
        if candidate and committed:
            entry = {**candidate, "speedup": data["speedup"], "verdict": data["verdict_event"]}
            if to_branch:
                row["branch"] = {**row["branch"], "head": entry, "stale": 0}
            else:
                row["best"] = entry
        elif row["branch"]:
            row["branch"] = {**row["branch"], "stale": row["branch"]["stale"] + 1}
        row.update(rounds=row["rounds"] + 1, streak=0 if improving else row["streak"] + 1, pending=None,
                   improvements=row["improvements"] + [improvement if improving and not to_branch else 0.0])
        if row["must_leave_history"]:
            row["must_leave_history"] = False

    @staticmethod
    def _campaign_of_round(event: RecordedEvent) -> str | None:
        # Round events carry the round id; its campaign is in the stream name round/<campaign>/<round>.
        parts = event.stream.split("/")
        return parts[1] if len(parts) == 3 and parts[0] == "round" else None


class OperatorMap(Projection):
    name = "forge_operator_map"
    model = MapCell
    handles = frozenset({"CellSealed"})

    def key(self, event: RecordedEvent) -> str:
        return f"{event.data['backend']}|{event.data['case']}"

    def apply(self, event: RecordedEvent, rows: RowStore) -> None:
        data = event.data
        key = self.key(event)
        rows.put(key, {
            "key": key, "case": data["case"], "backend": data["backend"], "diagnosis": data["diagnosis"],
            "winning_lever": data["winning_lever"] or "", "source": data["source"], "launch": data["launch"],
            "source_hash": data["source_hash"], "speedup": data["speedup"], "fraction_of_copy": data["fraction_of_copy"],
            "verdict_event": data["verdict_event"] or "", "position": event.position,
        })
