"""Reviewers' actions on results: manual retraction, sign-off, publication freeze.

Each action is one event whose actor is the reviewer ("user:<name>"), appended to the result's
own stream so that a result's whole history (verdicts, revisions, sign-offs) reads in one place.
The ledger does not know which results exist (they belong to measurement and appgate): callers
check that first; here only what the ledger itself holds is checked.

A result's *version* counts the events that set its value: each admitted verdict (a better kernel
admitted for the same case, an app's gate admitting again) and each revision (ResultRetracted /
ResultDowngraded), kept by the `result_versions` projection. A sign-off names the version it saw,
so any of those leaves earlier sign-offs on an older version: publishability starts again from zero.
"""
from __future__ import annotations

import csv
import hashlib
import io

from django.db import transaction

from .checkpoints import sign_checkpoint, signed_head
from .decide import StillMoving, append_decided
from .models import Event, ResultStatus, ResultVersion, SignOff
from .records import RecordedEvent
from .services import NewEvent, append

PUBLICATION_STREAM = "publication"
REVIEWERS_NEEDED = 2
# The longest sign-off comment or retraction reason, in characters. Events are kept forever and
# shown on every page of the result: the one limit for the form, the API and the commands.
MAX_TEXT_CHARS = 4000


class ReviewError(Exception):
    """A reviewer action that cannot be recorded; the message says why."""


def current_version(result: str) -> int:
    return ResultVersion.objects.filter(result=result).values_list("version", flat=True).first() or 1


def _status(result: str) -> str | None:
    return ResultStatus.objects.filter(result=result).values_list("status", flat=True).first()


def _check_length(text: str, what: str) -> None:
    if len(text) > MAX_TEXT_CHARS:
        raise ReviewError(f"{what} is {len(text)} characters long; the limit is {MAX_TEXT_CHARS}")


def retract(result: str, reason: str, actor: str) -> RecordedEvent:
    """Appended at the result stream's version read with its status (ledger.decide): a retraction
    recorded meanwhile (a re-run's, another reviewer's) is read again and this one refused."""
    if not (reason or "").strip():
        raise ReviewError("a retraction needs a reason")
    _check_length(reason.strip(), "the reason")

    def decide() -> list[NewEvent]:
        if _status(result) == "retracted":
            raise ReviewError(f"{result} is already retracted")
        return [NewEvent(stream=result, type="ResultRetracted", actor=actor,
                         payload={"result": result, "reason": reason.strip()})]

    return _recorded(result, decide)


def sign_off(result: str, reviewer: str, comment: str = "") -> RecordedEvent:
    """Sign off the result's current version (a second sign-off by the same reviewer is
    recorded but counts once). Appended at the result stream's version read with its status and
    version (ledger.decide): an admission or revision landing meanwhile is read again, so a
    sign-off never names a version that was already replaced, nor signs a retracted result."""
    _check_length(comment, "the comment")

    def decide() -> list[NewEvent]:
        if _status(result) == "retracted":
            raise ReviewError(f"{result} is retracted: there is nothing to sign off")
        return [NewEvent(stream=result, type="AuditSignedOff", actor=reviewer, payload={
            "result": result, "result_version": current_version(result), "reviewer": reviewer, "comment": comment})]

    return _recorded(result, decide)


def _recorded(result: str, decide) -> RecordedEvent:
    try:
        return append_decided(result, decide)[0]
    except StillMoving as error:
        raise ReviewError(str(error)) from None


def signoff_state(result: str) -> dict:
    version = current_version(result)
    reviewers = list(SignOff.objects.filter(result=result, result_version=version).order_by("position")
                     .values_list("reviewer", flat=True))
    return {"version": version, "reviewers": reviewers,
            "publishable": _status(result) != "retracted" and len(set(reviewers)) >= REVIEWERS_NEEDED}


def signoff_states(results: list[str] | None = None, prefix: str = "") -> dict[str, dict]:
    """signoff_state for many results in two queries (tables list hundreds of results)."""
    statuses = ResultStatus.objects.filter(result__startswith=prefix)
    versions = ResultVersion.objects.filter(result__startswith=prefix)
    signoffs = SignOff.objects.filter(result__startswith=prefix)
    if results is not None:
        statuses, versions = statuses.filter(result__in=results), versions.filter(result__in=results)
        signoffs = signoffs.filter(result__in=results)
    status_of = dict(statuses.values_list("result", "status"))
    current = {r: (version, status_of.get(r)) for r, version in versions.values_list("result", "version")}
    current.update({r: (1, status) for r, status in status_of.items() if r not in current})
    reviewers: dict[str, list[str]] = {}
    for result, version, reviewer in signoffs.order_by("position").values_list("result", "result_version", "reviewer"):
        if version == current.get(result, (1, None))[0]:
            reviewers.setdefault(result, []).append(reviewer)
    states = {}
    for result in (results if results is not None else set(current) | set(reviewers)):
        version, status = current.get(result, (1, None))
        names = reviewers.get(result, [])
        states[result] = {"version": version, "reviewers": names,
                          "publishable": status != "retracted" and len(set(names)) >= REVIEWERS_NEEDED}
    return states


def table_hash(csv_text: str) -> str:
    return hashlib.sha256(csv_text.encode()).hexdigest()


def freeze(actor: str, tables: dict[str, str]) -> RecordedEvent:
    """Record a PublicationFrozen event from each table's CSV of publishable rows (the caller,
    frontend.publication, renders the tables: the ledger does not know their columns). The head
    is signed first and the freeze carries that signed head: a tail witness for whoever keeps it."""
    if not tables:
        raise ReviewError("a freeze needs at least one table")
    with transaction.atomic():
        witness = signed_head(sign_checkpoint(actor))
        return append(NewEvent(stream=PUBLICATION_STREAM, type="PublicationFrozen", actor=actor, payload={"tables": {
            name: {"sha256": table_hash(text), "rows": max(0, len(list(csv.reader(io.StringIO(text)))) - 1), "csv": text}
            for name, text in tables.items()}, "witness": witness}))


def frozen(position: int) -> RecordedEvent:
    row = Event.objects.filter(position=position, type="PublicationFrozen").first()
    if row is None:
        raise ReviewError(f"no publication freeze at position {position}")
    return RecordedEvent.from_body(row.body, row.prev_hash, row.hash)


def check_freeze(position: int, tables: dict[str, str]) -> dict:
    """Compare the frozen hash of each table with the hash of `tables` (its CSV now)."""
    event = frozen(position)
    return {"position": position, "frozen_at": event.recorded_at, "actor": event.actor, "witness": event.data["witness"], "tables": {
        name: {"frozen": entry["sha256"], "now": table_hash(tables.get(name, "")),
               "matches": entry["sha256"] == table_hash(tables.get(name, ""))}
        for name, entry in event.data["tables"].items()}}


def freeze_events() -> list[RecordedEvent]:
    return [RecordedEvent.from_body(body, prev, hash_) for body, prev, hash_ in
            Event.objects.filter(type="PublicationFrozen").order_by("-position").values_list("body", "prev_hash", "hash")]
