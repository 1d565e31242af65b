"""A prototype, measured and not kept (docs/ledger_benchmarks.md, "Tried and not kept"): group
commit across processes on PostgreSQL, so that `append()` calls made at the same time by separate
processes share one transaction, one hold of the chain lock, one pair of round trips and one WAL
flush. benchmarks/ledger_bench_writers.py (`--writers-paths plain,group`) runs it beside the plain
append; the ledger itself never calls it.

Why it was tried: a single append holds the chain lock from its first round trip through its
COMMIT's flush, so writers queue on it and never share a flush ("More writers").

How it works, for a caller outside any atomic block:

- The caller validates its event (the plain path's refusals, raised before anything is sent),
  posts it as a row of an UNLOGGED request table (committed without a WAL flush), and in the same
  round trip tries the chain lock, session-level (`pg_try_advisory_lock`, the key of every append),
  and, granted, reads the pending requests in a statement of their own (its snapshot follows the
  grant, so it sees every batch committed before).
- Whoever holds the lock leads: it appends the pending requests, in the order they were posted,
  with `append_many`'s statements in one transaction, each request sequenced on its own: a request
  refused there (a stale expected version, an event id reused for other content, a projection's
  refusal) is left out and handed back to its caller, which runs it alone on the plain path and so
  gets the plain path's own answer; a write the database refuses hands every request back. The
  same transaction deletes the batch's requests and NOTIFYs each caller its answer, which
  PostgreSQL delivers only after the commit is durable. Then the leader releases the lock and, in
  the same round trip, wakes the oldest request still pending, whose caller tries the lock in turn.
- A caller not leading waits for its answer on its own LISTEN channel; not answered within
  `WAIT_S` (its leader died, and the server rolled its transaction back and freed its lock; or a
  plain append inside an atomic block holds the lock), it tries the lock itself.
- A request whose caller dies after posting it is appended once by the next leader, its answer
  going to nobody.
"""
from __future__ import annotations

import json
import time
import uuid
import weakref
from dataclasses import dataclass
from typing import Any, Union

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections

from ledger.append_sql import Session
from ledger.errors import ConcurrencyError, IdempotencyConflict, LedgerError
from ledger.models import Event
from ledger.projection_base import Projection, TableRows
from ledger.records import RecordedEvent
from ledger.services import (CHAIN_LOCK_KEY, NewEvent, _ChainState, _events_by_id, _insert, _read_projected_rows,
                             _record_positions, _sequence, _unsealed, _validate, append_many)

TABLE = "bench_append_request"
CREATE_TABLE = (f"CREATE UNLOGGED TABLE IF NOT EXISTS {TABLE} "
                "(id bigserial PRIMARY KEY, channel text NOT NULL, request text NOT NULL)")
WAIT_S = 0.05  # a caller not answered this long tries the lock itself (a dead leader, or a plain append holding it)
MAX_BATCH = 500  # requests a leader takes at once: append_many's batch of the benchmarks
MAX_ANSWER = 7900  # bytes of a NOTIFY payload (PostgreSQL's limit is 8000); a longer event is read back by position


def create_table() -> None:
    """The request table, in the benchmark's database (the prototype has no migration)."""
    connections[DEFAULT_DB_ALIAS].cursor().execute(CREATE_TABLE)


class _Alone:
    """The answer 'run it alone on the plain path': the batch could not record this request."""


ALONE = _Alone()
Answer = Union[RecordedEvent, _Alone]


@dataclass(frozen=True)
class _Request:
    id: int
    channel: str
    new: NewEvent


def append_grouped(new: NewEvent) -> RecordedEvent:
    """Append one event through the group commit; returns what the plain `append` would, or
    raises what it would (a refused request runs on the plain path itself)."""
    _, payload, schema_version = _validate(new)
    connection = connections[DEFAULT_DB_ALIAS]
    cursor = connection.cursor()
    channel = _listening(connection, cursor)
    request_id, pending = _post(cursor, channel, new, payload, schema_version)
    while True:
        answer = _lead(connection, pending, request_id) if pending is not None else None
        if answer is None:
            answer = _await(connection, request_id)
        if answer is not None:
            break
        pending = _try_lead(cursor)
    if answer is ALONE:
        return append_many([new])[0]
    return answer


# connection (psycopg's) -> the channel it LISTENs on; a new connection listens anew
_channels: "weakref.WeakKeyDictionary[Any, str]" = weakref.WeakKeyDictionary()


