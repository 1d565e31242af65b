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


def test_operator_table_links_each_result_to_its_verdict(ledger, client, speed_rule_lifted):
    from pathlib import Path

    from measurement import services
    from measurement.backends.base import Kernel
    from measurement.harness.plan import ProtocolSettings

    assert "nothing admitted yet" in client.get("/operators/").content.decode()
    honest = (Path(__file__).parents[1] / "measurement" / "cheats" / "honest.c").read_text()
    outcome = services.gate_candidate("star_1/64x64x64/f32", "cpu", Kernel(honest, {"threads": 1}), "agent:test",
                                      protocol=ProtocolSettings(passes=2, launches=2, warmup=1, max_attempts=1))
    html = client.get("/operators/").content.decode()
    assert "star_1/64x64x64/f32" in html and "admitted" in html
    assert f'href="/events/{outcome.verdict_event.position}/"' in html
