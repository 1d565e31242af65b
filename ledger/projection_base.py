"""How projections are written, so one handler serves the live tables and a scratch replay.

A projection's `apply` only reads and writes rows through a RowStore: the live store is the
projection's table inside the append transaction; the scratch store is a dict, used by
`verify` (compare with the live table) and `rebuild` (bulk-load the table).
"""
from __future__ import annotations

from typing import Any, ClassVar, Iterable, Protocol

from django.db import connections, models, router

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
    """Live rows of one projection table during one append batch.

    Rows are read once (all keys of the batch in one query where the projection names them),
    changed in memory, and written back at `flush` with one bulk INSERT and one bulk UPDATE.
    """

    def __init__(self, model: type[models.Model], key_field: str) -> None:
        self.model = model
        self.key_field = key_field
        self.cache: dict[Any, Row | None] = {}
        self.existing: set[Any] = set()
        self.dirty: dict[Any, Row] = {}

    def prefetch(self, keys: Iterable[Any]) -> None:
        missing = list({key for key in keys if key not in self.cache})
        for start in range(0, len(missing), 500):
            chunk = missing[start : start + 500]
            found = {row[self.key_field]: row for row in self.model.objects.filter(pk__in=chunk).values()}
            for key in chunk:
                self.cache[key] = found.get(key)
                if key in found:
                    self.existing.add(key)

    def _update(self, changed: list[tuple[Any, Row]]) -> None:
        """One prepared UPDATE executed for every changed row (Django's bulk_update builds a
        CASE expression per field and row, which costs milliseconds per row)."""
        meta = self.model._meta
        fields = [f for f in meta.concrete_fields if not f.primary_key]
        connection = connections[router.db_for_write(self.model)]
        quote = connection.ops.quote_name
        sql = (
            f"UPDATE {quote(meta.db_table)} SET {', '.join(f'{quote(f.column)} = %s' for f in fields)} "
            f"WHERE {quote(meta.pk.column)} = %s"
        )
        params = [
            [f.get_db_prep_value(row[f.attname], connection) for f in fields] + [meta.pk.get_db_prep_value(key, connection)]
            for key, row in changed
        ]
        with connection.cursor() as cursor:
            cursor.executemany(sql, params)

    def get(self, key: Any) -> Row | None:
        if key not in self.cache:
            self.prefetch([key])
        row = self.cache[key]
        return dict(row) if row is not None else None

    def put(self, key: Any, row: Row) -> None:
        self.cache[key] = dict(row)
        self.dirty[key] = dict(row)

    def flush(self) -> None:
        created = [self.model(**row) for key, row in self.dirty.items() if key not in self.existing]
        changed = [(key, row) for key, row in self.dirty.items() if key in self.existing]
        if created:
            self.model.objects.bulk_create(created, batch_size=1000)
        if changed:
            self._update(changed)
        self.existing.update(key for key in self.dirty)
        self.dirty.clear()


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

    def key(self, event: RecordedEvent) -> Any:
        """The row an event touches, when that is known before applying it (lets a batch
        read all its rows in one query); None means: only `apply` knows."""
        return None

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
