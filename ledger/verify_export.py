"""Standalone verifier for a ledger export (JSON Lines), usable without Django.

    python -m ledger.verify_export FILE.jsonl [--trusted-keys KEYS_FILE] [--key BASE64 ...]

Needs only the standard library, rfc8785 and cryptography. Checks positions, the hash of every
event, the chain links, stream versions and unique event ids, that every checkpoint's signature
verifies and names a hash that is in the file, and that the file ends with a checkpoint of its
own last event signed by a trusted key: one in KEYS_FILE (default: the committed
fixtures/keys/trusted_keys.txt, the project's publication key) or given with --key; never a key
found in the file. Exit 0 with a one-line summary when intact and signed, 1 naming the first bad
line otherwise, 2 when the file or keys file cannot be read.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

from ledger.canonical import GENESIS_HASH, HASHED_FIELDS, chain_hash, event_body
from ledger.trust import (DEFAULT_KEYS_FILE, Signed, TrustError, covered_unknown, fingerprint, first_uncovered,
                          places_held, signature_valid, trusted_keys, untrusted_message)

LINE_FIELDS = frozenset(HASHED_FIELDS) | {"prev_hash", "hash"}
# The longest line accepted, checked before the line is parsed. The longest line of any shipped
# export is 69,322 bytes (a CandidateMeasured of fixtures/ledgers/h200_campaign.jsonl): 15x margin.
MAX_LINE_BYTES = 1024 * 1024
HOW_TO_TRUST = "pass --key with it, or add it to the keys file given with --trusted-keys"


class ExportError(Exception):
    def __init__(self, line: int | None, problem: str) -> None:
        super().__init__(problem if line is None else f"line {line}: {problem}")
        self.line = line
        self.problem = problem


@dataclass
class ExportSummary:
    events: int = 0
    head_hash: str = GENESIS_HASH
    ledger_id: str | None = None
    checkpoints: int = 0
    signed: list[Signed] = field(default_factory=list)
    signed_head: Signed | None = None  # set by require_signed_head
    last: dict[str, Any] | None = None  # the last line
    covered_unknown: int = 0
    events_list: list[dict[str, Any]] = field(default_factory=list)

    def line(self) -> str:
        text = (f"OK: ledger {self.ledger_id}, {self.events} events, head {self.head_hash[:16]}…, "
                f"{self.checkpoints} checkpoints match (signatures verified)")
        if self.signed_head is not None:
            text += (f"; head #{self.signed_head.head_position} signed by trusted key "
                     f"{fingerprint(self.signed_head.public_key)} ({self.signed_head.where})")
        if self.covered_unknown:
            text += f"; {self.covered_unknown} earlier checkpoints by keys not trusted here, covered by a trusted one"
        return text


def read_export(path: Path, max_bytes: int | None = None) -> Iterator[str]:
    """The file's lines, each refused before it is parsed when longer than MAX_LINE_BYTES, the
    file refused before anything is read when larger than `max_bytes` (import keeps every event
    in memory; a streaming check needs no such limit)."""
    size = path.stat().st_size
    if max_bytes is not None and size > max_bytes:
        raise ExportError(None, f"the file is {size:,} bytes, more than the limit of {max_bytes:,}; nothing was read")
    with path.open("rb") as handle:
        number = 0
        while raw := handle.readline(MAX_LINE_BYTES + 1):
            number += 1
            if len(raw.rstrip(b"\r\n")) > MAX_LINE_BYTES:
                raise ExportError(number, f"longer than the limit of {MAX_LINE_BYTES:,} bytes; not parsed")
            try:
                yield raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ExportError(number, f"not UTF-8: {exc}") from None


def read_lines(lines: Iterable[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    for number, text in enumerate(lines, start=1):
        if len(text) > MAX_LINE_BYTES:
            raise ExportError(number, f"longer than the limit of {MAX_LINE_BYTES:,} bytes; not parsed")
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
    """Check the chain and every checkpoint's signature and hash; raise ExportError at the first
    bad line. Which keys to trust is the caller's part: require_signed_head."""
    summary = ExportSummary()
    hashes: dict[int, str] = {}
    origin_hashes: dict[tuple[str, int], str] = {}
    stream_versions: dict[str, int] = {}
    event_ids: dict[str, int] = {}
    checkpoints: list[tuple[int, dict[str, Any], dict[str, Any] | None, int]] = []
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
        if record["event_id"] in event_ids:
            raise ExportError(number, f"event id {record['event_id']} is already used by line {event_ids[record['event_id']]}")
        event_ids[record["event_id"]] = number
        version = stream_versions.get(record["stream"], 0) + 1
        if record["version"] != version:
            raise ExportError(number, f"stream {record['stream']} at version {record['version']}, expected {version}")
        stream_versions[record["stream"]] = version
        if record["position"] == 1:
            if record["type"] != "LedgerInitialised" or record["origin"] is not None:
                raise ExportError(number, "an export starts with its own LedgerInitialised event")
            summary.ledger_id = record["payload"]["ledger_id"]
        origin_hashes.update(places_held(record["type"], record["origin"], record["payload"]))
        if record["type"] == "CheckpointSigned":
            checkpoints.append((number, record["payload"], record["origin"], record["position"]))
        hashes[record["position"]] = record["hash"]
        prev_hash = record["hash"]
        summary.events = record["position"]
        summary.last = record
        if keep_events:
            summary.events_list.append(record)
    summary.head_hash = prev_hash
    if summary.events == 0:
        raise ExportError(None, "the file holds no events")
    for number, data, origin, position in checkpoints:
        summary.signed.append(_check_checkpoint(number, data, origin, position, summary.ledger_id, hashes, origin_hashes))
        summary.checkpoints += 1
    return summary


