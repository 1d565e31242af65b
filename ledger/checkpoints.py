"""Signed checkpoints: an Ed25519 signature over (ledger id, head position, head hash).

A checkpoint makes a rewrite of history detectable even by someone who recomputes every
hash after an edit: they would also need the signing key, which is why the key file is the
service user's alone (ledger.custody) and why readers trust only configured public keys
(ledger.trust), never one found in the data. Each checkpoint's signed head is also written
outside the database (ledger.witness), so deleting the tail, checkpoint included, is seen.
"""
from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from django.conf import settings
from django.db import transaction

from . import witness
from .canonical import checkpoint_message
from .custody import create_private, private_dir, read_private
from .errors import LedgerError
from .models import Event
from .records import RecordedEvent
from .selectors import local_ledger_id
from .services import NewEvent, append, head, lock_chain
from .trust import TrustError, trusted_keys

CHECKPOINT_STREAM = "ledger/checkpoints"


def signing_key() -> Ed25519PrivateKey:
    """The key from LEDGER_SIGNING_KEY, else the embedded default's key file, made once, mode
    0600 in a 0700 folder; refused when another user could read it (ledger.custody)."""
    private_dir(Path(settings.VAR_DIR))  # the key file, the witness, the SQLite file: the service user's alone
    seed_b64 = settings.LEDGER_SIGNING_KEY
    if not seed_b64:
        path = Path(settings.LEDGER_SIGNING_KEY_FILE)
        create_private(path, base64.b64encode(os.urandom(32)).decode("ascii"))
        seed_b64 = read_private(path).strip()
    try:
        seed = base64.b64decode(seed_b64, validate=True)
        return Ed25519PrivateKey.from_private_bytes(seed)
    except ValueError as exc:
        raise LedgerError(f"LEDGER_SIGNING_KEY must be a base64-encoded 32-byte Ed25519 seed: {exc}") from None


def public_key_text(key: Ed25519PrivateKey) -> str:
    raw = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return base64.b64encode(raw).decode("ascii")


def trusted_public_keys() -> set[str]:
    """The service's own key, LEDGER_TRUSTED_PUBLIC_KEYS (older keys after a rotation, other
    ledgers' keys) and the keys file LEDGER_TRUSTED_KEYS_FILE (empty: none)."""
    files = [Path(settings.LEDGER_TRUSTED_KEYS_FILE)] if settings.LEDGER_TRUSTED_KEYS_FILE else []
    try:
        return {public_key_text(signing_key())} | trusted_keys(settings.LEDGER_TRUSTED_PUBLIC_KEYS, files)
    except (OSError, TrustError) as exc:
        raise LedgerError(f"the trusted public keys cannot be read: {exc}") from None


def signed_head(checkpoint: RecordedEvent) -> dict[str, Any]:
    """What a checkpoint proves, standing alone: the witness file's and a freeze's copy of it."""
    data = checkpoint.data
    return {"ledger_id": data["ledger_id"], "head_position": data["head_position"], "head_hash": data["head_hash"],
            "public_key": data["public_key"], "signature": data["signature"], "checkpoint_position": checkpoint.position}


def sign_checkpoint(actor: str) -> RecordedEvent:
    """Sign the head. When the head is already a checkpoint by this key, return it: nothing new to
    sign. A head that is another key's checkpoint (a device machine's, before re-signing with the
    publication key) is signed like any other event."""
    key = signing_key()
    checkpoint = _sign(key, actor)
    # After the commit of the checkpoint (or, inside a caller's transaction, before its commit:
    # were that rolled back, verify would report the witness ahead of the database, never hide a cut).
    witness.record_signed(signed_head(checkpoint))
    return checkpoint


def _sign(key: Ed25519PrivateKey, actor: str) -> RecordedEvent:
    with transaction.atomic():
        lock_chain()
        ledger_id = local_ledger_id()
        position, head_hash = head()
        row = Event.objects.get(position=position)
        latest = RecordedEvent.from_body(row.body, row.prev_hash, row.hash)
        if latest.type == "CheckpointSigned" and latest.origin is None and latest.data["public_key"] == public_key_text(key):
            return latest
        signature = key.sign(checkpoint_message(ledger_id, position, head_hash))
        return append(
            NewEvent(
                stream=CHECKPOINT_STREAM,
                type="CheckpointSigned",
                actor=actor,
                payload={
                    "ledger_id": ledger_id,
                    "head_position": position,
                    "head_hash": head_hash,
                    "public_key": public_key_text(key),
                    "signature": base64.b64encode(signature).decode("ascii"),
                },
            )
        )
