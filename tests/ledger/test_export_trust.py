"""Exports end with their signed head; verify_export, import and restore trust only configured
keys (never one found in the file); import refuses oversized lines and files before parsing and
names duplicate ids and malformed lines; the committed publication key verifies every shipped export."""
import base64
import json
from collections import Counter
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.core.management import call_command
from django.test import override_settings

from ledger import transfer
from ledger.canonical import chain_hash, checkpoint_message, event_body
from ledger.checkpoints import public_key_text, sign_checkpoint, signing_key
from ledger.errors import LedgerError
from ledger.management.commands import seed_demo
from ledger.models import Event
from ledger.services import initialise_ledger
from ledger.transfer import export_ledger, import_ledger, restore_ledger
from ledger.trust import fingerprint
from ledger.verification import verify_ledger
from ledger.verify_export import MAX_LINE_BYTES, main
from tests.conftest import erase_ledger, some_events
from tests.ledger.test_transfer import lines, run_standalone, write

ROOT = Path(__file__).resolve().parents[2]
OTHER_SEED = base64.b64encode(bytes(range(32))).decode()


@pytest.fixture
def export_file(ledger, tmp_path):
    some_events(3)
    path = tmp_path / "ledger.jsonl"
    with path.open("w") as handle:
        assert export_ledger(handle) == 5  # #1 init, #2-#4 events, #5 the checkpoint export signed
    return path


def resigned(records: list[dict], key: Ed25519PrivateKey) -> list[dict]:
    """What a forger does: recompute positions, versions and hashes, then sign the last line's
    checkpoint of the line before with `key` (the genuine ledger id kept)."""
    prev, versions = "0" * 64, Counter()
    for position, record in enumerate(records, start=1):
        versions[record["stream"]] += 1
        record.update(position=position, version=versions[record["stream"]], prev_hash=prev)
        if position == len(records):
            data = record["payload"]
            data.update(head_position=position - 1, head_hash=prev, public_key=public_key_text(key))
            data["signature"] = base64.b64encode(key.sign(checkpoint_message(data["ledger_id"], position - 1, prev))).decode()
        record["hash"] = prev = chain_hash(prev, event_body(record))
    return records



def assert_import_refused_into_a_second_ledger(export_file, match: str) -> None:
    """A fresh ledger refuses the whole file with `match` and keeps only its own first event."""
    erase_ledger()
    initialise_ledger("second ledger", "user:test")
    with pytest.raises(LedgerError, match=match):
        import_ledger(export_file, "user:importer")
    assert Event.objects.count() == 1

def test_an_export_ends_with_its_signed_head_and_exporting_again_adds_nothing(export_file, tmp_path):
    records = lines(export_file)
    last = records[-1]
    assert (last["type"], last["payload"]["head_position"], last["payload"]["head_hash"]) == ("CheckpointSigned", 4, records[3]["hash"])
    again = tmp_path / "again.jsonl"
    with again.open("w") as handle:
        export_ledger(handle)
    assert again.read_text() == export_file.read_text()


def test_a_rewritten_export_re_signed_with_a_fresh_key_is_refused(export_file):
    records = lines(export_file)
    records[2]["payload"]["to_value"] = 9.99
    forger = Ed25519PrivateKey.generate()
    write(export_file, resigned(records, forger))
    forged = fingerprint(public_key_text(forger))
    result = run_standalone(export_file)
    assert result.returncode == 1
    assert f"line 5: checkpoint of ledger {records[0]['payload']['ledger_id']} at head #4 is signed by key {forged}" in result.stderr
    assert "not trusted here" in result.stderr and "pass --key with it" in result.stderr
    assert_import_refused_into_a_second_ledger(export_file, f"signed by key {forged}.*LEDGER_TRUSTED_PUBLIC_KEYS.*nothing was imported")


def test_verify_export_trusts_the_keys_file_not_the_file_s_own_key(export_file, tmp_path):
    assert run_standalone(export_file, "--trusted-keys", str(tmp_path / "missing")).returncode == 2
    keys = tmp_path / "keys.txt"
    keys.write_text(f"# test keys\n{public_key_text(signing_key())} this test session\n")
    assert run_standalone(export_file, "--trusted-keys", str(keys)).returncode == 0
    assert main([str(export_file)]) == 1  # the committed keys file: the publication key only


def test_an_export_without_its_signed_head_is_refused(export_file):
    write(export_file, lines(export_file)[:-1])
    result = run_standalone(export_file)
    assert result.returncode == 1 and "line 4: the file does not end with a signed checkpoint" in result.stderr
    erase_ledger()
    initialise_ledger("second ledger", "user:test")
    with pytest.raises(LedgerError, match="does not end with a signed checkpoint.*nothing was imported"):
        import_ledger(export_file, "user:importer")


def test_a_checkpoint_by_another_key_covered_by_a_trusted_one_verifies(ledger, tmp_path):
    some_events(1)
    with override_settings(LEDGER_SIGNING_KEY=OTHER_SEED):
        sign_checkpoint("user:device")  # #3, e.g. a device machine's throw-away key
    assert not verify_ledger().ok  # nothing trusted covers it yet
    some_events(1)
    path = tmp_path / "covered.jsonl"
    with path.open("w") as handle:
        export_ledger(handle)  # #5: the service's key signs head #4, the device checkpoint included
    report = verify_ledger()
    assert report.ok and report.covered_unknown == 1, report.summary()
    result = run_standalone(path)
    assert result.returncode == 0 and "1 earlier checkpoints by keys not trusted here, covered by a trusted one" in result.stdout


