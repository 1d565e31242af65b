"""Celery application. Without CELERY_BROKER_URL, tasks run in-process (the embedded default)."""
import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("forgestencil")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
