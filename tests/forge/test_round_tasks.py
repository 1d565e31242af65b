"""Forging rounds as Celery tasks through a real worker on the Redis broker."""
import pytest
from django.conf import settings

from forge.models import RoundRow
from forge.services import abandon_stale_rounds, start_campaign, start_round
from ledger.models import Event
from measurement.harness.plan import DEFAULT_PROTOCOL, ProtocolSettings
from tests.conftest import broker_unreachable

CASE = "star2d_1/512x512/f32"


@pytest.mark.services
@pytest.mark.one_database  # in the two-pass `./dev test`: in the PostgreSQL pass, with the real services
def test_a_round_runs_on_a_real_worker_once_and_an_orphan_is_abandoned(transactional_ledger, monkeypatch):
    if not settings.CELERY_BROKER_URL:
        pytest.skip("CELERY_BROKER_URL is not set: there is no broker for a real worker")
    problem = broker_unreachable()
    if problem:
        pytest.skip(problem)
    from celery.contrib.testing.worker import start_worker

    from config.celery import app
    from forge.tasks import forge_round

    # The task takes no protocol, so the gate would time with the default one (7 passes x 5
    # launches, up to 3 attempts: most of a minute here). What is tested is the worker path:
    # one timing attempt of 3 x 3 is enough (the worker runs in this process, in a thread).
    monkeypatch.setitem(DEFAULT_PROTOCOL, "cpu", ProtocolSettings(passes=3, launches=3, warmup=1, max_attempts=1))
    campaign = start_campaign([CASE], "cpu", "levers", 3, "user:test")
    first = start_round(campaign, CASE, "levers", "agent:test")
    with start_worker(app, pool="solo", queues=["cpu"], perform_ping_check=False, shutdown_timeout=60):
        outcome = forge_round.apply_async(args=[first, "levers", "worker:test"], queue="cpu").get(timeout=600)
        events = Event.objects.count()
        again = forge_round.apply_async(args=[first, "levers", "worker:test"], queue="cpu").get(timeout=120)
    assert again == outcome and Event.objects.count() == events
    assert RoundRow.objects.get(round=first).status in ("committed", "reverted")
    orphan = start_round(campaign, CASE, "levers", "agent:test")  # its worker "dies" before running it
    assert abandon_stale_rounds(campaign, "agent:resume") == 1
    assert RoundRow.objects.get(round=orphan).status == "abandoned"
    assert Event.objects.filter(type="RoundAbandoned").count() == 1