def _check_checkpoint(number: int, data: dict, origin: dict | None, position: int, ledger_id: str | None,
                      hashes: dict[int, str], origin_hashes: dict[tuple[str, int], str]) -> Signed:
    try:
        named, head_position, head_hash = data["ledger_id"], data["head_position"], data["head_hash"]
        public_key, signature = data["public_key"], data["signature"]
    except (KeyError, TypeError):
        raise ExportError(number, "checkpoint payload lacks ledger_id, head_position, head_hash, public_key or signature") from None
    if origin is None and named != ledger_id:
        raise ExportError(number, f"checkpoint names ledger {named}, not this file's ledger {ledger_id}")
    signed = hashes.get(head_position) if origin is None else origin_hashes.get((named, head_position))
    if signed != head_hash:
        raise ExportError(number, f"checkpoint of position {head_position} does not match the history in the file")
    if not signature_valid(public_key, signature, named, head_position, head_hash):
        raise ExportError(number, "checkpoint signature does not verify")
    return Signed(where=f"line {number}", ledger_id=named, at=position if origin is None else origin["position"],
                  local=position, head_position=head_position, public_key=public_key, own=origin is None)


def require_signed_head(summary: ExportSummary, trusted: set[str], how_to_trust: str = HOW_TO_TRUST) -> None:
    """Every checkpoint by an unknown key must be covered by a trusted one, and the file's last
    line must be its own ledger's checkpoint of the line before, by a trusted key: without that,
    anyone could have written or extended the file."""
    uncovered = first_uncovered(summary.signed, trusted)
    if uncovered is not None:
        raise ExportError(uncovered.local, untrusted_message(uncovered, how_to_trust))
    last = summary.signed[-1] if summary.signed else None
    if last is None or not (last.own and last.local == summary.events and last.head_position == summary.events - 1):
        raise ExportError(summary.events, "the file does not end with a signed checkpoint of its own last event: "
                                          "nothing shows who wrote it; export it again with `manage.py ledger export` "
                                          "(which signs the head)")
    if last.public_key not in trusted:
        raise ExportError(last.local, untrusted_message(last, how_to_trust))
    summary.signed_head = last
    summary.covered_unknown = len(covered_unknown(summary.signed, trusted))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", help="a JSON Lines export written by `manage.py ledger export`")
    parser.add_argument("--trusted-keys", type=Path, default=DEFAULT_KEYS_FILE, metavar="KEYS_FILE",
                        help=f"public keys to trust, one base64 key a line (default: {DEFAULT_KEYS_FILE})")
    parser.add_argument("--key", action="append", default=[], metavar="BASE64",
                        help="one more public key to trust (repeatable)")
    args = parser.parse_args(argv)
    try:
        trusted = trusted_keys(args.key, [args.trusted_keys])
    except (OSError, TrustError) as exc:
        print(f"FAILED: cannot read the trusted keys: {exc}", file=sys.stderr)
        return 2
    try:
        summary = verify_export(read_export(Path(args.file)))
        require_signed_head(summary, trusted)
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
