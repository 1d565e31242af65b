"""Child process of the concurrency test: worker N appends COUNT events, one transaction each.

Every 10th event goes to a stream shared by all workers, written with an expected version
and retried on conflict, so optimistic concurrency is exercised across processes too.
"""
import os
import sys
import uuid

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django.setup()

from ledger.errors import ConcurrencyError  # noqa: E402
from ledger.models import StreamHead  # noqa: E402
from ledger.services import NewEvent, append  # noqa: E402

NAMESPACE = uuid.UUID("6f1c0a52-8d0e-4a7b-9d43-2f4b1d1b7a10")
SHARED = "concurrency/shared"


def main(worker: int, count: int) -> None:
    conflicts = 0
    for i in range(count):
        shared = i % 10 == 0
        stream = SHARED if shared else f"concurrency/w{worker}"
        payload = {"result": f"concurrency/w{worker}/{i}", "result_version": 1, "reviewer": f"worker-{worker}"}
        while True:
            expected = None
            if shared:
                expected = StreamHead.objects.filter(stream=SHARED).values_list("version", flat=True).first() or 0
            try:
                append(NewEvent(stream=stream, type="AuditSignedOff", payload=payload, actor=f"worker:{worker}",
                                event_id=uuid.uuid5(NAMESPACE, f"{worker}/{i}"), expected_version=expected))
                break
            except ConcurrencyError:
                conflicts += 1
    print(f"worker {worker}: {count} appended, {conflicts} conflicts retried")


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
