from django.apps import AppConfig


class AppgateConfig(AppConfig):
    """The App Agent and the application gate (issue 5)."""

    name = "appgate"

    def ready(self) -> None:
        from ledger import leases

        leases.register("appgate-run", "appgate.services.abandon_run")  # the reaper closes the work of a dead worker with it