def _listening(connection, cursor) -> str:
    raw = connection.connection
    if raw not in _channels:
        channel = f"ledger_append_{raw.info.backend_pid}"
        cursor.execute(f"LISTEN {channel}")
        _channels[raw] = channel
    return _channels[raw]


# Try the lock, then (a statement of its own, so its snapshot follows the grant and sees every
# batch committed before it) read the pending requests if it was granted.
TRY_LEAD = (f"SELECT set_config('ledger.group_leader', pg_try_advisory_lock({CHAIN_LOCK_KEY})::text, false); "
            f"SELECT id, channel, request FROM {TABLE} WHERE current_setting('ledger.group_leader')::boolean "
            f"ORDER BY id LIMIT {MAX_BATCH}")
# Free the lock, then wake the oldest request still pending (posted after the last batch was read):
# its caller tries the lock, leads and takes every pending one.
RELEASE = (f"SELECT pg_advisory_unlock({CHAIN_LOCK_KEY}); "
           f"SELECT pg_notify(channel, id || ' l') FROM (SELECT id, channel FROM {TABLE} ORDER BY id LIMIT 1) o")


def _post(cursor, channel: str, new: NewEvent, payload: dict[str, Any],
          schema_version: int) -> tuple[int, list[_Request] | None]:
    """Post the request and try to lead, in one round trip: (its id, the pending requests if this
    caller leads, else None). The request is committed before the lock is tried, so a leader
    holding the lock sees it at the latest when it wakes the pending after its release."""
    request = json.dumps({"stream": new.stream, "type": new.type, "payload": payload, "actor": new.actor,
                          "event_id": None if new.event_id is None else str(new.event_id),
                          "expected_version": new.expected_version, "origin": new.origin,
                          "schema_version": schema_version})
    cursor.execute(f"INSERT INTO {TABLE} (channel, request) VALUES (%s, %s) RETURNING id; COMMIT; {TRY_LEAD}",
                   [channel, request])
    results = cursor.cursor
    request_id = results.fetchone()[0]
    return request_id, _led(results)


def _try_lead(cursor) -> list[_Request] | None:
    cursor.execute(TRY_LEAD)
    return _led(cursor.cursor)


def _led(results) -> list[_Request] | None:
    """From TRY_LEAD's results (the current one, or one after it): the pending requests, or None
    when the lock was not granted."""
    while results.rownumber is None or results.description[0].name != "set_config":
        if not results.nextset():
            raise DatabaseError("the lock's result is missing")
    granted = results.fetchone()[0] == "true"
    results.nextset()
    return _requests(results.fetchall()) if granted else None


def _requests(rows: list[tuple]) -> list[_Request]:
    return [_Request(id, channel, _new_event(json.loads(request))) for id, channel, request in rows]


def _lead(connection, pending: list[_Request], own: int) -> Answer | None:
    """Holding the lock: append the pending requests, release the lock and wake the next caller.
    Returns this caller's answer, or None when another leader took its request (the answer is
    then on its channel). Handing the lock over after one batch lets the callers just answered
    post again before the next batch is read, which keeps batches large (leading on while
    requests were pending, measured, made them smaller and the rate lower)."""
    try:
        answers = _settle(pending, own)
    except BaseException:
        if connection.is_usable():
            connection.cursor().execute(RELEASE)
        raise
    connection.cursor().execute(RELEASE)
    return answers.get(own)


def _new_event(fields: dict[str, Any]) -> NewEvent:
    event_id = fields.pop("event_id")
    return NewEvent(**fields, event_id=None if event_id is None else uuid.UUID(event_id))


def _settle(requests: list[_Request], own: int) -> dict[int, Answer]:
    """Append the requests in one transaction and return their answers. A request a projection
    refuses goes alone and the rest are tried again; a write the database refuses sends every one
    alone."""
    todo, answers = list(requests), {}
    while todo:
        try:
            answers.update(_append_batch(todo, own))
            return answers
        except _Refused as refused:
            answers[refused.request_id] = ALONE
            _answer_now([request for request in todo if request.id == refused.request_id], own)
            todo = [request for request in todo if request.id != refused.request_id]
        except DatabaseError:
            answers.update(dict.fromkeys((request.id for request in todo), ALONE))
            _answer_now(todo, own)
            break
    return answers


class _Refused(Exception):
    def __init__(self, request_id: int) -> None:
        super().__init__(request_id)
        self.request_id = request_id


