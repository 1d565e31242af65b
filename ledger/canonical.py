"""The hashing rule of the chain, shared by the ledger and the standalone export verifier.

Deliberately free of Django: `python -m ledger.verify_export` must run with only the
standard library and rfc8785 installed.
"""
from __future__ import annotations

import hashlib
from typing import Any

import rfc8785

EVENT_DOMAIN_TAG = b"forgestencil-ledger/event/v1\x00"
CHECKPOINT_DOMAIN_TAG = b"forgestencil-ledger/checkpoint/v1\x00"
GENESIS_HASH = "0" * 64

# The fields of an event that its hash covers, in the order they are documented.
HASHED_FIELDS = (
    "position",
    "event_id",
    "stream",
    "version",
    "type",
    "schema_version",
    "payload",
    "actor",
    "recorded_at",
    "origin",
)


def canonical_json(value: Any) -> str:
    """RFC 8785 canonical JSON text: the exact bytes that get hashed and stored."""
    return rfc8785.dumps(value).decode("utf-8")


def event_body(fields: dict[str, Any]) -> str:
    missing = [name for name in HASHED_FIELDS if name not in fields]
    if missing:
        raise KeyError(f"event fields missing: {', '.join(missing)}")
    return canonical_json({name: fields[name] for name in HASHED_FIELDS})


def chain_hash(prev_hash: str, body: str) -> str:
    return hashlib.sha256(EVENT_DOMAIN_TAG + prev_hash.encode("ascii") + body.encode("utf-8")).hexdigest()


def checkpoint_message(ledger_id: str, head_position: int, head_hash: str) -> bytes:
    """What a checkpoint signature covers: one ledger's head at one position."""
    return CHECKPOINT_DOMAIN_TAG + canonical_json(
        {"ledger_id": ledger_id, "head_position": head_position, "head_hash": head_hash}
    ).encode("utf-8")
