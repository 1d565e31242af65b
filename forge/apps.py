from django.apps import AppConfig


class ForgeConfig(AppConfig):
    """The Kernel Agent: forging rounds, proposers, the operator map (issue 4)."""

    name = "forge"

    def ready(self) -> None:
        from ledger import leases

        leases.register("round", "forge.services.abandon_round")  # the reaper closes the work of a dead worker with it
