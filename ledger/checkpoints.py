"""Signed checkpoints: an Ed25519 signature over (ledger id, head position, head hash).

A checkpoint makes a rewrite of history detectable even by someone who recomputes every
hash after an edit: they would also need the signing key.
"""
from __future__ import annotations

import base64
import os

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from django.conf import settings
from django.db import transaction

from .canonical import checkpoint_message
from .errors import LedgerError
from .models import Event
from .records import RecordedEvent
from .selectors import local_ledger_id
from .services import NewEvent, append, head, lock_chain

CHECKPOINT_STREAM = "ledger/checkpoints"


def signing_key() -> Ed25519PrivateKey:
    """The key from LEDGER_SIGNING_KEY, else the embedded default's key file (made once)."""
    seed_b64 = settings.LEDGER_SIGNING_KEY
    if not seed_b64:
        path = settings.LEDGER_SIGNING_KEY_FILE
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as handle:
                handle.write(base64.b64encode(os.urandom(32)).decode("ascii"))
        seed_b64 = path.read_text().strip()
    try:
        seed = base64.b64decode(seed_b64, validate=True)
        return Ed25519PrivateKey.from_private_bytes(seed)
    except ValueError as exc:
        raise LedgerError(f"LEDGER_SIGNING_KEY must be a base64-encoded 32-byte Ed25519 seed: {exc}") from None


def public_key_text(key: Ed25519PrivateKey) -> str:
    raw = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return base64.b64encode(raw).decode("ascii")


def trusted_public_keys() -> set[str]:
    return {public_key_text(signing_key()), *settings.LEDGER_TRUSTED_PUBLIC_KEYS}


def signature_valid(public_key: str, signature: str, ledger_id: str, head_position: int, head_hash: str) -> bool:
    try:
        key = Ed25519PublicKey.from_public_bytes(base64.b64decode(public_key, validate=True))
        key.verify(base64.b64decode(signature, validate=True), checkpoint_message(ledger_id, head_position, head_hash))
    except (InvalidSignature, ValueError):
        return False
    return True


def sign_checkpoint(actor: str) -> RecordedEvent:
    """Sign the head. When the head is already our own checkpoint, return it: nothing new to sign."""
    key = signing_key()
    with transaction.atomic():
        lock_chain()
        ledger_id = local_ledger_id()
        position, head_hash = head()
        row = Event.objects.get(position=position)
        latest = RecordedEvent.from_body(row.body, row.prev_hash, row.hash)
        if latest.type == "CheckpointSigned" and latest.origin is None:
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
