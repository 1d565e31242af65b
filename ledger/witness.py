"""The tail witness: how far the chain is known to have reached, kept outside the database.

Hashes and checkpoints catch an edit inside the chain, but not a cut: delete the last events,
the last checkpoint with them, and what is left is a shorter chain that verifies. Evidence that
the chain once reached further:

- the witness file, var/witness/<ledger id>.json (0600 in a 0700 folder), rewritten atomically
  and only ever forward: the newest signed head (each checkpoint writes it) and the head of the
  newest passing `verify`;
- the `VerificationRun` rows of passing verifies (in the database: a careless cut leaves them);
- projection rows and positions that name events past the last one (the append service writes
  them in the event's own transaction, so they cannot be ahead of a chain that was never cut).

A signed head also travels with every export (its last line) and every publication freeze, so
copies held elsewhere can show a cut even when this host's witness file was rewritten too.
`verify` fails on any of these; `rebuild`, which would erase the projections' evidence, refuses.
"""
from __future__ import annotations

import fcntl
import json
import logging
import os
from dataclasses import dataclass
from datetime import datetime, timezone as dt_timezone
from pathlib import Path
from typing import Any, Callable, Iterable

from django.conf import settings
from django.db import models

from .custody import private_dir, read_private, replace_private
from .errors import LedgerError
from .models import Event, KnownLedger, ProjectionState, VerificationRun
from .projection_base import Projection, registered
from .trust import SERVICE_HOW_TO_TRUST, fingerprint, signature_valid
from .verify_export import ExportError, read_export, require_signed_head, verify_export

log = logging.getLogger("ledger.witness")
DO_NOT_REBUILD = ("the events were deleted, or rolled back after their checkpoint was witnessed: restore them "
                  "from an export or a backup; do not rebuild the projections, which still hold evidence of them")


def folder() -> Path:
    return Path(settings.VAR_DIR) / "witness"


def path_for(ledger_id: str) -> Path:
    return folder() / f"{ledger_id}.json"


def read(ledger_id: str | None) -> dict[str, Any]:
    """The witness of this ledger ({} when there is none)."""
    if ledger_id is None or not path_for(ledger_id).exists():
        return {}
    try:
        return json.loads(read_private(path_for(ledger_id)))
    except json.JSONDecodeError as exc:
        raise LedgerError(f"the witness {path_for(ledger_id)} is not JSON ({exc}): it was edited") from None


def _advance(ledger_id: str, section: str, entry: dict[str, Any], order: str) -> None:
    """Set `section` to `entry` unless the file already holds one at least as far (by `order`),
    under an exclusive lock so that two writers never move it backwards."""
    lock = private_dir(folder()) / f".{ledger_id}.lock"
    fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        current = read(ledger_id)
        if current.get(section, {}).get(order, 0) >= entry[order]:
            return
        current.update({"ledger_id": ledger_id, section: entry})
        replace_private(path_for(ledger_id), json.dumps(current, indent=1, sort_keys=True) + "\n")
    finally:
        os.close(fd)


def record_signed(head: dict[str, Any]) -> None:
    _advance(head["ledger_id"], "signed", head, "checkpoint_position")


def record_verified(ledger_id: str, position: int, head_hash: str) -> None:
    _advance(ledger_id, "verified", {"head_position": position, "head_hash": head_hash,
                                     "at": datetime.now(dt_timezone.utc).isoformat(timespec="seconds")}, "head_position")


@dataclass(frozen=True)
class TailProblem:
    position: int  # the first position missing or differing
    problem: str
    cut: bool  # the chain is shorter than the evidence shows (never advise a rebuild then)

    def message(self) -> str:
        return f"{self.problem}; {DO_NOT_REBUILD}" if self.cut else self.problem


@dataclass
class Evidence:
    """What shows how far the chain reached, read before verify's snapshot begins (a checkpoint
    committed after the snapshot must not look missing)."""

    ledger_id: str | None
    witness: dict[str, Any]  # this host's witness file
    signed: list[tuple[dict[str, Any], str]]  # signed heads, each with where it was read


def evidence(held: Iterable[Path] = (), trusted: set[str] = frozenset()) -> Evidence:
    """This ledger's witness file, and the signed heads of `held` (copies kept elsewhere: an
    export, whose last line is its signed head, or a copy of a witness file)."""
    ledger_id = KnownLedger.objects.filter(imported=False).values_list("ledger_id", flat=True).first()
    witness = read(ledger_id)
    signed = [(witness["signed"], str(path_for(ledger_id)))] if "signed" in witness else []
    return Evidence(ledger_id, witness, signed + [(_held_head(path, trusted), str(path)) for path in held])


def _held_head(path: Path, trusted: set[str]) -> dict[str, Any]:
    try:
        if path.suffix != ".jsonl":
            return json.loads(path.read_text(encoding="utf-8"))["signed"]
        summary = verify_export(read_export(path))
        require_signed_head(summary, trusted, SERVICE_HOW_TO_TRUST)
        return {**summary.last["payload"], "checkpoint_position": summary.last["position"]}
    except ExportError as exc:
        raise LedgerError(f"{path}: {exc}") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise LedgerError(f"{path} is neither an export nor a witness file: {exc}") from None


