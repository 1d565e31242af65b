"""Forging rounds as Celery tasks through a real worker on the Redis broker; a campaign whose
worker died mid-round, resumed; `forge run` with no worker to take its round."""
import os
import signal
import subprocess
import sys
import time

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError

from forge.models import CaseCampaign, RoundRow
from forge.services import abandon_stale_rounds, start_campaign, start_round
from ledger.models import Event, Lease
from ledger.selectors import stream_events
from ledger.verification import verify_ledger
from measurement.harness.plan import DEFAULT_PROTOCOL, ProtocolSettings
from tests.conftest import broker_unreachable, subprocess_env

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


def real_broker() -> None:
    if not settings.CELERY_BROKER_URL:
        pytest.skip("CELERY_BROKER_URL is not set: there is no broker for a real worker")
    problem = broker_unreachable()
    if problem:
        pytest.skip(problem)


@pytest.mark.services
@pytest.mark.one_database
def test_a_campaign_whose_worker_died_mid_round_is_resumed_to_its_end(transactional_ledger, monkeypatch):
    real_broker()
    from celery.contrib.testing.worker import start_worker

    from config.celery import app

    campaign = start_campaign([CASE], "cpu", "levers", 1, "user:test")
    doomed = start_round(campaign, CASE, "levers", "agent:test")
    worker = subprocess.Popen(  # a worker process running the round with the canonical protocol: minutes
        [sys.executable, "-c", "import sys, django; django.setup(); from forge.proposers import make_proposer; "
         "from forge.services import execute_round; execute_round(sys.argv[1], make_proposer('levers'), 'worker:doomed')", doomed],
        cwd=settings.BASE_DIR, env=subprocess_env(DJANGO_SETTINGS_MODULE="config.settings"), start_new_session=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 180
        while RoundRow.objects.get(round=doomed).status != "proposed" and worker.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert RoundRow.objects.get(round=doomed).status == "proposed", worker.stdout.read().decode()[-3000:] if worker.poll() is not None else "no proposal"
        assert Lease.objects.get(key=f"round/{campaign}/{doomed}").pid == worker.pid
    finally:
        os.killpg(worker.pid, signal.SIGKILL)  # mid-measurement
        worker.wait()
    monkeypatch.setitem(DEFAULT_PROTOCOL, "cpu", ProtocolSettings(passes=2, launches=2, warmup=1, max_attempts=1))
    with start_worker(app, pool="solo", queues=["cpu"], perform_ping_check=False, shutdown_timeout=60):
        call_command("forge", "resume", campaign)
    abandoned = [e for e in stream_events(f"round/{campaign}/{doomed}") if e.type == "RoundAbandoned"]
    assert len(abandoned) == 1 and abandoned[0].data["worker"]["pid"] == worker.pid
    assert f"pid {worker.pid} is no longer running" in abandoned[0].data["reason"]
    rounds = RoundRow.objects.filter(campaign=campaign).order_by("number", "position")
    assert [r.status for r in rounds][0] == "abandoned" and rounds.last().status in ("committed", "reverted")
    assert CaseCampaign.objects.get(campaign=campaign).converged == "budget_spent"
    assert not Lease.objects.exists() and verify_ledger().ok


@pytest.mark.services
def test_forge_run_stops_with_a_message_when_no_worker_takes_its_round(transactional_ledger, settings):
    real_broker()
    from config.celery import app

    settings.FORGE_ROUND_CLAIM_TIMEOUT_S = 1
    try:  # the gpu queue: no worker of the test suite listens there
        with pytest.raises(CommandError, match=r"round 1 of star_1/32x32x32/f32: no worker on queue gpu took it within 1 s: "
                                               r"start one \(`celery -A config worker -Q gpu`\); then `manage.py forge resume "):
            call_command("forge", "run", "--case", "star_1/32x32x32/f32", "--backend", "cuda", "--rounds", "1")
    finally:
        with app.connection_for_write() as connection:
            connection.default_channel.queue_purge("gpu")
    assert RoundRow.objects.get().status == "abandoned"  # a worker that takes it later finds it closed

