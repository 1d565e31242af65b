"""WSGI entry point. In the embedded default (no broker) this process also runs the tasks (a
re-run runs on a thread of it), so when it starts it first closes the work a stopped server left
running: such a re-run ends abandoned instead of "running" for good (ledger/leases.py)."""
import os

from django.conf import settings
from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_wsgi_application()

if settings.CELERY_TASK_ALWAYS_EAGER:
    from ledger.leases import reap_at_start

    reap_at_start()