def tail_problem(found: Evidence, head: int, trusted: set[str], hash_at: Callable[[int], str | None],
                 scan_rows: bool = True) -> TailProblem | None:
    """What is wrong when anything shows the chain reached past `head` or held other hashes than
    it does now; None when nothing does. `scan_rows=False` leaves the projection rows to the
    caller (verify's replay reads them all anyway: rows_ahead on the rows that differ)."""
    for signed, source in found.signed:
        problem = _signed_problem(found.ledger_id, signed, source, head, trusted, hash_at)
        if problem:
            return problem
    claims = []
    verified = found.witness.get("verified")
    if verified:
        claims.append((verified["head_position"], verified["head_hash"], f"verify passed at head {verified['head_position']} "
                       f"on {verified['at']} (witness {path_for(found.ledger_id)})"))
    run = VerificationRun.objects.filter(status=VerificationRun.Status.PASSED).order_by("-head_position").first()
    if run is not None and run.head_position:
        claims.append((run.head_position, run.head_hash, f"verification run #{run.pk} passed at head {run.head_position} "
                       f"on {run.finished_at:%Y-%m-%d %H:%M:%S} UTC"))
    for position, head_hash, what in claims:
        if position > head:
            return TailProblem(head + 1, f"{_missing(head, position)}: the database ends at {head} but {what} "
                                         f"(hash {head_hash[:16]}…)", cut=True)
        if hash_at(position) != head_hash:
            return TailProblem(position, f"history differs from what {what} saw: the hash at position {position} "
                                         f"is not {head_hash[:16]}… (events rewritten)", cut=False)
    return _projections_problem(head, scan_rows)


def _signed_problem(ledger_id: str | None, signed: dict, source: str, head: int, trusted: set[str],
                    hash_at) -> TailProblem | None:
    position, head_position, head_hash = signed["checkpoint_position"], signed["head_position"], signed["head_hash"]
    if signed["ledger_id"] != ledger_id:
        return TailProblem(1, f"the witness {source} signs ledger {signed['ledger_id']}; this database holds ledger "
                              f"{ledger_id} (replaced?)", cut=False)
    if signed["public_key"] not in trusted or not signature_valid(
            signed["public_key"], signed["signature"], signed["ledger_id"], head_position, head_hash):
        return TailProblem(head + 1, f"the witness {source} is not signed by a trusted key (key "
                                     f"{fingerprint(signed['public_key'])}): it was edited, or the key that signed it "
                                     "is no longer trusted", cut=False)
    if head < position:
        return TailProblem(head + 1, f"{_missing(head, position)}: the database ends at {head} but the witness signed "
                                     f"head {head_position} (hash {head_hash[:16]}…) in the checkpoint at position "
                                     f"{position} ({source})", cut=True)
    if hash_at(head_position) != head_hash:
        return TailProblem(head_position, f"history differs from the witness {source}: it signed head "
                                          f"{head_position} with hash {head_hash[:16]}…, the database holds another "
                                          "event there (events rewritten)", cut=False)
    return None


def _missing(head: int, reached: int) -> str:
    return f"position {reached} missing" if reached == head + 1 else f"positions {head + 1}-{reached} missing"


def _projections_problem(head: int, scan_rows: bool) -> TailProblem | None:
    """Projection positions and rows that name events past `head`."""
    applied = ProjectionState.objects.filter(last_position__gt=head).order_by("-last_position").first()
    if applied is not None:
        return TailProblem(head + 1, f"{_missing(head, applied.last_position)}: the database ends at {head} but "
                                     f"projection {applied.name} has applied events up to {applied.last_position}", cut=True)
    for projection in registered() if scan_rows else ():
        for name in _position_fields(projection.model):
            row = projection.model.objects.filter(**{f"{name}__gt": head}).order_by(f"-{name}").values("pk", name).first()
            if row is not None:
                return _row_ahead(head, projection.name, row["pk"], row[name])
    return None


def rows_ahead(projection: Projection, rows: dict[Any, dict[str, Any]], head: int) -> TailProblem | None:
    """The same check on rows already read (verify's live rows of a projection that differs)."""
    names = _position_fields(projection.model)
    found = max(((row[name], key) for key, row in rows.items() for name in names if (row[name] or 0) > head), default=None)
    return None if found is None else _row_ahead(head, projection.name, found[1], found[0])


def _row_ahead(head: int, projection: str, key: Any, position: int) -> TailProblem:
    return TailProblem(head + 1, f"{_missing(head, position)}: the database ends at {head} but row {key!r} of "
                                 f"projection {projection} was written by the event at position {position}", cut=True)


def _position_fields(model: type[models.Model]) -> list[str]:
    """The columns that hold a position of this ledger's events (a checkpoint's head_position
    may be another ledger's)."""
    return [f.name for f in model._meta.concrete_fields
            if isinstance(f, models.BigIntegerField) and (f.name == "position" or f.name.endswith("_position"))
            and f.name != "head_position"]


def check_before_rebuild(override: str | None, actor: str, trusted: set[str]) -> None:
    """Refuse to replace the projections while they, or the witness, show events the chain lacks
    (a rebuild would erase that evidence); with an override, log it and go on."""
    found = evidence(trusted=trusted)
    position = Event.objects.order_by("-position").values_list("position", flat=True).first() or 0

    def hash_at(p: int) -> str | None:
        return Event.objects.filter(position=p).values_list("hash", flat=True).first()

    problem = tail_problem(found, position, trusted, hash_at)
    if problem is None:
        return
    if not override:
        raise LedgerError(f"rebuild refused: {problem.problem}. A rebuild replaces the projections, which may hold "
                          "the only evidence of what the events were: restore the events first, or pass "
                          "--override-tail-check REASON to rebuild anyway (logged)")
    entry = {"at": datetime.now(dt_timezone.utc).isoformat(timespec="seconds"), "actor": actor, "reason": override,
             "ledger_id": found.ledger_id, "database_head": position, "problem": problem.problem}
    log.warning("rebuild despite tail evidence: %s", entry)
    overrides = private_dir(folder()) / "overrides.jsonl"
    fd = os.open(overrides, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry) + "\n")
