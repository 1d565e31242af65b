"""`--actor` (README, Commands): who a command records as acting. `ledger` takes it before the
action and defaults to `user:<login>`; the other commands take it as an option and default to
`user:cli`."""
from __future__ import annotations

import getpass

from django.core.management import call_command

from ledger.models import Event
from ledger.services import record_from_row
from tests.conftest import some_events


def last_actor(event_type: str) -> str:
    return record_from_row(Event.objects.filter(type=event_type).order_by("-position").first()).actor


def test_ledger_records_the_actor_named_before_the_action_and_the_login_by_default(ledger):
    call_command("ledger", "--actor", "user:alice", "checkpoint")
    assert last_actor("CheckpointSigned") == "user:alice"
    some_events(1)  # a new head to sign (a head that is a checkpoint is not signed again)
    call_command("ledger", "checkpoint")
    assert last_actor("CheckpointSigned") == f"user:{getpass.getuser()}"


def test_the_other_commands_record_their_actor_option_and_user_cli_by_default(ledger):
    call_command("matrix", "load", "cpu", "--actor", "agent:loader")
    assert {record_from_row(e).actor for e in Event.objects.filter(type="CaseDefined")} == {"agent:loader"}
    call_command("appgate", "register", "fixtures/apps/heat3d/manifest.cpu.yaml")
    assert last_actor("AppRegistered") == "user:cli"
