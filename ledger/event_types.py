"""Registry of event types. Each app declares the types it owns in its `events.py`.

A type has one pydantic schema per schema version; appends always write the latest
version, and upcasters lift older stored payloads to it so that projections and readers
only ever see the current shape.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, ValidationError

from .errors import InvalidPayload, UnknownEventType

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]


class Payload(BaseModel):
    """Base for payload schemas: unknown fields are refused, not silently dropped."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass
class EventType:
    name: str
    owner: str
    schemas: dict[int, type[Payload]] = field(default_factory=dict)
    upcasters: dict[int, Upcaster] = field(default_factory=dict)  # from version v to v+1

    @property
    def latest_version(self) -> int:
        return max(self.schemas)


_REGISTRY: dict[str, EventType] = {}


def event_type(name: str, *, owner: str, version: int = 1, upcast_from_previous: Upcaster | None = None):
    """Class decorator declaring `name`'s payload schema at `version`.

    Version n > 1 must come with the upcaster that turns a version n-1 payload into it.
    """

    def register(schema: type[Payload]) -> type[Payload]:
        entry = _REGISTRY.setdefault(name, EventType(name=name, owner=owner))
        if entry.owner != owner:
            raise ValueError(f"event type {name} is owned by {entry.owner}, not {owner}")
        if version in entry.schemas and entry.schemas[version] is not schema:
            raise ValueError(f"event type {name} v{version} declared twice")
        if version > 1:
            if upcast_from_previous is None:
                raise ValueError(f"event type {name} v{version} needs an upcaster from v{version - 1}")
            entry.upcasters[version - 1] = upcast_from_previous
        entry.schemas[version] = schema
        return schema

    return register


def get(name: str) -> EventType:
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY)) or "none"
        raise UnknownEventType(f"unknown event type {name!r}; known types: {known}") from None


def all_types() -> dict[str, EventType]:
    return dict(_REGISTRY)


def unregister(name: str) -> None:
    """Only for tests that declare throw-away types."""
    _REGISTRY.pop(name, None)


def validate(name: str, schema_version: int, payload: Any) -> dict[str, Any]:
    """Validate `payload` against the schema; return it in JSON form (defaults filled in)."""
    entry = get(name)
    schema = entry.schemas.get(schema_version)
    if schema is None:
        raise InvalidPayload(
            f"{name} has no schema version {schema_version}; known: {sorted(entry.schemas)}"
        )
    if not isinstance(payload, dict):
        raise InvalidPayload(f"{name} payload must be a JSON object, got {type(payload).__name__}")
    try:
        return schema.model_validate(payload).model_dump(mode="json")
    except ValidationError as exc:
        problems = "; ".join(
            f"payload.{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}" for err in exc.errors()
        )
        raise InvalidPayload(f"invalid {name} v{schema_version} payload: {problems}") from None


def upcast(name: str, schema_version: int, payload: dict[str, Any]) -> dict[str, Any]:
    entry = get(name)
    for version in range(schema_version, entry.latest_version):
        payload = entry.upcasters[version](payload)
    return payload
