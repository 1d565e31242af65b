"""The hashing rule of the chain, shared by the ledger and the standalone export verifier.

Deliberately free of Django: `python -m ledger.verify_export` must run with only the
standard library and rfc8785 installed.
"""
from __future__ import annotations

import hashlib
from json.encoder import encode_basestring
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

_SAFE_INT = 2**53 - 1  # rfc8785 refuses integers a double cannot hold exactly


def canonical_json(value: Any) -> str:
    """RFC 8785 canonical JSON text: the exact bytes that get hashed and stored.

    The rfc8785 library writes byte by byte in Python; sealing an event spent most of its time
    there (docs/ledger_benchmarks.md). `_text` writes the shapes events are made of about three
    times faster and hands every other value, with its error, to the library, whose output is
    context-free, so a delegated part fits the whole. tests/ledger/test_canonical.py checks the
    text is the library's, byte for byte, over every shipped export and over floats, code
    points and keys chosen where the two rules could part."""
    text = _text(value)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: the library raises its CanonicalizationError
        return _library(value)
    return text


def _library(value: Any) -> str:
    return rfc8785.dumps(value).decode("utf-8")


def _text(value: Any) -> str:
    """Exact built-in types only: a subclass may serialise differently, so it goes to the library."""
    kind = type(value)
    if kind is str:
        # json's C escaper: '"', '\\' and U+0000-U+001F only, with the escapes RFC 8785 uses
        return encode_basestring(value)
    if kind is dict and all(type(key) is str for key in value) and "".join(value).isascii():
        # ASCII keys: code point order is RFC 8785's order of UTF-16 code units
        return "{" + ",".join([encode_basestring(key) + ":" + _text(value[key]) for key in sorted(value)]) + "}"
    if kind is int and -_SAFE_INT <= value <= _SAFE_INT:
        return int.__repr__(value)
    if kind is float:
        return _float(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if kind is list or kind is tuple:
        return "[" + ",".join([_text(item) for item in value]) + "]"
    return _library(value)


def _float(value: float) -> str:
    """repr and ECMAScript's number text share the shortest round-trip digits; where repr has no
    exponent (1e-4 <= |x| < 1e16) the two differ only by repr's trailing '.0'. Zero is "0" (and
    -0.0 too), repr's exponent form is laid out again by ECMAScript's rule (_exponent_form: an
    H200 export's timing samples are of order 1e-5 s), and NaN and the
    infinities go to the library, which refuses them."""
    text = float.__repr__(value)
    if value == 0:
        return "0"
    if "n" in text:
        return _library(value)
    if "e" in text:
        return _exponent_form(text)
    return text[:-2] if text.endswith(".0") else text


def _exponent_form(text: str) -> str:
    """Number::toString of ECMA-262 from repr's 'd[.ddd]e±XX': digits s (k of them) and n, where
    the value is 0.s x 10^n; plain digits for -6 < n <= 21, else one digit, '.', the rest, 'e±'."""
    sign = "-" if text[0] == "-" else ""
    mantissa, exponent = text.lstrip("-").split("e")
    digits = mantissa.replace(".", "")
    k, n = len(digits), int(exponent) + 1
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * -n + digits
    power = f"e{'+' if n - 1 >= 0 else '-'}{abs(n - 1)}"
    return sign + (digits if k == 1 else digits[0] + "." + digits[1:]) + power


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
