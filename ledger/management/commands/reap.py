"""`manage.py reap`: close the running work (re-runs, rounds, app gate runs) of dead workers."""
from django.core.management.base import BaseCommand

from ledger.leases import reap


class Command(BaseCommand):
    help = ("Close the work whose worker died (its lease is no longer refreshed, or its process is gone) with an "
            "abandoned event, and remove its scratch folder. Beat runs this every REAPER_INTERVAL_S.")

    def handle(self, *args, **options) -> None:
        reaped = reap(log=self.stdout.write)
        self.stdout.write(f"reaped {len(reaped)} lease(s) of dead workers")
