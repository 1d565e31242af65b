"""The ledger's own projections: stream heads, type counts, ledger identity, checkpoints,
result status and sign-offs."""
from __future__ import annotations

from .models import Checkpoint, EventTypeCount, KnownLedger, ResultStatus, ResultVersion, SignOff, StreamHead
from .projection_base import Projection, RowStore
from .records import RecordedEvent


class StreamHeads(Projection):
    name = "stream_heads"
    model = StreamHead

    def key(self, event: RecordedEvent) -> str:
        return event.stream

    def apply(self, event: RecordedEvent, rows: RowStore) -> None:
        current = rows.get(event.stream)
        rows.put(
            event.stream,
            {
                "stream": event.stream,
                "version": event.version,
                "first_position": current["first_position"] if current else event.position,
                "last_position": event.position,
                "last_type": event.type,
                "last_recorded_at": event.recorded_at,
            },
        )


class EventTypeCounts(Projection):
    name = "event_type_counts"
    model = EventTypeCount

    def key(self, event: RecordedEvent) -> str:
        return event.type

    def apply(self, event: RecordedEvent, rows: RowStore) -> None:
        current = rows.get(event.type)
        rows.put(event.type, {"type": event.type, "count": (current["count"] if current else 0) + 1})


class KnownLedgers(Projection):
    name = "known_ledgers"
    model = KnownLedger
    handles = frozenset({"LedgerInitialised"})

    def apply(self, event: RecordedEvent, rows: RowStore) -> None:
        ledger_id = event.data["ledger_id"]
        rows.put(
            ledger_id,
            {"ledger_id": ledger_id, "name": event.data["name"], "position": event.position, "imported": event.imported},
        )


class Checkpoints(Projection):
    name = "checkpoints"
    model = Checkpoint
    handles = frozenset({"CheckpointSigned"})

    def apply(self, event: RecordedEvent, rows: RowStore) -> None:
        data = event.data
        rows.put(
            event.position,
            {
                "position": event.position,
                "ledger_id": data["ledger_id"],
                "head_position": data["head_position"],
                "head_hash": data["head_hash"],
                "public_key": data["public_key"],
                "imported": event.imported,
            },
        )


class ResultStatuses(Projection):
    name = "result_status"
    model = ResultStatus
    handles = frozenset({"ResultRetracted", "ResultDowngraded"})

    def key(self, event: RecordedEvent) -> str:
        return event.data["result"]

    def apply(self, event: RecordedEvent, rows: RowStore) -> None:
        data = event.data
        current = rows.get(data["result"]) or {"revisions": 0, "value": None, "unit": ""}
        if event.type == "ResultRetracted":
            status, value, unit = "retracted", current["value"], current["unit"]
        else:
            status, value, unit = "downgraded", data["to_value"], data["unit"]
        rows.put(
            data["result"],
            {
                "result": data["result"],
                "status": status,
                "value": value,
                "unit": unit,
                "revisions": current["revisions"] + 1,
                "last_reason": data["reason"],
                "last_position": event.position,
            },
        )


class ResultVersions(Projection):
    """The version a sign-off names. The verdict types belong to the gates (measurement, appgate);
    the ledger reads only their `result` and `verdict` fields, which both carry."""

    name = "result_versions"
    model = ResultVersion
    handles = frozenset({"GateVerdict", "AppGateVerdict", "ResultRetracted", "ResultDowngraded"})

    def key(self, event: RecordedEvent) -> str:
        return event.data["result"]

    def apply(self, event: RecordedEvent, rows: RowStore) -> None:
        if event.type.endswith("Verdict") and (event.data.get("verdict") != "admitted" or event.data.get("revises")):
            return  # a rejected candidate leaves the result as it was; a re-run changes it only by a revision
        current = rows.get(event.data["result"])
        # version 1 is the first admitted verdict (or, before any row, the result as first reported)
        before = current["version"] if current else (0 if event.type.endswith("Verdict") else 1)
        rows.put(event.data["result"], {"result": event.data["result"], "version": before + 1, "position": event.position})


class SignOffs(Projection):
    name = "sign_offs"
    model = SignOff
    handles = frozenset({"AuditSignedOff"})

    def key(self, event: RecordedEvent) -> str:
        data = event.data
        return f"{data['result']}@{data['result_version']}:{data['reviewer']}"

    def apply(self, event: RecordedEvent, rows: RowStore) -> None:
        data = event.data
        key = self.key(event)
        if rows.get(key) is None:  # a second sign-off by the same reviewer adds nothing
            rows.put(
                key,
                {
                    "key": key,
                    "result": data["result"],
                    "result_version": data["result_version"],
                    "reviewer": data["reviewer"],
                    "position": event.position,
                    "signed_at": event.recorded_at,
                },
            )
