"""How projections are written, so one handler serves the live tables and a scratch replay.

A projection's `apply` only reads and writes rows through a RowStore: the live store is the
projection's table inside the append transaction; the scratch store is a dict, used by
`verify` (compare with the live table) and `rebuild` (bulk-load the table).
"""
from __future__ import annotations

from typing import Any, ClassVar, Iterable, Protocol

from django.db import models

from .records import RecordedEvent

Row = dict[str, Any]


class RowStore(Protocol):
    def get(self, key: Any) -> Row | None: ...

    def put(self, key: Any, row: Row) -> None: ...


class MemoryRows:
    def __init__(self) -> None:
        self.rows: dict[Any, Row] = {}

    def get(self, key: Any) -> Row | None:
        row = self.rows.get(key)
        return dict(row) if row is not None else None

    def put(self, key: Any, row: Row) -> None:
        self.rows[key] = dict(row)


class TableRows:
    """Live rows of one projection table; remembers which keys exist to pick UPDATE or INSERT."""

    def __init__(self, model: type[models.Model], key_field: str) -> None:
        self.model = model
        self.key_field = key_field
        self.existing: set[Any] = set()

    def get(self, key: Any) -> Row | None:
        row = self.model.objects.filter(pk=key).values().first()
        if row is not None:
            self.existing.add(key)
        return row

    def put(self, key: Any, row: Row) -> None:
        values = {k: v for k, v in row.items() if k != self.key_field}
        if key in self.existing:
            self.model.objects.filter(pk=key).update(**values)
        else:
            self.model.objects.create(**{self.key_field: key}, **values)
            self.existing.add(key)


class Projection:
    """Subclass, set the class attributes, implement `apply`; registration is automatic."""

    name: ClassVar[str]
    model: ClassVar[type[models.Model]]
    handles: ClassVar[frozenset[str] | None] = None  # None: every event type

    registry: ClassVar[dict[str, "Projection"]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.name in Projection.registry:
            raise ValueError(f"projection {cls.name} registered twice")
        Projection.registry[cls.name] = cls()

    @property
    def key_field(self) -> str:
        return self.model._meta.pk.name

    def wants(self, event: RecordedEvent) -> bool:
        return self.handles is None or event.type in self.handles

    def apply(self, event: RecordedEvent, rows: RowStore) -> None:
        raise NotImplementedError

    def live_rows(self) -> dict[Any, Row]:
        return {row[self.key_field]: row for row in self.model.objects.values()}

    def replace_all(self, rows: dict[Any, Row]) -> None:
        self.model.objects.all().delete()
        self.model.objects.bulk_create(
            (self.model(**{self.key_field: key, **row}) for key, row in rows.items()), batch_size=2000
        )


def registered() -> Iterable[Projection]:
    return Projection.registry.values()
