"""Celery application. Without CELERY_BROKER_URL, tasks run in-process (the embedded default).

Workers: `celery -A config worker -Q cpu` (the prefork pool) and one `celery -A config beat`
per deployment, whose schedule runs the reaper (`ledger.reap`) every REAPER_INTERVAL_S. A worker
also reaps once when it starts, so work left by the worker it replaces is closed at once
(docs/workers.md).

A GPU host runs one worker per GPU: `FORGESTENCIL_DEVICE_INDEX=<i> celery -A config worker -Q gpu
--concurrency 1`; at its start the worker is pinned to that device (measurement.workers).
"""
import os

from celery import Celery
from celery.signals import worker_init, worker_ready

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("forgestencil")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_ready.connect
def reap_at_start(**kwargs) -> None:
    from ledger.leases import reap_at_start

    reap_at_start()


@worker_init.connect
def pin_device(sender, **kwargs) -> None:
    """Before the pool forks: a worker started with FORGESTENCIL_DEVICE_INDEX sees only that device,
    runs one task at a time and holds the device's lock (measurement.workers); others are unchanged."""
    from measurement.workers import pin_device

    pin_device(sender.concurrency)
