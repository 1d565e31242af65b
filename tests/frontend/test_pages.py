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


def test_the_operator_table_lists_every_case_of_a_matrix_before_anything_is_admitted(ledger, client):
    from measurement.matrices import load_matrix, matrix_cases

    assert "no rows" in client.get("/operators/").content.decode()
    load_matrix("cpu", "user:test")
    html = client.get("/operators/", {"matrix": "cpu"}).content.decode()
    cases = matrix_cases("cpu")
    assert f"{len(cases)} rows" in html and html.count('<td class="none">none</td>') == len(cases)
    assert all(f'href="/cases/cpu/{case}/history/"' in html for case in cases)
    assert 'class="case-link"' not in html  # no provenance without an admitted kernel
    assert client.get("/operators/", {"matrix": "nope"}).status_code == 400


def test_event_browser_filters_by_actor_and_position_and_keeps_filters_across_pages(seeded):
    html = seeded.get("/events/", {"actor": "user:reviewer", "position_min": "3"}).content.decode()
    assert "not counted" in html and 'href="/events/3/"' in html and 'href="/events/4/"' in html and 'href="/events/2/"' not in html
    html = seeded.get("/events/", {"position_min": "2", "position_max": "2"}).content.decode()
    assert 'href="/events/2/"' in html and 'href="/events/1/"' not in html and 'href="/events/3/"' not in html
    some_events(60)
    html = seeded.get("/events/", {"actor": "user:reviewer"}).content.decode()
    # newest first, 50 a page; the older page is keyed by position and keeps the filter
    assert 'href="/events/64/"' in html and 'href="/events/15/"' in html and 'href="/events/14/"' not in html
    assert 'href="?actor=user%3Areviewer&amp;before=15"' in html and "after=" not in html
    assert "ResultDowngraded" in html and '<option value="ResultDowngraded">' in html  # the type filter's choices


def test_the_plotly_bundle_is_served_by_the_app(client):
    import plotly
    from pathlib import Path

    response = client.get("/assets/plotly.min.js")
    body = b"".join(response.streaming_content)
    assert response.status_code == 200 and response["Content-Type"] == "text/javascript"
    assert body == (Path(plotly.__file__).parent / "package_data" / "plotly.min.js").read_bytes()


def test_pages_load_no_script_from_another_host(seeded):
    import re

    for url in ("/", "/operators/", "/apps/", "/ablations/", "/events/", "/events/2/", "/accounts/login/", "/operators/figures/"):
        html = seeded.get(url).content.decode()
        assert re.findall(r'<script src="([^"]+)"', html) in ([], ["/assets/plotly.min.js", "/static/frontend/plots.js"]), url
        # in the addresses the page loads or links, not anywhere: a CSRF token once held "cdn" (session 35)
        addresses = re.findall(r'(?:src|href|action)="([^"]*)"', html)
        assert addresses and not any("cdn" in address.lower() for address in addresses) and "https://" not in html, url
