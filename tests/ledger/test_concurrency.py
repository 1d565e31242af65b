"""Several processes appending at once still produce one linear, verifiable chain."""
import subprocess
import sys
from pathlib import Path

from django.db.models import Count, Max

from ledger.models import Event, StreamHead
from ledger.verification import verify_ledger
from tests.conftest import subprocess_env

ROOT = Path(__file__).resolve().parents[2]
WORKERS, PER_WORKER = 4, 1000


def test_four_processes_appending_1000_events_each(transactional_ledger):
    env = subprocess_env()
    children = [
        subprocess.Popen([sys.executable, "-m", "tests.ledger.append_worker", str(n), str(PER_WORKER)],
                         cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for n in range(WORKERS)
    ]
    outputs = [child.communicate(timeout=600) for child in children]
    assert [child.returncode for child in children] == [0] * WORKERS, outputs
    total = 1 + WORKERS * PER_WORKER
    assert Event.objects.count() == total
    assert Event.objects.aggregate(Max("position"))["position__max"] == total
    assert Event.objects.values("event_id").distinct().count() == total
    per_actor = dict(Event.objects.filter(actor__startswith="worker:").values_list("actor").annotate(Count("position")))
    assert per_actor == {f"worker:{n}": PER_WORKER for n in range(WORKERS)}
    assert StreamHead.objects.get(stream="concurrency/shared").version == WORKERS * PER_WORKER // 10
    report = verify_ledger()
    assert report.ok, report.summary()
