import pytest

from ledger.verification import request_verification, run_verification
from tests.conftest import some_events


@pytest.fixture
def seeded(ledger, client):
    some_events(3)
    run_verification(request_verification("user:test").pk)
    return client


def test_dashboard_shows_head_counts_and_verification(seeded):
    html = seeded.get("/").content.decode()
    assert "test ledger" in html and "#4" in html and "passed" in html
    assert "ResultDowngraded" in html and "<strong>4</strong> in 4 streams" in html


def test_event_browser_filters(seeded):
    html = seeded.get("/events/", {"type": "LedgerInitialised"}).content.decode()
    assert "1 events" in html and 'href="/events/1/"' in html and 'href="/events/2/"' not in html
    html = seeded.get("/events/", {"stream": "case/star_1/1x1x1"}).content.decode()
    assert "1 events" in html and 'href="/events/3/"' in html


def test_event_page_shows_the_canonical_json_and_hashes(seeded):
    html = seeded.get("/events/2/").content.decode()
    assert "ResultDowngraded" in html and "recorded here" in html and "&quot;to_value&quot;:1.5" in html
    assert seeded.get("/events/42/").status_code == 404
