"""The SQL of the append path: raw statements built once per model, a cursor that lets
PostgreSQL prepare them, and pipelining, so an append costs a few round trips.

Why not the ORM here: compiling a queryset costs more client time than the round trip it
makes (0.15 ms a statement measured, see docs/ledger_benchmarks.md), and the append path runs
the same dozen statements over and over. Values still go through Django's own field
conversions (`get_db_prep_save`, the read converters), so what is written and read back is
exactly what the ORM would write and read.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator, Sequence

from django.db import DEFAULT_DB_ALIAS, connections, models

Row = dict[str, Any]


def database():
    """The default connection itself: `django.db.connection` is a proxy that looks the
    connection up again on every attribute access, which the append path does hundreds of
    times an append."""
    return connections[DEFAULT_DB_ALIAS]


def cursor():
    """A cursor for the append path's statements.

    On PostgreSQL it binds parameters on the server (psycopg's `Cursor`, where Django's default
    merges them into the SQL text), so psycopg prepares each statement after
    `prepare_threshold` uses (set in settings' DATABASES OPTIONS) and the server stops planning
    it on every append. It is still wrapped like any Django cursor: query capture, execute
    wrappers and error translation see its statements."""
    connection = database()
    if connection.vendor != "postgresql":
        return connection.cursor()
    from django.db.backends.postgresql.base import ServerBindingCursor

    connection.ensure_connection()
    connection.validate_thread_sharing()
    raw = ServerBindingCursor(connection.connection)
    return connection.make_debug_cursor(raw) if connection.queries_logged else connection.make_cursor(raw)


@contextmanager
def pipelined() -> Iterator[None]:
    """On PostgreSQL, send the statements issued inside without waiting for each answer
    (psycopg pipeline mode): they travel together and wait once, when a result is first
    fetched or the block ends. The server still runs them in order, each with its own snapshot,
    so a read after `pg_advisory_xact_lock` sees every commit made before the lock was granted.
    Elsewhere (SQLite, in-process) it does nothing."""
    connection = database()
    if connection.vendor != "postgresql":
        yield
        return
    connection.ensure_connection()
    with connection.wrap_database_errors, connection.connection.pipeline():
        yield


class ModelSQL:
    """Statements on one model's table, with its columns in field order."""

    def __init__(self, model: type[models.Model], connection) -> None:
        meta = model._meta
        quote = connection.ops.quote_name
        self.fields = list(meta.concrete_fields)
        self.pk = meta.pk
        self.table = quote(meta.db_table)
        self.columns = ", ".join(quote(f.column) for f in self.fields)
        self.insert = f"INSERT INTO {self.table} ({self.columns}) VALUES ({', '.join(['%s'] * len(self.fields))})"
        others = [quote(f.column) for f in self.fields if not f.primary_key]
        on_conflict = f"UPDATE SET {', '.join(f'{c} = EXCLUDED.{c}' for c in others)}" if others else "NOTHING"
        self.pk_column = quote(self.pk.column)
        self.upsert = f"{self.insert} ON CONFLICT ({self.pk_column}) DO {on_conflict}"
        self.readers = []
        for field in self.fields:
            column = field.get_col(meta.db_table)
            converters = connection.ops.get_db_converters(column) + column.get_db_converters(connection)
            self.readers.append((field.attname, column, converters))

    def select_by_pk(self, count: int) -> str:
        return f"SELECT {self.columns} FROM {self.table} WHERE {self.pk_column} IN ({', '.join(['%s'] * count)})"

    def pk_params(self, keys: Sequence[Any]) -> list[Any]:
        connection = database()
        return [self.pk.get_db_prep_value(key, connection) for key in keys]

    def params(self, row: Row) -> list[Any]:
        """A row (attname -> value) as the INSERT's parameters; missing fields take their default."""
        connection = database()
        return [
            field.get_db_prep_save(row[field.attname] if field.attname in row else field.get_default(), connection)
            for field in self.fields
        ]

    def row(self, values: Sequence[Any]) -> Row:
        """A fetched row as `.values()` would give it."""
        connection, row = database(), {}
        for value, (attname, column, converters) in zip(values, self.readers):
            for convert in converters:
                value = convert(value, column, connection)
            row[attname] = value
        return row


_built: dict[tuple[type[models.Model], str], ModelSQL] = {}


def model_sql(model: type[models.Model]) -> ModelSQL:
    """The model's statements for the current database vendor (built on first use)."""
    connection = database()
    key = (model, connection.vendor)
    if key not in _built:
        _built[key] = ModelSQL(model, connection)
    return _built[key]
