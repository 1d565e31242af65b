"""The SQL of the append path: raw statements built once per model, prepared once per
connection, and sent together, so an append costs two round trips and two calls into the
driver.

Why not the ORM here: compiling a queryset costs more client time than the round trip it
makes, and the append path runs the same few statements over and over (the before/after
rates are in docs/ledger_benchmarks.md). Values still go through Django's own field
conversions (`get_db_prep_save`, the read converters) and Django's own cursor, so what is
written and read back is exactly what the ORM would write and read.
"""
from __future__ import annotations

import hashlib
import re
import weakref
from contextlib import contextmanager
from functools import lru_cache
from typing import Any, Callable, Iterator, Sequence

from django.db import DEFAULT_DB_ALIAS, connections, models, transaction

Row = dict[str, Any]

PREPARE_MAX_PARAMETERS = 100  # a larger statement (a batch's) runs unprepared: its shape seldom recurs
MAX_PARAMETERS = 30_000  # per statement: under SQLite's 32,766 and PostgreSQL's 65,535


class Session:
    """The statements of one append, on the default connection (looked up once: Django's
    `connection` proxy looks it up again on every attribute access).

    Reads are queued (`read`) and sent together (`send`); writes are queued (`queue`) and sent
    together (`finish`). On PostgreSQL each batch is one simple query of `EXECUTE`s of
    statements prepared on this connection (`_executable`): one round trip and one call into
    psycopg for the batch, values bound by Django's own cursor, and the server parses only the
    `EXECUTE` and plans nothing again. Outside any atomic block (`transaction`) BEGIN travels with the
    reads and COMMIT with the writes. On SQLite every statement runs alone, as Django's cursor
    binds them. Query capture, execute wrappers and error translation see every batch."""

    def __init__(self) -> None:
        self.connection = connections[DEFAULT_DB_ALIAS]
        self.postgres = self.connection.vendor == "postgresql"
        self.own_transaction = False  # BEGIN and COMMIT are this session's statements
        self.begun = False
        self.reads: list[tuple[str, Sequence[Any], list[tuple]]] = []
        self.wrapped = None  # Django's cursor, one for the session's batches
        self.queued: list[tuple[Callable[[int], str], int, list[Sequence[Any]]]] = []

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One transaction around the append. Outside any atomic block on PostgreSQL the session
        runs it itself on Django's autocommit connection: BEGIN goes with the first reads
        (`send`), COMMIT with the writes (`finish`), where `transaction.atomic()` would send each
        alone. Inside an atomic block (the caller's transaction) and on SQLite (whose settings
        open every transaction IMMEDIATE: the write lock), `transaction.atomic()`."""
        connection = self.connection
        if not self.postgres or connection.in_atomic_block or not connection.get_autocommit():
            with transaction.atomic(using=connection.alias):
                yield
            return
        self.own_transaction = True
        try:
            yield
            if self.begun:  # nothing was written: end it, releasing the lock
                self._run(["COMMIT"], [])
        except BaseException:
            self._roll_back()
            raise
        finally:
            self.own_transaction = self.begun = False

    def _roll_back(self) -> None:
        raw = self.connection.connection
        if raw is None or raw.info.transaction_status == 0:  # psycopg's TransactionStatus.IDLE
            return
        try:
            raw.execute("ROLLBACK")
        except Exception:  # a broken connection: Django opens a new one on next use
            self.connection.close()

    def read(self, sql: str, params: Sequence[Any]) -> list[tuple]:
        """Queue a query; the returned list holds its rows once `send` has run."""
        rows: list[tuple] = []
        self.reads.append((sql, params, rows))
        return rows

    def send(self) -> None:
        """Run the queued reads, in one round trip on PostgreSQL (with BEGIN, first, in the
        session's own transaction). The server runs them in order, each with its own snapshot,
        so a read after `pg_advisory_xact_lock` sees every commit made before the lock was
        granted."""
        reads, self.reads = self.reads, []
        if not self.postgres:
            for sql, params, rows in reads:
                self._cursor().execute(sql, params)
                rows.extend(self._cursor().fetchall())
            return
        parts, values = (["BEGIN"] if self.own_transaction and not self.begun else []), []
        self.begun = self.own_transaction
        for sql, params, _ in reads:
            part, params = self._executable(sql, params)
            parts.append(part)
            values.extend(params)
        if not parts:
            return
        cursor = self._cursor()
        cursor.execute("; ".join(parts), values)
        results = cursor.cursor  # psycopg's own: every result has arrived, nothing left to translate
        for _, _, rows in reads:
            # skip BEGIN's result: a result without rows has no row number (where psycopg's
            # `description` would describe every column of every result, each time it is read)
            while results.rownumber is None and results.nextset():
                pass
            rows.extend(results.fetchall())
            results.nextset()

    def write(self, sql: str, params: Sequence[Any]) -> None:
        """Run one statement now."""
        self._cursor().execute(sql, params)

    def queue(self, statement: Callable[[int], str], row_width: int, rows: list[Sequence[Any]]) -> None:
        """Write these rows at `finish`: `statement(n)` writes n rows, each `row_width` values."""
        if rows:
            self.queued.append((statement, row_width, rows))

    def finish(self) -> None:
        """Run the queued writes, as few statements as the parameter limit allows: on
        PostgreSQL all of them in one statement of data-modifying CTEs and, in the session's own
        transaction, COMMIT, in one round trip; on SQLite one multi-row statement each."""
        statements = [(statement(len(chunk)), [value for row in chunk for value in row])
                      for statement, width, rows in self.queued for chunk in _chunks(rows, MAX_PARAMETERS // width)]
        self.queued = []
        if not self.postgres:
            for sql, params in statements:
                self.write(sql, params)
            return
        parts, values = [], []
        for sql, params in _joined(statements):
            part, params = self._executable(sql, params)
            parts.append(part)
            values.extend(params)
        if self.own_transaction:
            parts.append("COMMIT")
            self.begun = False
        self._run(parts, values)

    def _run(self, parts: list[str], values: list[Any]) -> None:
        if parts:
            self._cursor().execute("; ".join(parts), values)

    def _cursor(self):
        if self.wrapped is None:
            self.wrapped = self.connection.cursor()
        return self.wrapped

    def _executable(self, sql: str, params: Sequence[Any]) -> tuple[str, Sequence[Any]]:
        """The statement as it goes into a batch: `EXECUTE` of its prepared form (prepared now,
        in a round trip of its own, the first time this connection sees it), or itself where it
        has no parameters or too many to be worth keeping prepared."""
        if not params or len(params) > PREPARE_MAX_PARAMETERS:
            return sql, params
        name = _name(sql)
        self.connection.ensure_connection()
        prepared = _prepared.setdefault(self.connection.connection, set())
        if name not in prepared:
            self._cursor().execute(f"PREPARE {name} AS {_numbered(sql)}")  # no parameters: sent as it is
            prepared.add(name)
            _texts[name] = sql
        return f"EXECUTE {name}({', '.join(['%s'] * len(params))})", params

    def model(self, model: type[models.Model]) -> "ModelSQL":
        key = (model, self.connection.vendor)
        if key not in _built:
            _built[key] = ModelSQL(model, self.connection)
        return _built[key]


# The statements prepared on each open PostgreSQL connection (a server session's; a new
# connection starts with none, and a closed one drops out).
_prepared: "weakref.WeakKeyDictionary[Any, set[str]]" = weakref.WeakKeyDictionary()


_texts: dict[str, str] = {}


def prepared_text(name: str) -> str:
    """The statement a batch's `EXECUTE name(...)` runs (for reading captured queries)."""
    return _texts[name]


@lru_cache(maxsize=4096)
def _name(sql: str) -> str:
    return "ledger_" + hashlib.sha256(sql.encode()).hexdigest()[:24]


def _numbered(sql: str) -> str:
    """%s placeholders as PREPARE's $1, $2, ..."""
    numbers = iter(range(1, sql.count("%s") + 1))
    return re.sub("%s", lambda _: f"${next(numbers)}", sql)


def _chunks(rows: list[Sequence[Any]], size: int) -> Iterator[list[Sequence[Any]]]:
    for start in range(0, len(rows), size):
        yield rows[start : start + size]


def _joined(statements: list[tuple[str, list[Any]]]) -> Iterator[tuple[str, list[Any]]]:
    """Consecutive writes as one statement of data-modifying CTEs while their parameters fit:
    the server runs them in one statement (each sees the snapshot from before all of them,
    which is right here: no write reads another's rows), and the append pays one statement's
    overhead instead of one per table."""
    group: list[tuple[str, list[Any]]] = []
    size = 0
    for sql, params in [*statements, ("", [])]:
        if group and (not sql or size + len(params) > MAX_PARAMETERS):
            if len(group) == 1:
                yield group[0]
            else:
                yield ("WITH " + ", ".join(f"w{n} AS ({each})" for n, (each, _) in enumerate(group)) + " SELECT 1",
                       [value for _, each in group for value in each])
            group, size = [], 0
        if sql:
            group.append((sql, params))
            size += len(params)


class NotPlain:
    """No value is of this type: the column's values always take Django's conversion."""


# Columns whose Django conversion of a value of this exact type writes the same value (CharField's
# and TextField's to_python, int(), float(), bool(); on PostgreSQL Django wraps integers in
# psycopg's Int4/Int8, which client-side binding writes as the same digits), checked by
# tests/ledger/test_append_sql.py: such a value skips the conversion, a chain of four calls per
# column that cost an append more than the statement that writes it.
PLAIN: dict[str, type] = {"CharField": str, "TextField": str, "IntegerField": int, "BigIntegerField": int,
                          "SmallIntegerField": int, "PositiveIntegerField": int, "PositiveSmallIntegerField": int,
                          "PositiveBigIntegerField": int, "FloatField": float, "BooleanField": bool}


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
        self.width = len(self.fields)
        others = [quote(f.column) for f in self.fields if not f.primary_key]
        self.on_conflict = f"UPDATE SET {', '.join(f'{c} = EXCLUDED.{c}' for c in others)}" if others else "NOTHING"
        self.statements: dict[tuple[int, bool], str] = {}
        self.readers = []
        for field in self.fields:
            column = field.get_col(meta.db_table)
            converters = connection.ops.get_db_converters(column) + column.get_db_converters(connection)
            self.readers.append((field.attname, column, converters))
        # bound once: three attribute lookups per column and row otherwise
        self.writers = [(field.attname, PLAIN.get(field.get_internal_type(), NotPlain), field.get_db_prep_save,
                         field.get_default) for field in self.fields]

        # NULL for each column in another table's branch of `select_by_pks`, plain but in the first
        # branch on PostgreSQL, which gives a column of untyped NULLs in the first two branches
        # the type text, that the table's own branch then cannot match
        self.nulls = ", ".join(["NULL"] * len(self.fields))
        self.typed_nulls = (", ".join(f"NULL::{field.cast_db_type(connection)}" for field in self.fields)
                            if connection.vendor == "postgresql" else self.nulls)

    def insert(self, rows: int) -> str:
        """INSERT of `rows` rows (their `params` one after the other)."""
        return self._statement(rows, False)

    def upsert(self, rows: int) -> str:
        """The same, a row whose key exists replacing it."""
        return self._statement(rows, True)

    def _statement(self, rows: int, upsert: bool) -> str:
        if (rows, upsert) not in self.statements:
            values = ", ".join([f"({', '.join(['%s'] * self.width)})"] * rows)
            sql = f"INSERT INTO {self.table} ({self.columns}) VALUES {values}"
            self.statements[rows, upsert] = f"{sql} ON CONFLICT ({self.pk_column}) DO {self.on_conflict}" if upsert else sql
        return self.statements[rows, upsert]

    def pk_params(self, keys: Sequence[Any], connection) -> list[Any]:
        return [self.pk.get_db_prep_value(key, connection) for key in keys]

    def params(self, row: Row, connection) -> list[Any]:
        """A row (attname -> value) as the INSERT's parameters; missing fields take their default.
        A value already of its column's plain type is passed as it is (`PLAIN`)."""
        params = []
        for name, plain, prepare, default in self.writers:
            value = row[name] if name in row else default()
            params.append(value if type(value) is plain else prepare(value, connection))
        return params

    def row(self, values: Sequence[Any], connection) -> Row:
        """A fetched row as `.values()` would give it."""
        row = {}
        for value, (attname, column, converters) in zip(values, self.readers):
            for convert in converters:
                value = convert(value, column, connection)
            row[attname] = value
        return row


@lru_cache(maxsize=1024)
def select_by_pks(tables: tuple[tuple[ModelSQL, int], ...]) -> str:
    """One SELECT of rows by primary key from several tables (each with its number of keys), so
    that one statement reads every projection row an append touches instead of one statement a
    table: each statement costs the server its own overhead (docs/ledger_benchmarks.md). Each
    table's branch starts with its number in `tables`, then fills its own columns and NULL for
    every other table's; the columns are the tables' own, so rows read this way are converted
    exactly as a one-table read would be. Built once per shape: a single append asks for the
    same few shapes over and over."""
    branches = []
    for number, (sql, count) in enumerate(tables):
        columns = ", ".join(each.columns if index == number else each.typed_nulls if number == 0 else each.nulls
                            for index, (each, _) in enumerate(tables))
        keys = ", ".join(["%s"] * count)
        branches.append(f"SELECT {number}, {columns} FROM {sql.table} WHERE {sql.pk_column} IN ({keys})")
    return " UNION ALL ".join(branches)


_built: dict[tuple[type[models.Model], str], ModelSQL] = {}
