"""A/B of the stream-version lookup on the append path, interleaved in one process: MAX() over
the stream (the implementation before commit a6885f2) against one index probe per stream
(ledger.services._chain_state, which reads the chain head in the same statement). Fills a
fresh database with 100k events first.

    psql -h 127.0.0.1 -U postgres -c "drop database if exists qb" -c "create database qb"
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/qb PYTHONPATH=. .venv/bin/python benchmarks/stream_version_ab.py
"""
import os
import statistics
import time

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django.setup()

from django.core.management import call_command  # noqa: E402
from django.db.models import Max  # noqa: E402

from ledger import services  # noqa: E402
from ledger.models import Event  # noqa: E402
from ledger.services import NewEvent, append, append_many, initialise_ledger  # noqa: E402


def event(i: int) -> NewEvent:
    return NewEvent(stream=f"s/{i % 1000}", type="ResultDowngraded", actor="bench",
                    payload={"result": f"r/{i % 1000}", "from_value": 2.0, "to_value": 1.5, "reason": "x"})


def max_over_stream(streams: set[str]) -> tuple[int, str, dict[str, int]]:
    versions = dict.fromkeys(streams, 0)
    versions.update(Event.objects.filter(stream__in=list(streams)).values("stream")
                    .annotate(version=Max("version")).values_list("stream", "version"))
    return (*services.head(), versions)


call_command("migrate", verbosity=0)
initialise_ledger("bench", "bench")
for _ in range(200):
    append_many([event(i) for i in range(500)])
variants = {"old": max_over_stream, "new": services._chain_state}
rates: dict[str, list[float]] = {"old": [], "new": []}
for block in range(6):
    for name in ("old", "new") if block % 2 == 0 else ("new", "old"):
        services._chain_state = variants[name]
        started = time.perf_counter()
        for i in range(200):
            append(event(i))
        rates[name].append(200 / (time.perf_counter() - started))
print({name: round(statistics.median(values), 1) for name, values in rates.items()}, "events", Event.objects.count())
