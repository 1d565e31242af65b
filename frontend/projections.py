"""Projection of the re-run events: one row per re-run, updated by each of its events, so a
page can poll its progress while the worker runs."""
from __future__ import annotations

from ledger.projection_base import Projection, RowStore
from ledger.records import RecordedEvent

from .models import RerunRow
from .recorded import time_of_record


class Reruns(Projection):
    name = "reruns"
    model = RerunRow
    handles = frozenset({"RerunRequested", "RerunStarted", "RerunProgress", "RerunFinished", "RerunAbandoned"})

    def key(self, event: RecordedEvent) -> str:
        return event.data["rerun"]

    def apply(self, event: RecordedEvent, rows: RowStore) -> None:
        data = event.data
        if event.type == "RerunRequested":
            rows.put(data["rerun"], {
                "rerun": data["rerun"], "kind": data["kind"], "target": data["target"], "backend": data["backend"],
                "result": data["result"], "requested_by": event.actor, "requested_at": time_of_record(event),
                "state": "queued", "progress": [], "outcome": None, "detail": "", "history_line": None,
                "position": event.position})
            return
        row = rows.get(data["rerun"])
        if row is None:
            return
        if event.type == "RerunStarted":
            row["state"] = "running"
        elif event.type == "RerunProgress":
            row["progress"] = row["progress"] + [data["message"]]
        elif event.type == "RerunAbandoned":
            row.update(state="abandoned", detail=data["reason"])
        else:
            row.update(state=data["state"], outcome=data["outcome"], detail=data["detail"], history_line=data["history_line"])
        row["position"] = event.position
        rows.put(data["rerun"], row)