def _append_batch(requests: list[_Request], own: int) -> dict[int, Answer]:
    """`append_many`'s two round trips for every request at once, each request sequenced on its
    own (the chain lock is this session's already). The write's round trip also deletes the
    requests and answers their callers, before COMMIT."""
    answers: dict[int, Answer] = {}
    validated = []
    for request in requests:
        try:
            validated.append((request, _validate(request.new)))
        except LedgerError:
            answers[request.id] = ALONE
    session = Session()
    with session.transaction():
        chain = _ChainState(session, {new.stream for _, (new, _, _) in validated})
        known = _events_by_id(session, [new.event_id for _, (new, _, _) in validated if new.event_id is not None])
        work = _read_projected_rows(session, [_unsealed(*each) for _, each in validated])
        session.send()
        position, prev_hash, versions = chain()
        found = known()
        fresh: list[tuple[RecordedEvent, int]] = []
        for request, each in validated:
            try:
                (event,), new = _sequence([each], (position, prev_hash, versions), found)
            except (ConcurrencyError, IdempotencyConflict):
                answers[request.id] = ALONE
                continue
            answers[request.id] = event
            if new:
                position, prev_hash = event.position, event.hash
                fresh.append((event, request.id))
        if fresh:
            events = [event for event, _ in fresh]
            _insert(session, events)
            _project(work(), fresh)
            _record_positions(session, events, chain.states)
        session.queue(_answers_sql, 2, [[request.id, _text(answers[request.id], request.id, own)]
                                        for request in requests])
        session.finish()
    return answers


def _project(work: list[tuple[Projection, TableRows]], fresh: list[tuple[RecordedEvent, int]]) -> None:
    """`services._project`, naming the request whose event a projection refuses."""
    for projection, rows in work:
        for event, request_id in fresh:
            if projection.wants(event):
                try:
                    projection.apply(event, rows)
                except Exception as error:
                    raise _Refused(request_id) from error
        rows.flush()


def _answers_sql(rows: int) -> str:
    """Delete the requests and NOTIFY each caller its answer (none for an empty one: the leader's
    own), as a data-modifying statement, which runs to the end whether or not it is read."""
    values = ", ".join(["(%s::bigint, %s::text)"] * rows)
    return (f"DELETE FROM {TABLE} r USING (VALUES {values}) a(id, answer) WHERE r.id = a.id "
            "RETURNING CASE WHEN a.answer <> '' THEN pg_notify(r.channel, a.answer) END")


def _answer_now(requests: list[_Request], own: int) -> None:
    """Answer ALONE outside a batch (its transaction was rolled back)."""
    if requests:
        rows = [value for request in requests for value in (request.id, _text(ALONE, request.id, own))]
        connections[DEFAULT_DB_ALIAS].cursor().execute(_answers_sql(len(requests)), rows)


def _text(answer: Answer, request_id: int, own: int) -> str:
    """An answer as its NOTIFY payload: '<id> e <prev_hash> <hash> <body>', '<id> p <position>'
    (too long: read it back), '<id> a' (alone); empty for the leader's own request."""
    if request_id == own:
        return ""
    if answer is ALONE:
        return f"{request_id} a"
    text = f"{request_id} e {answer.prev_hash} {answer.hash} {answer.body}"
    return text if len(text.encode()) <= MAX_ANSWER else f"{request_id} p {answer.position}"


def _await(connection, request_id: int) -> Answer | None:
    """This request's answer, or None when woken to lead or not answered within WAIT_S. Other
    requests' notes on this channel (a late wake for an earlier request) are dropped."""
    raw = connection.connection
    deadline = time.monotonic() + WAIT_S
    while (left := deadline - time.monotonic()) > 0:
        # read the generator to its end (notes that arrive in one packet are yielded together,
        # and leaving early would lose the rest), and prefer an answer to a wake among them
        notes = [note.payload.split(" ", 4) for note in raw.notifies(timeout=left, stop_after=1)]
        mine = [(kind, rest) for ident, kind, *rest in notes if int(ident) == request_id]
        for kind, rest in mine:
            if kind == "a":
                return ALONE
            if kind == "p":
                row = Event.objects.values_list("body", "prev_hash", "hash").get(position=int(rest[0]))
                return RecordedEvent.from_body(*row)
            if kind == "e":
                prev_hash, hash_, body = rest
                return RecordedEvent.from_body(body, prev_hash, hash_)
        if mine:  # woken to lead
            return None
    return None
