"""Which checkpoint signatures count: keys the reader configured, never a key found in the data.

A signature alone proves nothing: anyone can make a key pair and sign a rewritten history with
it. A checkpoint counts only when its public key is one the reader trusts: the service's own key,
LEDGER_TRUSTED_PUBLIC_KEYS, a keys file (the committed fixtures/keys/trusted_keys.txt lists the
project's publication key). A checkpoint by any other key is accepted only where a checkpoint by
a trusted key signs a head at or past it: the trusted signer vouched for every event up to there,
that checkpoint included (a device machine's throw-away key, later re-signed by the publication
key). Any other checkpoint by an unknown key is refused, naming its fingerprint.

Shared by `ledger verify`, `ledger import` and the standalone `python -m ledger.verify_export`,
so this module imports neither Django nor anything that does.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from .canonical import checkpoint_message

# The project's publication key(s): what a reviewer trusts by default (docs/architecture.md).
DEFAULT_KEYS_FILE = Path(__file__).resolve().parent.parent / "fixtures" / "keys" / "trusted_keys.txt"
# How the service's messages (`verify`, `import`, `restore`) say to trust a key.
SERVICE_HOW_TO_TRUST = ("add it to LEDGER_TRUSTED_PUBLIC_KEYS or to the keys file LEDGER_TRUSTED_KEYS_FILE names "
                        "(default fixtures/keys/trusted_keys.txt)")


class TrustError(ValueError):
    """A key or keys file that cannot be read as Ed25519 public keys."""


def parse_public_key(text: str) -> str:
    """The key as canonical base64 of its 32 raw bytes; TrustError when it is not one."""
    try:
        raw = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise TrustError(f"{text.strip()!r} is not base64") from None
    if len(raw) != 32:
        raise TrustError(f"{text.strip()!r} is {len(raw)} bytes, an Ed25519 public key is 32")
    return base64.b64encode(raw).decode("ascii")


def fingerprint(public_key: str) -> str:
    """A short name for a key in messages: sha256 of its raw bytes (of the text when it is not base64)."""
    try:
        raw = base64.b64decode(public_key, validate=True)
    except (binascii.Error, ValueError):
        raw = public_key.encode("utf-8", "replace")
    return "ed25519:" + hashlib.sha256(raw).hexdigest()[:16]


def read_keys_file(path: Path) -> set[str]:
    """One base64 public key per line, then optional words naming it; `#` starts a comment."""
    keys = set()
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        words = line.split("#", 1)[0].split()
        if words:
            try:
                keys.add(parse_public_key(words[0]))
            except TrustError as exc:
                raise TrustError(f"{path}:{number}: {exc}") from None
    return keys


def trusted_keys(keys: Iterable[str], files: Iterable[Path]) -> set[str]:
    trusted = {parse_public_key(key) for key in keys}
    for path in files:
        trusted |= read_keys_file(path)
    return trusted


def origin_places(origin: dict) -> list[tuple[tuple[str, int], str]]:
    """Every ((ledger, position), hash) an imported event held before this ledger: where it was
    first recorded, then each ledger it passed through on its way here (`via`, ledger.transfer).
    A checkpoint imported from a ledger that had itself imported this event may sign it as its head
    under that ledger's position and hash, not the first one's."""
    places = [((origin["ledger_id"], origin["position"]), origin["hash"])]
    return places + [((hop["ledger_id"], hop["position"]), hop["hash"]) for hop in origin.get("via", ())]


def places_held(event_type: str, origin: dict | None, payload: dict) -> list[tuple[tuple[str, int], str]]:
    """The ((ledger, position), hash) places an event vouches for, which imported checkpoints may
    sign: an imported event's own (origin_places), and those an `ImportedPlacesRecorded` event holds
    for events an import reached a second way, whose origins (fixed when they came) lack them."""
    places = origin_places(origin) if origin is not None else []
    if event_type == "ImportedPlacesRecorded":
        places += [((place["ledger_id"], place["position"]), place["hash"]) for place in payload["places"]]
    return places


def signature_valid(public_key: str, signature: str, ledger_id: str, head_position: int, head_hash: str) -> bool:
    try:
        key = Ed25519PublicKey.from_public_bytes(base64.b64decode(public_key, validate=True))
        key.verify(base64.b64decode(signature, validate=True), checkpoint_message(ledger_id, head_position, head_hash))
    except (InvalidSignature, ValueError, TypeError):
        return False
    return True


@dataclass(frozen=True)
class Signed:
    """One checkpoint, as the trust rule sees it."""

    where: str  # how messages name it: "line 12", "position 12"
    ledger_id: str  # the ledger whose head it signs
    at: int  # its own position in that ledger (its origin position when imported)
    local: int  # its position in the file or database being checked
    head_position: int
    public_key: str
    own: bool  # signs the checked file's or database's own ledger (not imported)


def first_uncovered(checkpoints: list[Signed], trusted: set[str]) -> Signed | None:
    """The first checkpoint by a key not in `trusted` that no trusted checkpoint vouches for: none
    of this ledger's own trusted checkpoints signs a head at or past its position here, and no
    trusted checkpoint of the ledger it signs reaches its position there."""
    own_cover = max((c.head_position for c in checkpoints if c.own and c.public_key in trusted), default=0)
    cover: dict[str, int] = {}
    for c in checkpoints:
        if c.public_key in trusted:
            cover[c.ledger_id] = max(cover.get(c.ledger_id, 0), c.head_position)
    for c in checkpoints:
        if c.public_key not in trusted and c.local > own_cover and c.at > cover.get(c.ledger_id, 0):
            return c
    return None


def covered_unknown(checkpoints: list[Signed], trusted: set[str]) -> list[Signed]:
    return [c for c in checkpoints if c.public_key not in trusted]


def untrusted_message(checkpoint: Signed, how_to_trust: str) -> str:
    return (
        f"checkpoint of ledger {checkpoint.ledger_id} at head #{checkpoint.head_position} is signed by key "
        f"{fingerprint(checkpoint.public_key)} ({checkpoint.public_key}), which is not trusted here, and no checkpoint "
        f"by a trusted key covers it; if the ledger's operator confirms this key is theirs, {how_to_trust}"
    )
