import pytest
from django.conf import settings

from ledger.models import VerificationRun
from ledger.tasks import verify_ledger_task
from ledger.verification import request_verification
from tests.conftest import broker_unreachable, some_events


def test_verify_task_is_idempotent(ledger):
    some_events(2)
    run = request_verification("user:test")
    assert verify_ledger_task.apply(args=[run.pk]).get() == "passed"
    finished = VerificationRun.objects.get(pk=run.pk)
    some_events(1)
    assert verify_ledger_task.apply(args=[run.pk]).get() == "passed"
    assert VerificationRun.objects.get(pk=run.pk).finished_at == finished.finished_at
    assert finished.head_position == 3


@pytest.mark.services
def test_verify_task_runs_through_a_real_worker(transactional_ledger):
    if not settings.CELERY_BROKER_URL:
        pytest.skip("CELERY_BROKER_URL is not set: tasks run in-process, there is no broker for a real worker")
    problem = broker_unreachable()
    if problem:
        pytest.skip(problem)
    from celery.contrib.testing.worker import start_worker

    from config.celery import app

    some_events(3)
    run = request_verification("user:test")
    with start_worker(app, pool="solo", queues=["cpu"], perform_ping_check=False, shutdown_timeout=30):
        result = verify_ledger_task.delay(run.pk)
        assert result.get(timeout=120) == "passed"
    run.refresh_from_db()
    assert run.status == "passed" and run.head_position == 4
