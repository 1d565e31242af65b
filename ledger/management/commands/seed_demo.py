"""Bring the embedded default to a browsable state: an initialised, checkpointed, verified ledger."""
from django.core.management import call_command
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Initialise the ledger if needed, sign a checkpoint of its head and verify it."

    def handle(self, *args, **options) -> None:
        call_command("ledger", "--actor", "system:seed_demo", "init")
        call_command("ledger", "--actor", "system:seed_demo", "checkpoint")
        call_command("ledger", "--actor", "system:seed_demo", "verify")
