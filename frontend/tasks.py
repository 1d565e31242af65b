"""Celery tasks of the audit UI: thin, id-taking, idempotent (a claimed re-run is not run again)."""
from celery import shared_task

from .reruns import run_rerun


@shared_task(name="frontend.rerun")
def rerun_task(rerun_id: str) -> str:
    return run_rerun(rerun_id)["state"]
