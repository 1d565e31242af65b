"""Event types owned by the ledger itself: identity, checkpoints, and the reviewer's verdicts
on results (retraction, downgrade, sign-off) that every other app's results are subject to."""
from __future__ import annotations

from typing import Annotated, Optional

from pydantic import Field, StringConstraints

from .event_types import Payload, event_type

NonEmpty = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
Hex64 = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
ResultKey = Annotated[str, StringConstraints(min_length=1, max_length=255, pattern=r"^\S+$")]


@event_type("LedgerInitialised", owner="ledger")
class LedgerInitialised(Payload):
    ledger_id: Annotated[str, StringConstraints(pattern=r"^[0-9a-f-]{36}$")]
    name: NonEmpty


@event_type("CheckpointSigned", owner="ledger")
class CheckpointSigned(Payload):
    ledger_id: Annotated[str, StringConstraints(pattern=r"^[0-9a-f-]{36}$")]
    head_position: int = Field(ge=1)
    head_hash: Hex64
    public_key: NonEmpty
    signature: NonEmpty


class Place(Payload):
    """Where an event stood in another ledger: its position there and that ledger's hash of it."""

    event_id: Annotated[str, StringConstraints(pattern=r"^[0-9a-f-]{36}$")]
    ledger_id: Annotated[str, StringConstraints(pattern=r"^[0-9a-f-]{36}$")]
    position: int = Field(ge=1)
    hash: Hex64


@event_type("ImportedPlacesRecorded", owner="ledger")
class ImportedPlacesRecorded(Payload):
    """An import reached events this ledger already held by another way (ledger.transfer): their
    places in the ledgers that passed them on this time, which those ledgers' checkpoints may sign
    and the events' own origins do not hold."""

    places: list[Place] = Field(min_length=1)


@event_type("ResultRetracted", owner="ledger")
class ResultRetracted(Payload):
    result: ResultKey
    reason: NonEmpty
    rerun: Optional[str] = None  # event id of the re-run verdict that found the result no longer holds
    revises: Optional[str] = None  # event id of the verdict this retraction revises


@event_type("ResultDowngraded", owner="ledger")
class ResultDowngraded(Payload):
    result: ResultKey
    from_value: float
    to_value: float
    unit: NonEmpty = "x"
    reason: NonEmpty
    rerun: Optional[str] = None
    revises: Optional[str] = None


class Standing(Payload):
    """A result's speedup as one measurement found it, with the bound it was over."""

    speedup: Optional[float] = None
    speedup_ci: Optional[list[float]] = None
    bound: Optional[dict] = None  # name, label, precision, median, identity (measurement.reports)
    baselines: Optional[dict] = None  # every public baseline of that measurement, with the speedup over it


# v2 (issue 15): a revision says what the result was and what the re-run measured, each with its
# bound, so pages show a downgraded value with the CI of the same measurement and history reads
# "was 1.85x over pystencils 2.0; 0.77x over composed(star_1 admitted x8)".
@event_type("ResultRetracted", owner="ledger", version=2,
            upcast_from_previous=lambda payload: {**payload, "was": None, "measured": None})
class ResultRetractedV2(ResultRetracted):
    was: Optional[Standing] = None
    measured: Optional[Standing] = None


@event_type("ResultDowngraded", owner="ledger", version=2,
            upcast_from_previous=lambda payload: {**payload, "was": None, "measured": None})
class ResultDowngradedV2(ResultDowngraded):
    was: Optional[Standing] = None
    measured: Optional[Standing] = None


@event_type("AuditSignedOff", owner="ledger")
class AuditSignedOff(Payload):
    result: ResultKey
    result_version: int = Field(ge=1)
    reviewer: NonEmpty
    comment: str = ""


class FrozenTable(Payload):
    sha256: Hex64
    rows: int = Field(ge=0)
    csv: str


@event_type("PublicationFrozen", owner="ledger")
class PublicationFrozen(Payload):
    """A snapshot of the published tables: per table the CSV of its publishable rows and its
    sha256, so a table exported later can be checked against what was frozen."""

    tables: dict[str, FrozenTable]


class SignedHead(CheckpointSigned):
    """A checkpoint's signed head, standing alone, with where the checkpoint itself stands
    (ledger.checkpoints.signed_head)."""

    checkpoint_position: int = Field(ge=2)


@event_type("PublicationFrozen", owner="ledger", version=2, upcast_from_previous=lambda payload: {**payload, "witness": None})
class PublicationFrozenV2(Payload):
    """Version 2 adds the signed head of the ledger the tables were frozen from (checkpointed just
    before): whoever keeps a copy of the freeze can later show the chain reached that far."""

    tables: dict[str, FrozenTable]
    witness: Optional[SignedHead]
