"""Celery tasks of the ledger: thin, id-taking, idempotent."""
from celery import shared_task

from .leases import reap
from .verification import run_verification


@shared_task(name="ledger.verify", queue="cpu")
def verify_ledger_task(run_id: int) -> str:
    return run_verification(run_id).status


@shared_task(name="ledger.reap", queue="cpu")
def reap_task() -> list[str]:
    """Run by beat every REAPER_INTERVAL_S: close the work of dead workers (ledger/leases.py)."""
    return [item.key for item in reap()]
