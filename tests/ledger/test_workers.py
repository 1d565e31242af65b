"""Workers that die: leases of running work, their heartbeats, the reaper and its command, and the
Celery settings that put a dead worker's task back (ledger/leases.py, config/celery.py). The
worker processes themselves are killed in tests/frontend/test_reruns.py and tests/forge/test_round_tasks.py."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import timedelta
from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.db.models.functions import Now

from forge.models import RoundRow
from forge.services import round_stream, start_campaign, start_round
from ledger import leases
from ledger.models import Lease
from ledger.selectors import stream_events
from ledger.verification import verify_ledger

CASE = "star_1/32x32x32/f32"


def open_round() -> tuple[str, str]:
    campaign = start_campaign([CASE], "cpu", "levers", 1, "user:test")
    return campaign, start_round(campaign, CASE, "levers", "agent:test")


def test_a_held_lease_is_refreshed_left_alone_by_the_reaper_and_ended_with_its_scratch(transactional_ledger, settings):
    settings.WORKER_HEARTBEAT_S = 0.1
    campaign, round_id = open_round()
    lease = leases.take("round", round_id, round_stream(campaign, round_id), scratch=True)
    with leases.holding(lease):
        first = Lease.objects.get(key=lease.key).heartbeat_at
        deadline = time.monotonic() + 120
        while Lease.objects.get(key=lease.key).heartbeat_at == first and time.monotonic() < deadline:
            time.sleep(0.05)
        assert Lease.objects.get(key=lease.key).heartbeat_at > first  # the holder's thread beats
        assert leases.reap() == [] and leases.is_held(lease.key) is not None
        assert Path(lease.scratch).is_dir() and Path(lease.scratch).parent == leases.SCRATCH_ROOT
        with pytest.raises(leases.LeaseHeld, match="is held by another process"):
            leases.take("round", round_id, lease.key)
    assert not Lease.objects.exists() and not Path(lease.scratch).exists()
    assert RoundRow.objects.get(round=round_id).status == "started"  # ending a lease writes no event


def test_a_lease_whose_worker_went_silent_is_reaped_naming_the_worker(transactional_ledger):
    """A worker on another machine stopped: only its missing heartbeats tell, WORKER_LEASE_S after the last."""
    campaign, round_id = open_round()
    lease = leases.take("round", round_id, round_stream(campaign, round_id))
    Lease.objects.filter(key=lease.key).update(host="worker-7.example", pid=4242,
                                               heartbeat_at=Now() - timedelta(seconds=settings.WORKER_LEASE_S + 5))
    out = StringIO()
    call_command("reap", stdout=out)
    assert f"{lease.key}: abandoned: its worker worker-7.example pid 4242 sent no heartbeat since" in out.getvalue()
    assert out.getvalue().rstrip().endswith("reaped 1 lease(s) of dead workers")
    abandoned = stream_events(lease.key)[-1]
    assert abandoned.type == "RoundAbandoned" and abandoned.schema_version == 2 and abandoned.actor == "system:reaper"
    assert (abandoned.data["worker"]["host"], abandoned.data["worker"]["pid"]) == ("worker-7.example", 4242)
    assert f"more than {settings.WORKER_LEASE_S:g} s" in abandoned.data["reason"]
    assert RoundRow.objects.get(round=round_id).status == "abandoned" and not Lease.objects.exists()
    out = StringIO()
    call_command("reap", stdout=out)
    assert out.getvalue() == "reaped 0 lease(s) of dead workers\n"  # nothing twice
    assert verify_ledger().ok


def test_the_celery_settings_put_a_dead_workers_task_back_and_schedule_the_reaper():
    """Read in a fresh interpreter: the settings come from the environment at start."""
    code = ("import json, django; django.setup(); from config.celery import app; c = app.conf; "
            "print(json.dumps([c.task_acks_late, c.task_reject_on_worker_lost, c.worker_prefetch_multiplier, "
            "c.broker_transport_options, c.beat_schedule['reap']['task'], c.beat_schedule['reap']['schedule']]))")
    env = {"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "config.settings", "FORGESTENCIL_VAR_DIR": str(settings.VAR_DIR),
           "CELERY_BROKER_URL": "redis://127.0.0.1:1/0", "CELERY_VISIBILITY_TIMEOUT_S": "5400", "REAPER_INTERVAL_S": "7"}
    done = subprocess.run([sys.executable, "-c", code], cwd=settings.BASE_DIR, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.splitlines()[-1]) == [True, True, 1, {"visibility_timeout": 5400.0}, "ledger.reap", 7.0]
