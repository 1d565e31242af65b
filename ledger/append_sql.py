"""The SQL of the append path: raw statements built once per model, cursors that let
PostgreSQL prepare them, and pipelining, so an append costs a few round trips.

Why not the ORM here: compiling a queryset costs more client time than the round trip it
makes, and the append path runs the same dozen statements over and over (the before/after
rates are in docs/ledger_benchmarks.md). Values still go through Django's own field
conversions (`get_db_prep_save`, the read converters), so what is written and read back is
exactly what the ORM would write and read.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator, Sequence

from django.db import DEFAULT_DB_ALIAS, connections, models

Row = dict[str, Any]


class Session:
    """The statements of one append, on the default connection (looked up once: Django's
    `connection` proxy looks it up again on every attribute access, hundreds of times an
    append).

    On PostgreSQL its cursors bind parameters on the server (psycopg's `Cursor`, where
    Django's default merges them into the SQL text), so psycopg prepares each statement after
    `prepare_threshold` uses (settings' DATABASES OPTIONS) and the server stops planning it on
    every append; and `pipelined` sends statements without waiting for each answer. The
    cursors are still wrapped like any Django cursor: query capture, execute wrappers and
    error translation see their statements."""

    def __init__(self) -> None:
        self.connection = connections[DEFAULT_DB_ALIAS]
        self.postgres = self.connection.vendor == "postgresql"
        self.writer = None
        self.binding_cursor = None

    def cursor(self):
        connection = self.connection
        if not self.postgres:
            return connection.cursor()
        if self.binding_cursor is None:  # what Django checks before any cursor, once a session
            from django.db.backends.postgresql.base import ServerBindingCursor

            connection.ensure_connection()
            connection.validate_thread_sharing()
            self.binding_cursor = ServerBindingCursor
        raw = self.binding_cursor(connection.connection)
        return connection.make_debug_cursor(raw) if connection.queries_logged else connection.make_cursor(raw)

    def read(self, sql: str, params: Sequence[Any]):
        """Issue a query; its rows are fetched from the returned cursor (its own, so pipelined
        reads keep their results apart)."""
        cursor = self.cursor()
        cursor.execute(sql, params)
        return cursor

    def write(self, sql: str, params: Sequence[Any]) -> None:
        self._writer().execute(sql, params)

    def write_many(self, sql: str, params: Sequence[Sequence[Any]]) -> None:
        if len(params) == 1:  # executemany's own bookkeeping costs more than the one statement
            self.write(sql, params[0])
        else:
            self._writer().executemany(sql, params)

    def written_rows(self) -> int:
        """Rows changed by the last write (once a pipeline has delivered it)."""
        return self.writer.rowcount

    def _writer(self):
        if self.writer is None:
            self.writer = self.cursor()
        return self.writer

    @contextmanager
    def pipelined(self) -> Iterator[None]:
        """On PostgreSQL, send the statements issued inside without waiting for each answer
        (psycopg pipeline mode): they travel together and wait once, when a result is first
        fetched or the block ends. The server still runs them in order, each with its own
        snapshot, so a read after `pg_advisory_xact_lock` sees every commit made before the
        lock was granted. Elsewhere (SQLite, in-process) it does nothing."""
        if not self.postgres:
            yield
            return
        self.connection.ensure_connection()
        with self.connection.wrap_database_errors, self.connection.connection.pipeline():
            yield

    def model(self, model: type[models.Model]) -> "ModelSQL":
        key = (model, self.connection.vendor)
        if key not in _built:
            _built[key] = ModelSQL(model, self.connection)
        return _built[key]


class ModelSQL:
    """Statements on one model's table, with its columns in field order."""

    def __init__(self, model: type[models.Model], connection) -> None:
        meta = model._meta
        quote = connection.ops.quote_name
        self.fields = list(meta.concrete_fields)
        self.pk = meta.pk
        self.table = quote(meta.db_table)
        self.pk_column = quote(self.pk.column)
        self.columns = ", ".join(quote(f.column) for f in self.fields)
        self.insert = f"INSERT INTO {self.table} ({self.columns}) VALUES ({', '.join(['%s'] * len(self.fields))})"
        others = [quote(f.column) for f in self.fields if not f.primary_key]
        on_conflict = f"UPDATE SET {', '.join(f'{c} = EXCLUDED.{c}' for c in others)}" if others else "NOTHING"
        self.upsert = f"{self.insert} ON CONFLICT ({self.pk_column}) DO {on_conflict}"
        self.readers = []
        for field in self.fields:
            column = field.get_col(meta.db_table)
            converters = connection.ops.get_db_converters(column) + column.get_db_converters(connection)
            self.readers.append((field.attname, column, converters))
        # bound once: three attribute lookups per column and row otherwise
        self.writers = [(field.attname, field.get_db_prep_save, field.get_default) for field in self.fields]

        self.nulls = ", ".join(f"CAST(NULL AS {field.cast_db_type(connection)})" for field in self.fields)

    def pk_params(self, keys: Sequence[Any], connection) -> list[Any]:
        return [self.pk.get_db_prep_value(key, connection) for key in keys]

    def params(self, row: Row, connection) -> list[Any]:
        """A row (attname -> value) as the INSERT's parameters; missing fields take their default."""
        return [prepare(row[name] if name in row else default(), connection) for name, prepare, default in self.writers]

    def row(self, values: Sequence[Any], connection) -> Row:
        """A fetched row as `.values()` would give it."""
        row = {}
        for value, (attname, column, converters) in zip(values, self.readers):
            for convert in converters:
                value = convert(value, column, connection)
            row[attname] = value
        return row


def select_by_pks(tables: Sequence[tuple[ModelSQL, int]]) -> str:
    """One SELECT of rows by primary key from several tables (each with its number of keys), so
    that one statement reads every projection row an append touches instead of one statement a
    table: the statement count is what an append's client CPU follows
    (docs/ledger_benchmarks.md). Each table's branch starts with its number in `tables`, then
    fills its own columns and, typed, NULL for every other table's; the columns are the
    tables' own, so rows read this way are converted exactly as a one-table read would be."""
    branches = []
    for number, (sql, count) in enumerate(tables):
        columns = ", ".join(each.columns if index == number else each.nulls for index, (each, _) in enumerate(tables))
        keys = ", ".join(["%s"] * count)
        branches.append(f"SELECT {number}, {columns} FROM {sql.table} WHERE {sql.pk_column} IN ({keys})")
    return " UNION ALL ".join(branches)


_built: dict[tuple[type[models.Model], str], ModelSQL] = {}
