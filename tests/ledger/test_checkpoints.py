import base64

import pytest
from django.test import override_settings

from ledger.checkpoints import public_key_text, sign_checkpoint, signing_key
from ledger.trust import fingerprint, signature_valid
from ledger.errors import LedgerError
from ledger.services import NewEvent, append
from ledger.verification import verify_ledger
from tests.conftest import some_events

OTHER_SEED = base64.b64encode(bytes(range(32))).decode()


def test_checkpoint_signs_the_head_and_verifies(ledger):
    events = some_events(3)
    checkpoint = sign_checkpoint("user:test")
    data = checkpoint.data
    assert (data["head_position"], data["head_hash"]) == (4, events[-1].hash)
    assert signature_valid(data["public_key"], data["signature"], data["ledger_id"], 4, events[-1].hash)
    assert data["public_key"] == public_key_text(signing_key())
    report = verify_ledger()
    assert report.ok and report.checkpoints == 1


def test_checkpointing_an_unchanged_head_adds_nothing(ledger):
    first = sign_checkpoint("user:test")
    assert sign_checkpoint("user:test") == first
    some_events(1)
    assert sign_checkpoint("user:test").position == first.position + 2


def test_a_head_signed_by_another_key_is_signed_again(ledger):
    """Re-signing an export whose last line is a device machine's checkpoint: the publication key
    signs that checkpoint's position; signing again with the same key adds nothing."""
    with override_settings(LEDGER_SIGNING_KEY=OTHER_SEED):
        device = sign_checkpoint("user:device")
    ours = sign_checkpoint("system:publication")
    assert ours.position == device.position + 1 and ours.data["head_position"] == device.position
    assert ours.data["public_key"] == public_key_text(signing_key()) and sign_checkpoint("system:publication") == ours


def test_a_forged_signature_fails_verify(ledger):
    genuine = sign_checkpoint("user:test").data
    forged = dict(genuine, signature=base64.b64encode(b"\x00" * 64).decode())
    event = append(NewEvent(stream="ledger/checkpoints", type="CheckpointSigned", payload=forged, actor="user:mallory"))
    report = verify_ledger()
    assert report.bad_position == event.position and "signature does not verify" in report.problem


def test_a_checkpoint_by_an_untrusted_key_fails_verify(ledger):
    with override_settings(LEDGER_SIGNING_KEY=OTHER_SEED):
        sign_checkpoint("user:mallory")
    report = verify_ledger()
    other = public_key_text(_key(OTHER_SEED))
    assert not report.ok and f"is signed by key {fingerprint(other)} ({other}), which is not trusted here" in report.problem
    assert "add it to LEDGER_TRUSTED_PUBLIC_KEYS" in report.problem
    with override_settings(LEDGER_TRUSTED_PUBLIC_KEYS=[public_key_text(_key(OTHER_SEED))]):
        assert verify_ledger().ok


def _key(seed: str):
    with override_settings(LEDGER_SIGNING_KEY=seed):
        return signing_key()


def test_a_malformed_signing_key_is_a_clear_error(ledger):
    with override_settings(LEDGER_SIGNING_KEY="not base64!"):
        with pytest.raises(LedgerError, match="LEDGER_SIGNING_KEY must be a base64-encoded 32-byte Ed25519 seed"):
            sign_checkpoint("user:test")


def test_the_test_session_never_uses_the_developers_var_dir():
    """Keys, witness files and SQLite test databases of a test run go to a scratch folder, not to
    the repository's var/ where `./dev run` keeps the developer's ledger and signing key."""
    from pathlib import Path

    from django.conf import settings

    assert Path(settings.VAR_DIR).resolve() != (Path(settings.BASE_DIR) / "var").resolve()
    assert Path(settings.LEDGER_SIGNING_KEY_FILE).parent == Path(settings.VAR_DIR)
