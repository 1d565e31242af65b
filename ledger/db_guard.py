"""Database triggers that make the events table append-only, on SQLite and PostgreSQL.

Installed by migration 0002. `remove_guards` exists for the tamper tests (which must
simulate an attacker who drops the triggers) and for erasing a test database.
"""
from __future__ import annotations

TABLE = "ledger_event"

SQLITE_INSTALL = [
    f"""CREATE TRIGGER IF NOT EXISTS ledger_event_no_update BEFORE UPDATE ON {TABLE}
        BEGIN SELECT RAISE(ABORT, 'ledger_event is append-only: UPDATE refused'); END""",
    f"""CREATE TRIGGER IF NOT EXISTS ledger_event_no_delete BEFORE DELETE ON {TABLE}
        BEGIN SELECT RAISE(ABORT, 'ledger_event is append-only: DELETE refused'); END""",
    # INSERT OR REPLACE deletes the conflicting row without firing delete triggers
    # (unless recursive_triggers is on), so refuse any insert that would collide.
    f"""CREATE TRIGGER IF NOT EXISTS ledger_event_no_replace BEFORE INSERT ON {TABLE}
        WHEN EXISTS (SELECT 1 FROM {TABLE} WHERE position = NEW.position OR event_id = NEW.event_id
                     OR hash = NEW.hash OR (stream = NEW.stream AND version = NEW.version))
        BEGIN SELECT RAISE(ABORT, 'ledger_event is append-only: INSERT OR REPLACE refused'); END""",
]
SQLITE_REMOVE = [
    "DROP TRIGGER IF EXISTS ledger_event_no_update",
    "DROP TRIGGER IF EXISTS ledger_event_no_delete",
    "DROP TRIGGER IF EXISTS ledger_event_no_replace",
]

POSTGRES_INSTALL = [
    """CREATE OR REPLACE FUNCTION ledger_event_refuse_change() RETURNS trigger AS $$
       BEGIN RAISE EXCEPTION 'ledger_event is append-only: % refused', TG_OP; END;
       $$ LANGUAGE plpgsql""",
    f"""CREATE TRIGGER ledger_event_no_update_delete BEFORE UPDATE OR DELETE ON {TABLE}
        FOR EACH ROW EXECUTE FUNCTION ledger_event_refuse_change()""",
    f"""CREATE TRIGGER ledger_event_no_truncate BEFORE TRUNCATE ON {TABLE}
        FOR EACH STATEMENT EXECUTE FUNCTION ledger_event_refuse_change()""",
]
POSTGRES_REMOVE = [
    f"DROP TRIGGER IF EXISTS ledger_event_no_update_delete ON {TABLE}",
    f"DROP TRIGGER IF EXISTS ledger_event_no_truncate ON {TABLE}",
]


def _statements(vendor: str, install: bool) -> list[str]:
    if vendor == "sqlite":
        return SQLITE_INSTALL if install else SQLITE_REMOVE
    if vendor == "postgresql":
        return POSTGRES_INSTALL if install else POSTGRES_REMOVE
    raise NotImplementedError(f"no append-only guard for database vendor {vendor!r}; use SQLite or PostgreSQL")


def install_guards(connection) -> None:
    with connection.cursor() as cursor:
        for statement in _statements(connection.vendor, install=True):
            cursor.execute(statement)


def remove_guards(connection) -> None:
    with connection.cursor() as cursor:
        for statement in _statements(connection.vendor, install=False):
            cursor.execute(statement)
