"""Leases: which live process holds which running work, so that work whose process died is closed.

Work that runs for a while and leaves a stream open (a gate re-run, a forging round, an
application gate run) takes a lease in the same transaction as the event that claims it: the
`Lease` row names the work (its stream), the owning app's kind, and the holder (host, pid and
the process's identity). A daemon thread of the holding process refreshes `heartbeat_at` every
WORKER_HEARTBEAT_S; ending the work deletes the row and its scratch folder.

`reap()` ends every lease whose process is dead: its heartbeat is older than WORKER_LEASE_S, or
the process is known dead at once because it ran on this machine, in this pid namespace, and its
pid is gone, a zombie or reused (a Celery pool child killed with SIGKILL, a web server stopped).
For each, the app that registered the kind appends its `…Abandoned` event naming the reason and
the dead worker; then the lease and its scratch folder go. The reaper runs from Celery beat every
REAPER_INTERVAL_S, when a worker starts, from `manage.py reap`, while `forge run` waits for a
round, and in the embedded default when the web process starts (docs/workers.md).

Why the database and not Redis: the embedded default has no broker, and the same rule must
hold there. Why not events: a heartbeat is not a fact, and would grow the chain every few seconds.
"""
from __future__ import annotations

import logging
import os
import shutil
import socket
import tempfile
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Callable, Iterator

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models.functions import Now
from django.utils.module_loading import import_string

from .errors import ConcurrencyError
from .event_types import Payload
from .models import Lease
from .selectors import stream_version
from .services import NewEvent, append

# kind -> dotted path of `handler(subject, reason, worker) -> bool` (True: it closed the work).
# Apps register their own kinds in AppConfig.ready, so this module imports none of them.
_HANDLERS: dict[str, str] = {}
logger = logging.getLogger(__name__)


# Scratch folders of leased work: outside var/ (which holds the signing key), one per machine user.
SCRATCH_ROOT = Path(tempfile.gettempdir()) / f"forgestencil-scratch-{os.getuid()}"


class LeaseHeld(Exception):
    """Another process holds this work: it runs there (or its death has not been reaped yet)."""


def register(kind: str, handler: str) -> None:
    _HANDLERS[kind] = handler


# ---- the holder's identity ---------------------------------------------------------------


def _boot_and_namespace() -> str:
    """This machine's boot and pid namespace: a pid means the same process only where both match
    (two containers can share a host name, never a pid namespace)."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:  # not Linux: only heartbeats tell a dead holder
        return ""
    return f"{boot}:{namespace}"


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot, or None when it is gone or a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) ": state is field 3 of the line
    return None if fields[0] in ("Z", "X") else fields[19]


def _identity(pid: int) -> str:
    place = _boot_and_namespace()
    start = _start_time(pid) if place else None
    return f"{place}:{start}" if place and start else ""


def _known_dead(lease: Lease) -> bool:
    place = _boot_and_namespace()
    if not lease.process or not place or lease.host != socket.gethostname() or not lease.process.startswith(place + ":"):
        return False
    return _identity(lease.pid) != lease.process


class WorkerIdentity(Payload):
    """The dead holder as every `…Abandoned` event records it."""

    host: str
    pid: int
    last_heartbeat: str  # ISO time of the lease's last refresh, by the database's clock


def worker(lease: Lease) -> dict:
    return WorkerIdentity(host=lease.host, pid=lease.pid, last_heartbeat=lease.heartbeat_at.isoformat()).model_dump()


# ---- holding -----------------------------------------------------------------------------


class _Heartbeat:
    """One daemon thread per process refreshes every lease the process holds. Times come from
    the database's clock (Now()), so hosts with skewed clocks do not declare each other dead."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Also after a fork: the child holds none of its parent's leases and runs no thread yet."""
        self.keys: set[str] = set()
        self.lock = threading.Lock()
        self.wake = threading.Event()
        self.thread: threading.Thread | None = None

    def add(self, key: str) -> None:
        with self.lock:
            self.keys.add(key)
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._run, name="lease-heartbeat", daemon=True)
                self.thread.start()
        self.wake.set()  # beat now: a thread asleep on an earlier, longer interval starts the new one

    def discard(self, key: str) -> None:
        with self.lock:
            self.keys.discard(key)

    def _run(self) -> None:
        while True:
            self.wake.wait(settings.WORKER_HEARTBEAT_S)
            self.wake.clear()
            with self.lock:
                keys = sorted(self.keys)
            if not keys:
                continue
            try:
                Lease.objects.filter(key__in=keys, pid=os.getpid()).update(heartbeat_at=Now())
            except Exception:  # a database hiccup: the next beat tries again; the lease allows a few misses
                logger.warning("lease heartbeat failed", exc_info=True)
            finally:
                connection.close()  # this thread's own connection; do not keep it open between beats


_heartbeat = _Heartbeat()
os.register_at_fork(after_in_child=_heartbeat.reset)


def take(kind: str, subject: str, key: str, *, scratch: bool = False) -> Lease:
    """Record that this process now runs `key`. Call it inside the transaction that appends the
    claiming event, so that no claimed work is ever without a lease. LeaseHeld if it is taken.
    `scratch`: the work gets a folder of its own (`lease.scratch`), removed with the lease."""
    if kind not in _HANDLERS:
        raise ValueError(f"no app registered the lease kind {kind!r}; known: {', '.join(sorted(_HANDLERS))}")
    folder = str(SCRATCH_ROOT / key.replace("/", "_")) if scratch else ""
    lease = Lease(key=key, kind=kind, subject=subject, host=socket.gethostname(), pid=os.getpid(),
                  process=_identity(os.getpid()), scratch=folder, started_at=Now(), heartbeat_at=Now())
    try:
        with transaction.atomic():
            lease.save(force_insert=True)
    except IntegrityError:
        raise LeaseHeld(f"{key} is held by another process") from None
    return lease


@contextmanager
def holding(lease: Lease) -> Iterator[Lease]:
    """Keep the lease alive while the work runs; end it (row and scratch folder) when it ends."""
    if lease.scratch:
        Path(lease.scratch).mkdir(parents=True, exist_ok=True)
    _heartbeat.add(lease.key)
    try:
        yield lease
    finally:
        _heartbeat.discard(lease.key)
        Lease.objects.filter(key=lease.key, pid=lease.pid).delete()
        if lease.scratch:
            shutil.rmtree(lease.scratch, ignore_errors=True)


def is_held(key: str) -> Lease | None:
    """The live lease of `key`, or None when nobody (alive) holds it."""
    lease = Lease.objects.filter(key=key).first()
    return lease if lease is not None and _dead_reason(lease, _stale({key})) is None else None


# ---- reaping -----------------------------------------------------------------------------


class _StillAlive(Exception):
    pass


@dataclass(frozen=True)
class Reaped:
    key: str
    kind: str
    subject: str
    reason: str
    closed: bool  # False: the work had already ended (its own events were written), only the lease went


def _stale(keys: set[str] | None) -> set[str]:
    """Keys whose last heartbeat is older than WORKER_LEASE_S by the database's clock."""
    leases = Lease.objects.filter(heartbeat_at__lt=Now() - timedelta(seconds=settings.WORKER_LEASE_S))
    if keys is not None:
        leases = leases.filter(key__in=keys)
    return set(leases.values_list("key", flat=True))


