"""Standalone verifier for a ledger export (JSON Lines), usable without Django.

    python -m ledger.verify_export FILE.jsonl

Needs only the standard library and rfc8785. Checks positions, the hash of every event,
the chain links and stream versions, and that every checkpoint names a hash that is in the
file; checkpoint signatures are checked too when the `cryptography` package is importable.
Exit 0 with a one-line summary when intact, 1 naming the first bad line otherwise.
"""
from __future__ import annotations

import argparse
import base64
import json
import sys
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

from ledger.canonical import GENESIS_HASH, HASHED_FIELDS, chain_hash, checkpoint_message, event_body

LINE_FIELDS = frozenset(HASHED_FIELDS) | {"prev_hash", "hash"}


class ExportError(Exception):
    def __init__(self, line: int, problem: str) -> None:
        super().__init__(f"line {line}: {problem}")
        self.line = line
        self.problem = problem


@dataclass
class ExportSummary:
    events: int = 0
    head_hash: str = GENESIS_HASH
    ledger_id: str | None = None
    checkpoints: int = 0
    signatures_checked: bool = False
    events_list: list[dict[str, Any]] = field(default_factory=list)

    def line(self) -> str:
        sigs = "signatures verified" if self.signatures_checked else "signatures NOT checked (install cryptography)"
        return (
            f"OK: ledger {self.ledger_id}, {self.events} events, head {self.head_hash[:16]}…, "
            f"{self.checkpoints} checkpoints match ({sigs})"
        )


def _signature_checker():
    try:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    except ImportError:
        return None

    def check(data: dict[str, Any]) -> bool:
        try:
            key = Ed25519PublicKey.from_public_bytes(base64.b64decode(data["public_key"], validate=True))
            key.verify(
                base64.b64decode(data["signature"], validate=True),
                checkpoint_message(data["ledger_id"], data["head_position"], data["head_hash"]),
            )
        except (InvalidSignature, ValueError, KeyError):
            return False
        return True

    return check


def read_lines(lines: Iterable[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            record = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ExportError(number, f"not JSON: {exc}") from None
        if not isinstance(record, dict) or set(record) != LINE_FIELDS:
            got = sorted(record) if isinstance(record, dict) else type(record).__name__
            raise ExportError(number, f"expected the fields {sorted(LINE_FIELDS)}, got {got}")
        yield number, record


def verify_export(lines: Iterable[str], keep_events: bool = False) -> ExportSummary:
    """Raise ExportError at the first bad line; return the summary when the file is intact."""
    summary = ExportSummary()
    check_signature = _signature_checker()
    summary.signatures_checked = check_signature is not None
    hashes: dict[int, str] = {}
    origin_hashes: dict[tuple[str, int], str] = {}
    stream_versions: dict[str, int] = {}
    checkpoints: list[tuple[int, dict[str, Any], dict[str, Any] | None]] = []
    prev_hash = GENESIS_HASH
    for number, record in read_lines(lines):
        expected = summary.events + 1
        if record["position"] != expected:
            raise ExportError(number, f"position {record['position']}, expected {expected} (event missing or reordered)")
        if record["prev_hash"] != prev_hash:
            raise ExportError(number, "prev_hash does not link to the previous line's hash (chain broken)")
        try:
            body = event_body(record)
        except Exception as exc:  # rfc8785 refuses values JSON cannot represent exactly
            raise ExportError(number, f"fields cannot be canonicalised: {exc}") from None
        if chain_hash(prev_hash, body) != record["hash"]:
            raise ExportError(number, "hash does not match the event's fields (event edited)")
        version = stream_versions.get(record["stream"], 0) + 1
        if record["version"] != version:
            raise ExportError(number, f"stream {record['stream']} at version {record['version']}, expected {version}")
        stream_versions[record["stream"]] = version
        if record["position"] == 1:
            if record["type"] != "LedgerInitialised" or record["origin"] is not None:
                raise ExportError(number, "an export starts with its own LedgerInitialised event")
            summary.ledger_id = record["payload"]["ledger_id"]
        if record["origin"] is not None:
            origin = record["origin"]
            origin_hashes[(origin["ledger_id"], origin["position"])] = origin["hash"]
        if record["type"] == "CheckpointSigned":
            checkpoints.append((number, record["payload"], record["origin"]))
        hashes[record["position"]] = record["hash"]
        prev_hash = record["hash"]
        summary.events = record["position"]
        if keep_events:
            summary.events_list.append(record)
    summary.head_hash = prev_hash
    if summary.events == 0:
        raise ExportError(0, "the file holds no events")
    for number, data, origin in checkpoints:
        signed = hashes.get(data["head_position"]) if origin is None else origin_hashes.get((data["ledger_id"], data["head_position"]))
        if signed != data["head_hash"]:
            raise ExportError(number, f"checkpoint of position {data['head_position']} does not match the history in the file")
        if check_signature is not None and not check_signature(data):
            raise ExportError(number, "checkpoint signature does not verify")
        summary.checkpoints += 1
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", help="a JSON Lines export written by `manage.py ledger export`")
    args = parser.parse_args(argv)
    try:
        with open(args.file, encoding="utf-8") as handle:
            summary = verify_export(handle)
    except OSError as exc:
        print(f"FAILED: cannot read {args.file}: {exc}", file=sys.stderr)
        return 2
    except ExportError as exc:
        print(f"FAILED: {exc}", file=sys.stderr)
        return 1
    print(summary.line())
    return 0


if __name__ == "__main__":
    sys.exit(main())
