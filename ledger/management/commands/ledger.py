"""`manage.py ledger <action>`: init, status, verify, rebuild, checkpoint, export, import, restore."""
from __future__ import annotations

import getpass
import json
import sys
import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from ledger import selectors
from ledger.checkpoints import sign_checkpoint
from ledger.errors import LedgerError
from ledger.services import head, initialise_ledger
from ledger.transfer import export_ledger, import_ledger, restore_ledger
from ledger.trust import fingerprint
from ledger.verification import rebuild_projections, request_verification, run_verification


def default_actor() -> str:
    return f"user:{getpass.getuser()}"


class Command(BaseCommand):
    help = "Operate the event ledger: init, status, verify, rebuild, checkpoint, export, import, restore."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--actor", default=default_actor(), help="who is acting (recorded in events)")
        actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
        init = actions.add_parser("init", help="give this ledger its identity (idempotent)")
        init.add_argument("--name", default="ForgeStencil Ledger")
        actions.add_parser("status", help="head, counts and last verification, as JSON")
        verify = actions.add_parser("verify", help="recompute hashes, check chain, checkpoints and the tail witness, replay projections")
        verify.add_argument("--witness", action="append", default=[], type=Path, metavar="FILE",
                            help="an export (its last line is a signed head) or a copy of a witness file kept "
                                 "elsewhere: the chain must reach its head with the same hash (repeatable)")
        rebuild = actions.add_parser("rebuild", help="drop every projection and replay all events into it "
                                                     "(refused while the witness or projections show missing events)")
        rebuild.add_argument("--override-tail-check", metavar="REASON",
                             help="rebuild even so; the reason is logged to var/witness/overrides.jsonl")
        actions.add_parser("checkpoint", help="sign the current head with the Ed25519 key")
        export = actions.add_parser("export", help="sign the head, then write every event up to it with its hashes as JSON Lines")
        export.add_argument("--out", required=True, help="output file (- for standard output)")
        imp = actions.add_parser("import", help="verify a JSON Lines export and its trusted signed head, then append its events")
        imp.add_argument("file")
        restore = actions.add_parser("restore", help="make an empty database hold an exported ledger itself, event for event")
        restore.add_argument("file")

    def handle(self, *args, **options) -> None:
        action = options["action"]
        try:
            getattr(self, f"do_{action}")(options)
        except LedgerError as exc:
            raise CommandError(str(exc)) from None

    def do_init(self, options) -> None:
        fresh = head()[0] == 0  # init is idempotent: on a ledger with events it returns the existing identity
        event = initialise_ledger(options["name"], options["actor"])
        done = "initialised" if fresh else "already initialised"
        self.stdout.write(f"ledger {event.data['ledger_id']} ({event.data['name']}) {done} at position {event.position}"
                          + ("" if fresh else f" ({event.recorded_at[:19]} UTC)"))

    def do_status(self, options) -> None:
        self.stdout.write(json.dumps(selectors.status(), indent=2, default=str))

    def do_verify(self, options) -> None:
        started = time.monotonic()
        run = request_verification(options["actor"])
        run = run_verification(run.pk, progress=lambda p: self.stderr.write(f"  verified {p:,} events…"), held=options["witness"])
        line = f"{run.summary} [{time.monotonic() - started:.2f}s]"
        if run.status != run.Status.PASSED:
            self.stderr.write(line)
            sys.exit(1)
        self.stdout.write(line)

    def do_rebuild(self, options) -> None:
        started = time.monotonic()
        position = rebuild_projections(progress=lambda p: self.stderr.write(f"  replayed {p:,} events…"),
                                       override=options["override_tail_check"], actor=options["actor"])
        self.stdout.write(f"rebuilt all projections from {position} events [{time.monotonic() - started:.2f}s]")

    def do_checkpoint(self, options) -> None:
        event = sign_checkpoint(options["actor"])
        self.stdout.write(
            f"checkpoint #{event.position}: head #{event.data['head_position']} {event.data['head_hash'][:16]}… "
            f"signed by {fingerprint(event.data['public_key'])} ({event.data['public_key']})"
        )

    def do_export(self, options) -> None:
        out = options["out"]
        if out == "-":
            count = export_ledger(self.stdout, options["actor"])
        else:
            with open(out, "w", encoding="utf-8") as handle:
                count = export_ledger(handle, options["actor"])
            self.stderr.write(f"exported {count} events to {out}, the last one the checkpoint of the head")

    def do_import(self, options) -> None:
        path = Path(options["file"])
        if not path.is_file():
            raise CommandError(f"{path}: no such file")
        fresh, present = import_ledger(path, options["actor"])
        self.stdout.write(f"imported {fresh} events from {path} ({present} already present)")

    def do_restore(self, options) -> None:
        path = Path(options["file"])
        if not path.is_file():
            raise CommandError(f"{path}: no such file")
        count = restore_ledger(path)
        self.stdout.write(f"restored {count} events from {path}; `ledger verify` checks them against the witness")
