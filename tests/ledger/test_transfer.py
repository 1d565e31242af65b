"""Export to JSON Lines, the standalone verifier, and import that keeps the origin."""
import json
import subprocess
import sys
import uuid
from dataclasses import replace

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from ledger.checkpoints import public_key_text, sign_checkpoint, signing_key
from ledger.errors import LedgerError
from ledger.models import Event, KnownLedger
from ledger.services import append, initialise_ledger
from ledger.selectors import stream_events
from ledger.transfer import IMPORTED_ID_NAMESPACE, export_ledger, import_ledger, restore_ledger
from ledger.verification import verify_ledger
from ledger.verify_export import ExportError, verify_export
from tests.conftest import downgrade, erase_ledger, some_events


@pytest.fixture
def export_file(ledger, tmp_path):
    some_events(3)
    sign_checkpoint("user:test")
    path = tmp_path / "ledger.jsonl"
    with path.open("w") as handle:
        assert export_ledger(handle) == 5
    return path


def lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def write(path, records) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def run_standalone(path, *options: str) -> subprocess.CompletedProcess:
    """Run the verifier with Django made unimportable, as on a machine without it, trusting the
    key this test session signs with (`--key`) unless told otherwise."""
    code = "import sys; sys.modules['django'] = None; from ledger.verify_export import main; sys.exit(main(sys.argv[1:]))"
    options = options or ("--key", own_key())
    return subprocess.run([sys.executable, "-c", code, str(path), *options], capture_output=True, text=True, timeout=60)


def own_key() -> str:
    return public_key_text(signing_key())


def test_export_holds_every_event_with_its_hashes(export_file):
    records = lines(export_file)
    assert [r["position"] for r in records] == [1, 2, 3, 4, 5]
    assert [r["hash"] for r in records] == list(Event.objects.order_by("position").values_list("hash", flat=True))


def test_standalone_verifier_accepts_an_intact_export_without_django(export_file):
    result = run_standalone(export_file)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("OK: ledger ") and "5 events" in result.stdout and "1 checkpoints match (signatures verified)" in result.stdout
    assert "head #4 signed by trusted key ed25519:" in result.stdout


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda r: r[2]["payload"].update(to_value=9.0), "line 3: hash does not match"),
        (lambda r: r.pop(2), "line 3: position 4, expected 3"),
        (lambda r: r.insert(1, r.pop(2)), "line 2: position 3, expected 2"),
        (lambda r: r[4]["payload"].update(signature=r[4]["payload"]["signature"][::-1]), "line 5: hash does not match"),
        (lambda r: r[1].pop("actor"), "line 2: expected the fields"),
    ],
)
def test_standalone_verifier_names_the_first_bad_line(export_file, mutate, message):
    records = lines(export_file)
    mutate(records)
    write(export_file, records)
    result = run_standalone(export_file)
    assert result.returncode == 1
    assert message in result.stderr


def test_verifier_rejects_a_non_json_line(export_file):
    export_file.write_text(export_file.read_text() + "{not json\n")
    with pytest.raises(ExportError, match="line 6: not JSON"):
        verify_export(export_file.read_text().splitlines())


def test_import_verifies_then_keeps_the_origin(export_file):
    source = lines(export_file)
    source_ledger = source[0]["payload"]["ledger_id"]
    erase_ledger()
    local = initialise_ledger("second ledger", "user:test")
    assert import_ledger(export_file, "user:importer") == (5, 0)
    imported = Event.objects.filter(position__gt=1).order_by("position")
    assert imported.count() == 5
    first = stream_events("case/star_1/0x0x0/f32")[0]
    assert first.origin == {
        "ledger_id": source_ledger,
        "position": 2,
        "hash": source[1]["hash"],
        "recorded_at": source[1]["recorded_at"],
    }
    assert first.event_id == source[1]["event_id"] and first.actor == source[1]["actor"]
    assert set(KnownLedger.objects.values_list("ledger_id", "imported")) == {(local.data["ledger_id"], False), (source_ledger, True)}
    report = verify_ledger()
    assert report.ok, report.summary()
    assert report.checkpoints == 1


def test_importing_the_same_file_twice_adds_nothing(export_file):
    erase_ledger()
    initialise_ledger("second ledger", "user:test")
    import_ledger(export_file, "user:importer")
    assert import_ledger(export_file, "user:importer") == (0, 5)
    assert Event.objects.count() == 6


def _export(path):
    with path.open("w") as handle:
        export_ledger(handle)
    return path


def test_a_checkpoint_on_an_imported_head_still_verifies_two_imports_later(export_file, tmp_path):
    """A device call imports the shipped export and exports at once when it measures nothing (its
    checkpoint signs an event it imported, under its own position); the next call imports that
    export, and so does the one after: every checkpoint on the way must find the hash it signed."""
    hops = [export_file]
    for name in ("second", "third", "fourth"):
        erase_ledger()
        initialise_ledger(f"{name} ledger", "user:test")
        import_ledger(hops[-1], "user:importer")
        report = verify_ledger()
        assert report.ok, report.summary()
        hops.append(_export(tmp_path / f"{name}.jsonl"))
        assert verify_export(hops[-1].read_text().splitlines()).checkpoints == len(hops)  # one more a ledger
    first, second, third = (lines(hop)[0]["payload"]["ledger_id"] for hop in hops[:3])
    passed_on = next(r for r in lines(hops[3]) if (r["origin"] or {}).get("ledger_id") == first)
    assert [hop["ledger_id"] for hop in passed_on["origin"]["via"]] == [second, third]
    # each ledger on the way put its own LedgerInitialised first: one position later a hop
    assert [hop["position"] for hop in passed_on["origin"]["via"]] == [passed_on["origin"]["position"] + 1,
                                                                       passed_on["origin"]["position"] + 2]


