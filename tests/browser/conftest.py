"""Browser tests: Playwright drives Debian's Chromium (/usr/bin/chromium, never a downloaded
browser) against pytest-django's live server, on the real test database.

Every test here is skipped, with the reason, where the playwright package or Chromium is
missing. Playwright's sync API keeps an asyncio loop running in the test's thread while a
browser is open, and Django refuses ORM calls from a thread with a running loop
(SynchronousOnlyOperation). The test code's ORM calls are plain blocking calls that never share
the loop, so the browser fixture sets DJANGO_ALLOW_ASYNC_UNSAFE for exactly as long as the
browser runs (one test module).
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest
from django.db import connections

CHROMIUM = Path("/usr/bin/chromium")
TIMEOUT_MS = 20_000


def browser_missing() -> str | None:
    """Why no browser test can run here (None when they can)."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (pip install -r requirements.txt)"
    if not CHROMIUM.is_file():
        return f"no Chromium at {CHROMIUM}: install Debian's chromium package (.ci/run does)"
    return None


@pytest.fixture(autouse=True)
def _live_server_helper(request: pytest.FixtureRequest) -> Iterator[None]:
    """pytest-django's helper of the same name, asking for `transactional_ledger` instead of
    plain `transactional_db`: the flush that ends a live-server test must happen with the
    ledger's append-only triggers lifted (the plugin's helper would set up the database before
    the fixture that lifts them, so they would be back in place for the flush)."""
    if "live_server" not in request.fixturenames:
        yield
        return
    request.getfixturevalue("transactional_ledger")
    server = request.getfixturevalue("live_server")
    server._live_server_modified_settings.enable()
    yield
    server._live_server_modified_settings.disable()


@pytest.fixture(scope="module")
def browser():
    missing = browser_missing()
    if missing:
        pytest.skip(missing)
    from playwright.sync_api import sync_playwright

    with pytest.MonkeyPatch.context() as patch, sync_playwright() as playwright:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM))
        yield chromium
        chromium.close()
        # While the loop runs, Django's connection handler (context-local) hands this thread
        # other connections than outside it; close them, or PostgreSQL keeps an idle session
        # that stops the test database from being dropped at the end.
        connections.close_all()


@pytest.fixture
def page(browser, live_server):
    """A fresh browser context (no cookies) on the live server."""
    context = browser.new_context(base_url=live_server.url, accept_downloads=True)
    context.set_default_timeout(TIMEOUT_MS)
    tab = context.new_page()
    yield tab
    context.close()


CASE = "star_1/64x64x64/f32"  # big enough that a correct kernel is never timed below the launch overhead
HONEST = Path(__file__).parents[1] / "measurement" / "cheats" / "honest.c"
PASSWORD = "browser-test-password"


@pytest.fixture(scope="session")
def _gated_ledger(tmp_path_factory) -> Path:
    """Where the export of the first test's gated ledger goes (the gate runs once a session)."""
    return tmp_path_factory.mktemp("gated") / "ledger.jsonl"


@pytest.fixture
def admitted(transactional_ledger, monkeypatch, _gated_ledger):
    """An admitted kernel from a real CPU gate run (the must-beat-the-bound rule lifted: a shared
    2-core machine cannot promise a CI above 1); returns its verdict event. The first test runs
    the gate and exports that ledger; later tests import the export (the same real events, kept
    with their origin) instead of measuring again, since each test starts from an empty database."""
    from ledger.selectors import stream_events
    from ledger.transfer import export_ledger, import_ledger
    from measurement import services
    from measurement.backends.base import Kernel
    from measurement.harness.plan import ProtocolSettings
    from tests.conftest import lift_speed_rule

    lift_speed_rule(monkeypatch)
    if _gated_ledger.exists():
        import_ledger(_gated_ledger, "user:test")
        return next(e for e in stream_events(services.result_key("cpu", CASE)) if e.type == "GateVerdict")
    outcome = services.gate_candidate(CASE, "cpu", Kernel(HONEST.read_text(), {"threads": 1}), "agent:test",
                                      protocol=ProtocolSettings(passes=3, launches=3, warmup=1, max_attempts=1))
    assert outcome.verdict == "admitted", outcome.detail
    with _gated_ledger.open("w", encoding="utf-8") as handle:
        export_ledger(handle)
    return outcome.verdict_event


@pytest.fixture
def accounts(transactional_ledger) -> dict:
    """reviewer1 and reviewer2 (group Reviewer) and maintainer (group Maintainer), as created by
    the frontend's migration."""
    from django.contrib.auth.models import Group, User

    made = {}
    for username, group in (("reviewer1", "Reviewer"), ("reviewer2", "Reviewer"), ("maintainer", "Maintainer")):
        user = User.objects.create_user(username, password=PASSWORD)
        user.groups.add(Group.objects.get(name=group))
        made[username] = user
    return made


def log_in(page, username: str) -> None:
    """Through the login page, the way a reviewer does."""
    page.goto("/")
    page.get_by_role("link", name="log in").click()
    page.get_by_label("username").fill(username)
    page.get_by_label("password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.locator("header").get_by_text(f"signed in as {username}").wait_for()


def log_out(page) -> None:
    page.get_by_role("button", name="log out").click()
    page.locator("header").get_by_role("link", name="log in").wait_for()
