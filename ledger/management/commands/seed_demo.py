"""Bring the embedded default to a browsable state: an initialised ledger with the case matrices
defined, checkpointed and verified."""
from django.core.management import call_command
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = ("Initialise the ledger if needed, define the case matrices, sign a checkpoint of the head "
            "and verify it. Idempotent.")

    def handle(self, *args, **options) -> None:
        call_command("ledger", "--actor", "system:seed_demo", "init")
        for matrix in ("cpu", "gpu"):
            call_command("matrix", "load", matrix, "--actor", "system:seed_demo")
        call_command("ledger", "--actor", "system:seed_demo", "checkpoint")
        call_command("ledger", "--actor", "system:seed_demo", "verify")