def test_import_limits_and_clean_errors(export_file, monkeypatch):
    records = lines(export_file)
    erase_ledger()
    initialise_ledger("second ledger", "user:test")
    duplicate = [dict(r) for r in records]
    duplicate[2]["event_id"] = duplicate[1]["event_id"]
    write(export_file, resigned(duplicate, signing_key()))
    with pytest.raises(LedgerError, match=f"line 3: event id {records[1]['event_id']} is already used by line 2; nothing was imported"):
        import_ledger(export_file, "user:importer")

    export_file.write_text("\n".join(json.dumps(r) for r in records[:2]) + "\n{not json\n")
    with pytest.raises(LedgerError, match="line 3: not JSON"):
        import_ledger(export_file, "user:importer")

    export_file.write_text(json.dumps(records[0]) + "\n" + "x" * (MAX_LINE_BYTES + 1) + "\n")
    with pytest.raises(LedgerError, match="line 2: longer than the limit of 1,048,576 bytes; not parsed"):
        import_ledger(export_file, "user:importer")

    write(export_file, records)
    monkeypatch.setattr(transfer, "MAX_FILE_BYTES", 1000)
    with pytest.raises(LedgerError, match=r"the file is [\d,]+ bytes, more than the limit of 1,000; nothing was read"):
        import_ledger(export_file, "user:importer")
    assert Event.objects.count() == 1


def test_restore_makes_the_exported_ledger_itself(export_file):
    records = lines(export_file)
    with pytest.raises(LedgerError, match="restore needs an empty ledger"):
        restore_ledger(export_file)
    erase_ledger()
    assert restore_ledger(export_file) == 5
    assert list(Event.objects.order_by("position").values_list("hash", flat=True)) == [r["hash"] for r in records]
    assert verify_ledger().ok
    call_command("ledger", "checkpoint")  # nothing new to sign: the restored head is its checkpoint
    assert Event.objects.count() == 5


def test_restore_refuses_a_checkpoint_no_trusted_key_covers(export_file):
    records = lines(export_file)
    write(export_file, resigned(records, Ed25519PrivateKey.from_private_bytes(base64.b64decode(OTHER_SEED))))
    erase_ledger()
    with pytest.raises(LedgerError, match="line 5: checkpoint .* is signed by key ed25519:.*nothing was restored"):
        restore_ledger(export_file)
    assert Event.objects.count() == 0


def shipped_exports() -> list[Path]:
    return sorted(ROOT.glob("fixtures/ledgers/*.jsonl")) + sorted(ROOT.glob("docs/benchmarks/*.jsonl"))


def test_the_committed_public_key_verifies_every_shipped_export(capsys):
    """Offline, as a reviewer would: `python -m ledger.verify_export FILE` with its default keys
    file, fixtures/keys/trusted_keys.txt."""
    exports = shipped_exports()
    assert {ROOT / name for name in seed_demo.COMMITTED_EXPORTS} <= set(exports)
    assert (ROOT / "fixtures/ledgers/h200_campaign.jsonl") in exports
    # the publication keys: the keys file's lines named publication* (one per session that shipped exports)
    lines = (ROOT / "fixtures/keys/trusted_keys.txt").read_text().splitlines()
    publication = [line.split()[2] for line in lines
                   if not line.startswith("#") and line.split()[1:2] and line.split()[1].startswith("publication")]
    assert "ed25519:03a867dfeccea4fe" in publication
    for path in exports:
        assert main([str(path)]) == 0, capsys.readouterr().err
        out = capsys.readouterr().out
        assert any(f"signed by trusted key {key}" in out for key in publication), (path, out)
    # the line limit keeps a 4x margin over the longest line shipped
    assert max(len(line) for path in exports for line in path.read_bytes().splitlines()) * 4 <= MAX_LINE_BYTES


def test_an_import_with_an_invalid_payload_under_a_valid_chain_and_trusted_head_imports_nothing(export_file):
    """Signed and chained correctly (a trusted key re-signed it), yet one payload breaks its schema:
    the import validates every payload before appending any (README: import nothing if any line is bad)."""
    records = lines(export_file)
    records[2]["payload"]["to_value"] = "faster"  # ResultDowngraded's to_value is a number
    write(export_file, resigned(records, signing_key()))
    assert run_standalone(export_file, "--key", public_key_text(signing_key())).returncode == 0  # the chain holds
    assert_import_refused_into_a_second_ledger(export_file, r"line 3: .*to_value.*; nothing was imported")


def test_an_imported_checkpoint_by_another_key_covered_by_a_trusted_one_is_counted_not_refused(ledger, tmp_path):
    some_events(1)
    with override_settings(LEDGER_SIGNING_KEY=OTHER_SEED):
        sign_checkpoint("user:device")  # #3, a device machine's throw-away key
    some_events(1)
    path = tmp_path / "device.jsonl"
    with path.open("w") as handle:
        export_ledger(handle)  # #5: this service's key signs head #4, the device checkpoint included
    erase_ledger()
    initialise_ledger("second ledger", "user:test")
    assert import_ledger(path, "user:importer") == (5, 0)
    report = verify_ledger()
    assert report.ok and report.covered_unknown == 1, report.summary()
