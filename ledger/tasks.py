"""Celery tasks of the ledger: thin, id-taking, idempotent."""
from celery import shared_task

from .verification import run_verification


@shared_task(name="ledger.verify", queue="cpu")
def verify_ledger_task(run_id: int) -> str:
    return run_verification(run_id).status
