import os
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.db import connection, transaction

from ledger.db_guard import install_guards, remove_guards
from ledger.models import Event
from ledger.records import RecordedEvent
from ledger.selectors import stream_events
from ledger.services import NewEvent, append, initialise_ledger, record_from_row
from ledger.transfer import import_ledger

H200_CAMPAIGN = Path(__file__).resolve().parents[1] / "fixtures" / "ledgers" / "h200_campaign.jsonl"


def erase_ledger() -> None:
    """Empty the events and projections the way only a test may: triggers off, delete, triggers on."""
    from ledger.models import Event, ProjectionState
    from ledger.projection_base import registered

    remove_guards(connection)
    Event.objects.all().delete()
    install_guards(connection)
    for projection in registered():
        projection.model.objects.all().delete()
    ProjectionState.objects.all().delete()


@pytest.fixture
def ledger(db):
    """An initialised ledger (rolled back after the test)."""
    return initialise_ledger("test ledger", "user:test")


@pytest.fixture(scope="module")
def h200_campaign_module(django_db_setup, django_db_blocker):
    """The shipped H200 export imported once for a whole module, as `./dev run`'s seed imports it.

    An import takes 10-16 s of a loaded CI core (docs/testing.md, session 38); a module of tests that
    read it would pay that per test. The import runs in a transaction the module's end rolls back,
    and each test's own `db` transaction nests in it as a savepoint that is rolled back after the
    test, so every test still sees exactly the import and nothing a test before it wrote. Not for
    `transactional_db` tests or ones that start other processes: nothing here is committed, and
    on PostgreSQL the chain's advisory lock is held until the module ends."""
    with django_db_blocker.unblock(), transaction.atomic():
        initialise_ledger("test ledger", "user:test")
        import_ledger(H200_CAMPAIGN, "user:test")
        with django_db_blocker.block():  # between, only a test that asks for `db` reaches the database
            yield
        transaction.set_rollback(True)


@pytest.fixture
def h200_campaign(h200_campaign_module, db):
    """The shipped H200 export, imported once a module (`h200_campaign_module`); this test's writes roll back."""


@pytest.fixture
def _guards_back_after_flush(django_db_blocker):
    """Set up before transactional_db, so torn down after its flush: put the triggers back."""
    yield
    with django_db_blocker.unblock():
        install_guards(connection)


@pytest.fixture
def transactional_ledger(_guards_back_after_flush, transactional_db):
    """For tests whose writes must be visible to other processes or threads.

    Django empties the database after such a test (TRUNCATE on PostgreSQL), which the
    append-only triggers refuse; they are lifted for that flush only.
    """
    event = initialise_ledger("test ledger", "user:test")
    yield event
    remove_guards(connection)


@pytest.fixture
def speed_rule_lifted(monkeypatch):
    """Lift only the gate's must-beat-the-public-bound rule (a shared 2-core CPU cannot
    promise a CI above 1); every other check still runs. For tests of what happens after
    admission."""
    lift_speed_rule(monkeypatch)


def lift_speed_rule(monkeypatch) -> None:
    """The speed_rule_lifted fixture's work, for a test that lifts the rule part-way through."""
    from measurement import services

    real = services._candidate_reasons

    def lifted(report, candidate):
        reasons, detail, speedup, ci = real(report, candidate)
        return [r for r in reasons if r != "not_faster_than_public_bound"], detail, speedup, ci

    monkeypatch.setattr(services, "_candidate_reasons", lifted)


def downgrade(result: str, to_value: float, **extra) -> NewEvent:
    return NewEvent(
        stream=result,
        type="ResultDowngraded",
        actor="user:reviewer",
        payload={"result": result, "from_value": 2.31, "to_value": to_value, "reason": "re-run slower"},
        **extra,
    )


def some_events(count: int) -> list:
    return [append(downgrade(f"case/star_1/{n}x{n}x{n}/f32", 1.5 + n / 100)) for n in range(count)]


def on_postgres() -> bool:
    return connection.vendor == "postgresql"


def database_url_for_subprocess() -> str:
    """A DATABASE_URL naming the test database this session created, for child processes."""
    settings = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{settings['NAME']}"
    host = settings["HOST"] or "127.0.0.1"
    port = settings["PORT"] or 5432
    password = f":{settings['PASSWORD']}" if settings["PASSWORD"] else ""
    return f"postgres://{settings['USER']}{password}@{host}:{port}/{settings['NAME']}"


def subprocess_env(**extra: str) -> dict:
    env = dict(os.environ)
    env["DATABASE_URL"] = database_url_for_subprocess()
    env.update(extra)
    return env


def broker_unreachable() -> str | None:
    """Why a real worker cannot run here (None when the broker answers)."""
    from django.conf import settings

    from config.celery import app

    try:
        with app.connection_for_write() as connection:
            connection.ensure_connection(max_retries=1, timeout=3)
    except Exception as exc:  # any transport error means: no broker here
        return f"broker {settings.CELERY_BROKER_URL} unreachable: {exc}"
    return None


@pytest.fixture(scope="session")
def recorded_runs(tmp_path_factory):
    """A folder for the exports of real runs that several tests need (see replay_or_record)."""
    return tmp_path_factory.mktemp("recorded-runs")


def replay_or_record(folder, name: str, record) -> bool:
    """Make this test's ledger hold a real run: the first time in a session `record()` runs it
    (real measurements, appended here) and the ledger is exported; later tests import that
    export instead of measuring again (the same real events, kept with their origin), since
    each test starts from an empty ledger. Returns True when it recorded."""
    from ledger.transfer import export_ledger, import_ledger

    from ledger.services import head

    path = folder / f"{name}.jsonl"
    if path.exists():
        import_ledger(path, "user:test")
        return False
    assert head()[0] == 1, "record a shared run first in a test, before anything else is appended (it is exported whole)"
    record()
    with path.open("w", encoding="utf-8") as handle:
        export_ledger(handle)
    return True


@dataclass
class Admitted:
    verdict_event: RecordedEvent
    measured_event: RecordedEvent

    @property
    def speedup(self) -> float:
        return self.verdict_event.data["speedup"]


@pytest.fixture
def admit(recorded_runs, speed_rule_lifted):
    """`admit()` gives this test's ledger a real admitted result: the honest kernel gated on a
    tiny CPU case (tests/forge/fixtures.py: CASE, QUICK; the frontend tests' TINY). The gate runs
    once a session (replay_or_record), for every test whose starting point is an admitted kernel.
    On a loaded 2-core machine a launch-overhead estimate can still push an honest tiny kernel
    under the physics floor; then the gate runs again, at most three times."""
    from measurement import services
    from measurement.backends.base import Kernel
    from tests.forge.fixtures import CASE, HONEST, QUICK

    def record() -> None:
        details = []
        for _ in range(3):
            outcome = services.gate_candidate(CASE, "cpu", Kernel(HONEST, {"threads": 1}), "agent:test", protocol=QUICK)
            if outcome.verdict == "admitted":
                return
            details.append(outcome.detail)
        pytest.fail(f"the gate admitted the honest kernel in none of three runs: {details}")

    def admitted() -> Admitted:
        replay_or_record(recorded_runs, "admitted-tiny", record)
        verdict = next(e for e in reversed(stream_events(services.result_key("cpu", CASE)))
                       if e.type == "GateVerdict" and e.data["verdict"] == "admitted")
        measured = record_from_row(Event.objects.get(event_id=verdict.data["measurement"]))
        return Admitted(verdict, measured)

    return admitted