def _dead_reason(lease: Lease, stale: set[str]) -> str | None:
    if _known_dead(lease):
        return f"its worker {lease.host} pid {lease.pid} is no longer running"
    if lease.key in stale:
        return (f"its worker {lease.host} pid {lease.pid} sent no heartbeat since {lease.heartbeat_at.isoformat()} "
                f"(more than {settings.WORKER_LEASE_S:g} s)")
    return None


def reap(keys: list[str] | None = None, log: Callable[[str], None] | None = None) -> list[Reaped]:
    """End every lease (of `keys`, or all) whose process died: the owning app closes the work with
    its abandoned event, then the lease and its scratch folder are removed. Idempotent; safe to
    run in several processes at once (each handler appends with the stream's expected version)."""
    leases = Lease.objects.all() if keys is None else Lease.objects.filter(key__in=keys)
    stale = _stale(None if keys is None else set(keys))
    reaped = []
    for lease in leases.order_by("started_at"):
        reason = _dead_reason(lease, stale)
        handler = _HANDLERS.get(lease.kind)
        if reason is None or handler is None:  # alive, or of an app not installed here
            continue
        try:
            with transaction.atomic():  # the abandoned event and the lease's end are seen together
                closed = import_string(handler)(lease.subject, reason, worker(lease))
                # unless it beat meanwhile (never equality: SQLite keeps Now() to the millisecond)
                ended, _ = (Lease.objects.filter(key=lease.key, pid=lease.pid)
                            .exclude(heartbeat_at__gt=lease.heartbeat_at).delete())
                if not ended:
                    raise _StillAlive(lease.key)
        except _StillAlive:  # it refreshed its heartbeat meanwhile: it runs, nothing was written
            continue
        except Exception:  # one work that cannot be closed must not keep the others open
            logger.exception("could not close %s", lease.key)
            continue
        if lease.scratch:
            shutil.rmtree(lease.scratch, ignore_errors=True)
        item = Reaped(lease.key, lease.kind, lease.subject, reason, closed)
        reaped.append(item)
        if log is not None:
            log(f"{item.key}: {'abandoned' if closed else 'already ended'}: {reason}")
    return reaped


REAPER = "system:reaper"  # the actor of the events that close a dead worker's work


def append_while_open(stream: str, still_open: Callable[[], bool], event_type: str, payload: dict,
                      *, actor: str = REAPER) -> bool:
    """A reaper handler's append: at the stream's version as read, while `still_open()`. An event
    the dead worker wrote meanwhile is read again (ConcurrencyError), and work it ended stays as it
    ended. Five tries: a dead worker's stream moves at most by what it wrote before dying."""
    for _ in range(5):
        version = stream_version(stream)  # before still_open: an end landing between the two fails the append
        if not still_open():
            return False
        try:
            append(NewEvent(stream=stream, type=event_type, actor=actor, expected_version=version, payload=payload))
            return True
        except ConcurrencyError:
            continue
    return False


def reap_at_start() -> None:
    """What a process that runs tasks does when it starts (a Celery worker; the web server in the
    embedded default): close what a predecessor left running. A database not migrated yet has
    nothing to close; the connection is closed after, so no forked child ever shares it."""
    from django.db import DatabaseError, connections

    try:
        reap(log=logger.warning)
    except DatabaseError as error:
        logger.warning("no leases reaped at start: %s", error)
    finally:
        connections.close_all()

