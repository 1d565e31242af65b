"""Projections of application events (rebuildable from the ledger alone)."""
from __future__ import annotations

from ledger.projection_base import Projection, RowStore
from ledger.records import RecordedEvent

from .models import AppRow


def result_key(architecture: str, app: str) -> str:
    return f"app/{architecture}/{app}"


class Applications(Projection):
    name = "applications"
    model = AppRow
    handles = frozenset({"AppRegistered", "AppMilestoneReached", "AppStateChanged", "AppGateVerdict",
                         "ResultRetracted", "ResultDowngraded"})

    def key(self, event: RecordedEvent) -> str:
        data = event.data
        if "app" in data:
            return data["app"]
        parts = data["result"].split("/")
        return parts[2] if len(parts) == 3 and parts[0] == "app" else data["result"]

    def apply(self, event: RecordedEvent, rows: RowStore) -> None:
        data = event.data
        key = self.key(event)
        row = rows.get(key)
        if event.type == "AppRegistered":
            manifest = data["manifest"]
            rows.put(key, {
                **(row or {"state": "REGISTERED", "state_reason": "registered; the App Agent has not run on it",
                           "state_code": "",
                           "milestones": [], "result": "", "verdict": "", "status": "", "headline": None, "headline_ci": None, "datasets": {}, "real": False,
                           "amdahl_ceiling": None, "hotspot_fraction": None, "noisy": [], "checks": None,
                           "verdict_event": "", "revisions": 0}),
                "name": key, "architecture": data["architecture"], "domain": manifest["domain"],
                "manifest_path": data["manifest_path"], "manifest_hash": data["manifest_hash"],
                "registered_position": event.position, "position": event.position,
            })
            return
        if row is None:
            return
        if event.type == "AppMilestoneReached":
            row["milestones"] = row["milestones"] + [{"milestone": data["milestone"], "detail": data["detail"], "position": event.position}]
        elif event.type == "AppStateChanged":
            row.update(state=data["state"], state_reason=data["reason"], state_code=data["code"] or "")
        elif event.type == "AppGateVerdict":
            admitted = data["verdict"] == "admitted"
            if not admitted and row["status"] in ("admitted", "downgraded"):
                return  # a rejected, inconclusive or self-checked re-run leaves the standing result; re-runs revise it by event
            row.update(result=data["result"], verdict=data["verdict"], status=data["verdict"] if data["verdict"] in (
                           "admitted", "self-checked", "inconclusive") else "rejected",
                       headline=data["headline"], headline_ci=data["headline_ci"], datasets=data["datasets"],
                       real=data["real"], amdahl_ceiling=data["amdahl_ceiling"], hotspot_fraction=data["hotspot_fraction"],
                       noisy=data["noisy"] or [], checks=data["checks"],
                       verdict_event=str(event.event_id), revisions=row["revisions"] + (1 if row["verdict_event"] else 0))
        elif event.type in ("ResultRetracted", "ResultDowngraded"):
            if row["result"] != data["result"]:
                return
            row["status"] = "retracted" if event.type == "ResultRetracted" else "downgraded"
            if event.type == "ResultDowngraded":
                row["headline"] = data["to_value"]
            row["revisions"] += 1
        row["position"] = event.position
        rows.put(key, row)
