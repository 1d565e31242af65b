"""The in-memory form of a stored event, as services, projections and readers see it."""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from . import event_types


@dataclass(frozen=True)
class RecordedEvent:
    position: int
    event_id: str
    stream: str
    version: int
    type: str
    schema_version: int
    payload: dict[str, Any]  # as stored, at schema_version
    actor: str
    recorded_at: str  # ISO 8601, UTC, microseconds
    origin: dict[str, Any] | None
    body: str
    prev_hash: str
    hash: str

    @classmethod
    def from_body(cls, body: str, prev_hash: str, hash_: str) -> "RecordedEvent":
        fields = json.loads(body)
        return cls(**fields, body=body, prev_hash=prev_hash, hash=hash_)

    @cached_property
    def data(self) -> dict[str, Any]:
        """The payload lifted to the type's latest schema version."""
        return event_types.upcast(self.type, self.schema_version, self.payload)

    @property
    def imported(self) -> bool:
        return self.origin is not None
