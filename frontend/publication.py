"""Publication: the published form of each table (its publishable rows as CSV) and the freezes
that record their hashes in the ledger (ledger.review.freeze / check_freeze, which do not know
the tables' columns). Pages and the API call `freeze` and `check_freeze` from here."""
from __future__ import annotations

import csv
import io

from ledger.records import RecordedEvent
from ledger import review

from .tables import APPLICATION_COLUMNS, OPERATOR_COLUMNS, application_rows, operator_rows, table_csv

TABLES = {
    "operator-cases": (operator_rows, OPERATOR_COLUMNS),
    "applications": (application_rows, APPLICATION_COLUMNS),
}


def published_csv(name: str, columns: list[str] | None = None) -> str:
    """The table's publishable rows, ordered by result key (so the hash depends on content only),
    in the table's columns or the given ones."""
    rows_of, known = TABLES[name]
    return table_csv([row for row in rows_of(sort="result") if row["publishable"]], columns or known)


def published_tables() -> dict[str, str]:
    return {name: published_csv(name) for name in TABLES}


def freeze(actor: str) -> RecordedEvent:
    return review.freeze(actor, published_tables())


def check_freeze(position: int) -> dict:
    """{"position", "tables": {name: {"frozen", "now", "matches"}}}: raises ReviewError when no
    freeze is recorded at that position. Each table is rendered now in the columns it was frozen
    with (its CSV header): a column added to the table since (issue 19 added device, roofline and
    sign-off columns) is not a change of what was published; a changed row or value still is."""
    frozen = review.frozen(position).data["tables"]
    return review.check_freeze(position, {name: published_csv(name, _frozen_columns(name, table["csv"]))
                                          for name, table in frozen.items() if name in TABLES})


def _frozen_columns(name: str, text: str) -> list[str] | None:
    """The frozen CSV's header when every column of it still exists (else the table's own, and the
    check says it differs)."""
    header = next(csv.reader(io.StringIO(text)), [])
    return header if header and set(header) <= set(TABLES[name][1]) else None


def frozen_csv(position: int, name: str) -> str:
    """A table exactly as it was frozen (its sha256 is in the same event)."""
    tables = review.frozen(position).data["tables"]
    if name not in tables:
        raise review.ReviewError(f"the freeze at #{position} has no table {name!r}; it has {', '.join(tables)}")
    return tables[name]["csv"]


def freezes() -> list[dict]:
    return [{"position": e.position, "actor": e.actor, "recorded_at": e.recorded_at, "hash": e.hash,
             "tables": {name: {"sha256": t["sha256"], "rows": t["rows"]} for name, t in e.data["tables"].items()}}
            for e in review.freeze_events()]