def test_an_event_reached_by_two_ways_is_kept_once_and_its_other_place_recorded(export_file, tmp_path):
    """A ledger that imported the first export and then an export of a ledger that passed it on
    at once (its checkpoint signs the first's checkpoint under its own position): the events are
    not appended again, their places on the second way are recorded apart, and every checkpoint
    verifies; importing the second export again records nothing more."""
    erase_ledger()
    initialise_ledger("second ledger", "user:test")
    import_ledger(export_file, "user:importer")
    second = _export(tmp_path / "second.jsonl")
    second_ledger = lines(second)[0]["payload"]["ledger_id"]
    erase_ledger()
    initialise_ledger("third ledger", "user:test")
    assert import_ledger(export_file, "user:importer") == (5, 0)
    assert import_ledger(second, "user:importer") == (2, 5)  # its own start and its checkpoint
    (recorded,) = stream_events("ledger/imported-places")
    assert recorded.type == "ImportedPlacesRecorded"
    assert {(p["ledger_id"], p["position"]) for p in recorded.data["places"]} == {(second_ledger, n) for n in range(2, 7)}
    report = verify_ledger()
    assert report.ok, report.summary()
    assert import_ledger(second, "user:importer") == (0, 7)
    assert len(stream_events("ledger/imported-places")) == 1
    third = _export(tmp_path / "third.jsonl")
    assert verify_export(third.read_text().splitlines()).checkpoints == 3


def test_own_events_that_come_back_in_another_ledgers_export_are_not_copied(export_file, tmp_path):
    """A device call imports the shipped export and exports at once; the ledger that shipped it
    imports that: its own events are known as themselves (their places there recorded apart)."""
    own = Event.objects.count()
    erase_ledger()
    initialise_ledger("second ledger", "user:test")
    import_ledger(export_file, "user:importer")
    second = _export(tmp_path / "second.jsonl")
    erase_ledger()
    restore_ledger(export_file)  # the first ledger itself again
    assert import_ledger(second, "user:importer") == (2, own)
    assert Event.objects.count() == own + 3  # the second's start and checkpoint, and the places recorded
    report = verify_ledger()
    assert report.ok, report.summary()


def test_a_bad_file_imports_nothing_and_names_the_line(export_file):
    records = lines(export_file)
    records[3]["actor"] = "user:mallory"
    write(export_file, records)
    erase_ledger()
    initialise_ledger("second ledger", "user:test")
    with pytest.raises(LedgerError, match="line 4: hash does not match.*nothing was imported"):
        import_ledger(export_file, "user:importer")
    assert Event.objects.count() == 1


def test_a_ledger_cannot_import_its_own_export(export_file):
    with pytest.raises(LedgerError, match="export of this ledger itself"):
        import_ledger(export_file, "user:importer")


def test_export_and_import_commands(export_file, tmp_path, capsys):
    out = tmp_path / "again.jsonl"
    call_command("ledger", "export", "--out", str(out))
    assert out.read_text() == export_file.read_text()
    erase_ledger()
    call_command("ledger", "init")
    call_command("ledger", "import", str(out))
    assert "imported 5 events" in capsys.readouterr().out
    with pytest.raises(CommandError, match="no such file"):
        call_command("ledger", "import", str(tmp_path / "missing.jsonl"))


@pytest.mark.parametrize("local_value", [1.5, 1.5000000000000002], ids=["same payload", "last bit differs"])
def test_ledgers_sharing_a_content_derived_event_id_combine(ledger, tmp_path, local_value):
    """Every ledger that loads a matrix records CaseDefined under the same uuid5 ids, with
    coefficients that may differ in the last bit between CPUs: another ledger's copy is
    imported under an id of its own, and its checkpoint still verifies."""
    shared = uuid.uuid5(uuid.NAMESPACE_URL, "matrix/case/star_1/8x8x8/f32")
    stream = "case/star_1/8x8x8/f32"
    append(downgrade(stream, 1.5, event_id=shared))
    sign_checkpoint("user:test")  # signs head #2: the shared event
    foreign = tmp_path / "foreign.jsonl"
    with foreign.open("w") as handle:
        export_ledger(handle)
    foreign_ledger = lines(foreign)[0]["payload"]["ledger_id"]
    erase_ledger()
    initialise_ledger("combined ledger", "user:test")
    append(replace(downgrade(stream, local_value, event_id=shared), actor="user:other"))
    assert import_ledger(foreign, "user:importer") == (3, 0)
    local, copy = stream_events(stream)
    assert (local.event_id, local.origin, local.payload["to_value"]) == (str(shared), None, local_value)
    assert copy.event_id == str(uuid.uuid5(IMPORTED_ID_NAMESPACE, f"{foreign_ledger}/{shared}"))
    assert copy.origin["event_id"] == str(shared) and copy.origin["ledger_id"] == foreign_ledger
    assert copy.payload["to_value"] == 1.5 and copy.actor == "user:reviewer"
    assert import_ledger(foreign, "user:importer") == (0, 3)
    report = verify_ledger()
    assert report.ok, report.summary()
    assert report.checkpoints == 1
