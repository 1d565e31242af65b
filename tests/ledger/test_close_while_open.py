"""The reaper's append (ledger.leases.append_while_open) against a worker that ends its work between
the reaper's check and its append: the stream's version is read before the check, so the end is
read again and the work stays as it ended (issue 21). The interleaving is made, not raced."""
from ledger import leases
from ledger.models import Event
from ledger.services import NewEvent, append
from ledger.verification import verify_ledger

STREAM = "rerun/7d0c6b1e-0000-4000-8000-000000000001"
RERUN = STREAM.split("/", 1)[1]
WORKER = {"host": "worker-1", "pid": 4242, "last_heartbeat": "2026-12-01T21:00:00+00:00"}


def test_work_ended_between_the_reapers_check_and_its_append_stays_ended(ledger):
    append(NewEvent(stream=STREAM, type="RerunRequested", actor="user:test", payload={
        "rerun": RERUN, "kind": "case", "target": "star_1/64x64x64/f32", "backend": "cpu", "result": "r",
        "protocol": None}))
    checks: list[bool] = []

    def still_open() -> bool:
        """Open at the first check, and the worker's end lands right after it."""
        checks.append(not Event.objects.filter(stream=STREAM, type="RerunFinished").exists())
        if len(checks) == 1:
            append(NewEvent(stream=STREAM, type="RerunFinished", actor="user:test",
                            payload={"rerun": RERUN, "state": "failed", "detail": "ended by its worker"}))
        return checks[-1]

    assert not leases.append_while_open(STREAM, still_open, "RerunAbandoned",
                                        {"rerun": RERUN, "reason": "its worker died", "worker": WORKER})
    assert checks == [True, False]
    recorded = list(Event.objects.filter(stream=STREAM).order_by("position").values_list("type", flat=True))
    assert recorded == ["RerunRequested", "RerunFinished"]
    assert verify_ledger().ok
