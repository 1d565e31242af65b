"""How projections are written, so one handler serves the live tables and a scratch replay.

A projection's `apply` only reads and writes rows through a RowStore: the live store is the
projection's table inside the append transaction; the scratch store is a dict, used by
`verify` (compare with the live table) and `rebuild` (bulk-load the table).
"""
from __future__ import annotations

from itertools import accumulate
from typing import Any, Callable, ClassVar, Iterable, Protocol, Sequence

from django.db import models

from .append_sql import Session, select_by_pks
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

    Rows are read once (`request_rows`: the keys of every table of a batch in one statement),
    changed in memory, and queued at `flush` to be written back with the append's other
    writes (`Session.finish`: one multi-row upsert per table).
    """

    def __init__(self, model: type[models.Model], key_field: str, session: Session) -> None:
        self.session = session
        self.sql = session.model(model)
        self.key_field = key_field
        self.cache: dict[Any, Row | None] = {}
        self.dirty: dict[Any, Row] = {}

    def get(self, key: Any) -> Row | None:
        if key not in self.cache:  # a key not read in advance: read now, one statement
            read_rows(self.session, [(self, [key])])
        row = self.cache[key]
        return dict(row) if row is not None else None

    def put(self, key: Any, row: Row) -> None:
        self.cache[key] = dict(row)
        self.dirty[key] = dict(row)

    def flush(self) -> None:
        """Queue the changed rows: an upsert, so a row `put` without being read first (a
        projection without `key`) is inserted or replaced alike."""
        connection = self.session.connection
        params = [self.sql.params({self.key_field: key, **row}, connection) for key, row in self.dirty.items()]
        self.session.queue(self.sql.upsert, self.sql.width, params)
        self.dirty.clear()


def read_rows(session: Session, tables: Sequence[tuple[TableRows, Iterable[Any]]]) -> None:
    """Read the rows of the keys not read yet, of all these tables in one statement (one per
    500 keys of a table)."""
    fetch = request_rows(session, tables)
    session.send()
    fetch()


def request_rows(session: Session, tables: Sequence[tuple[TableRows, Iterable[Any]]]) -> Callable[[], None]:
    """Queue `read_rows`' statements with the session's other reads (sent together, in one
    round trip) and return what puts their rows into the tables' caches once they are sent."""
    connection = session.connection
    missing = [(rows, list({key for key in keys if key not in rows.cache})) for rows, keys in tables]
    missing = [(rows, keys) for rows, keys in missing if keys]
    reads = []
    for start in range(0, max((len(keys) for _, keys in missing), default=0), 500):
        part = [(rows, keys[start : start + 500]) for rows, keys in missing if keys[start : start + 500]]
        params = [value for rows, chunk in part for value in rows.sql.pk_params(chunk, connection)]
        reads.append((session.read(select_by_pks(tuple((rows.sql, len(chunk)) for rows, chunk in part)), params), part))

    def fetch() -> None:
        for fetched, part in reads:
            offsets = list(accumulate((len(rows.sql.fields) for rows, _ in part), initial=1))
            found: list[dict[Any, Row]] = [{} for _ in part]
            for values in fetched:
                number = values[0]
                rows = part[number][0]
                row = rows.sql.row(values[offsets[number] : offsets[number + 1]], connection)
                found[number][row[rows.key_field]] = row
            for (rows, chunk), rows_found in zip(part, found):
                rows.cache.update((key, rows_found.get(key)) for key in chunk)

    return fetch


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
        read all its rows in one query); None means: only `apply` knows. The append asks it
        before the event is sealed, of the event without its position, version, time and hashes
        (`services._unsealed`): a key made of those is read again, in a round trip of its own."""
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
