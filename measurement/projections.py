"""Projections of measurement events: the case table and the operator results."""
from __future__ import annotations

from ledger.projection_base import Projection, RowStore
from ledger.records import RecordedEvent

from .models import CaseRow, OperatorResult


class Cases(Projection):
    name = "cases"
    model = CaseRow
    handles = frozenset({"CaseDefined"})

    def key(self, event: RecordedEvent) -> str:
        return event.data["case"]

    def apply(self, event: RecordedEvent, rows: RowStore) -> None:
        data = event.data
        current = rows.get(data["case"])
        matrices = sorted(set((current or {}).get("matrices", [])) | {data["matrix"]})
        rows.put(
            data["case"],
            {
                "case": data["case"],
                "type": data["type"],
                "precision": data["precision"],
                "shape": data["shape"],
                "coefficients": data["coefficients"],
                "compulsory_bytes": data["compulsory_bytes"],
                "flops": data["flops"],
                "matrices": matrices,
                "position": current["position"] if current else event.position,
            },
        )


class OperatorResults(Projection):
    name = "operator_results"
    model = OperatorResult
    handles = frozenset({"GateVerdict", "ResultRetracted", "ResultDowngraded"})

    def key(self, event: RecordedEvent) -> str:
        return event.data["result"]

    def apply(self, event: RecordedEvent, rows: RowStore) -> None:
        data = event.data
        current = rows.get(data["result"])
        if event.type == "GateVerdict":
            if data["verdict"] != "admitted":
                return
            rows.put(
                data["result"],
                {
                    "result": data["result"],
                    "case": data["case"],
                    "backend": data["backend"],
                    "status": "admitted",
                    "source_hash": data["candidate_source_hash"],
                    "source": data["candidate_source"],
                    "launch": data["candidate_launch"],
                    "median_seconds": data["candidate_median"],
                    "speedup": data["speedup"],
                    "speedup_ci": data["speedup_ci"],
                    "bound": data["bound"],
                    "baselines": data["baselines"],
                    "history": current["history"] if current else [],
                    "same_precision": data["same_precision"],
                    "fraction_of_copy": data["fraction_of_copy"],
                    "verdict_event": event.event_id,
                    "verdict_position": event.position,
                    "revisions": (current["revisions"] + 1) if current else 0,
                },
            )
        elif current is not None:
            current["status"] = "retracted" if event.type == "ResultRetracted" else "downgraded"
            measured = data["measured"]
            if event.type == "ResultDowngraded":
                # the value and CI of the same measurement, over the bound of that measurement
                current["speedup"] = data["to_value"]
                # (a v1 downgrade did not record them: no CI rather than the admission's)
                current["speedup_ci"], current["bound"], current["baselines"] = (
                    (measured["speedup_ci"], measured["bound"], measured["baselines"]) if measured
                    else (None, current["bound"], current["baselines"]))
            current["history"] = [*current["history"], data["reason"]]
            current["revisions"] += 1
            rows.put(data["result"], current)
