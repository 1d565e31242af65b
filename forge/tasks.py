"""Celery tasks of the forge: thin, id-taking, idempotent (an ended round returns its outcome)."""
from dataclasses import asdict

from celery import shared_task

from .proposers import make_proposer
from .services import execute_round


@shared_task(name="forge.round")
def forge_round(round_id: str, proposer_name: str, actor: str) -> dict:
    return asdict(execute_round(round_id, make_proposer(proposer_name), actor))
