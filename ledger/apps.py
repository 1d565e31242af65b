from django.apps import AppConfig
from django.utils.module_loading import autodiscover_modules


class LedgerConfig(AppConfig):
    name = "ledger"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Each installed app declares its event types in events.py and its projections
        # in projections.py; importing them registers them.
        autodiscover_modules("events")
        autodiscover_modules("projections")
