import pytest
from django.contrib.auth.models import User
from django.test import override_settings
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from ledger.verification import request_verification, run_verification
from tests.conftest import some_events


@pytest.fixture
def client(ledger):
    some_events(5)
    return APIClient()


def test_events_list_is_cursor_paginated_in_position_order(client):
    page = client.get("/api/events/", {"page_size": 4}).json()
    assert [e["position"] for e in page["results"]] == [1, 2, 3, 4]
    assert page["previous"] is None and "cursor=" in page["next"]
    rest = client.get(page["next"]).json()
    assert [e["position"] for e in rest["results"]] == [5, 6] and rest["next"] is None


def test_event_fields_include_payload_origin_and_hashes(client):
    event = client.get("/api/events/2/").json()
    assert event["type"] == "ResultDowngraded" and event["payload"]["result"] == "case/star_1/0x0x0/f32"
    assert event["origin"] is None and len(event["hash"]) == 64
    assert event["canonical"].startswith('{"actor":"user:reviewer"')
    assert client.get("/api/events/99/").status_code == 404


@pytest.mark.parametrize(
    "params, positions",
    [
        ({"type": "LedgerInitialised"}, [1]),
        ({"stream": "case/star_1/2x2x2/f32"}, [4]),
        ({"position_min": 3, "position_max": 4}, [3, 4]),
        ({"actor": "user:reviewer", "position_max": 2}, [2]),
        ({"stream_prefix": "case/"}, [2, 3, 4, 5, 6]),
    ],
)
def test_event_filters(client, params, positions):
    assert [e["position"] for e in client.get("/api/events/", params).json()["results"]] == positions


def test_a_bad_filter_value_is_a_400(client):
    response = client.get("/api/events/", {"position_min": "soon"})
    assert response.status_code == 400 and "position_min" in response.json()


def test_stream_endpoint_gives_head_and_events(client):
    data = client.get("/api/streams/case/star_1/3x3x3/f32/").json()
    assert data["stream"]["version"] == 1 and data["stream"]["last_position"] == 5
    assert [e["position"] for e in data["results"]] == [5]
    assert client.get("/api/streams/case/none/").status_code == 404
    streams = client.get("/api/streams/", {"stream__startswith": "case/"}).json()
    assert len(streams) == 5


def test_status_reports_head_count_and_last_verification(client):
    run_verification(request_verification("user:test").pk)
    status = client.get("/api/ledger/status/").json()
    assert status["head_position"] == 6 and status["event_count"] == 6
    assert status["last_verification"]["status"] == "passed"


def test_schema_and_docs_are_served(client):
    schema = client.get("/api/schema/")
    assert schema.status_code == 200 and b"/api/events/" in schema.content
    docs = client.get("/api/docs/")
    assert docs.status_code == 200 and b"swagger-ui" in docs.content
    assert b"cdn" not in docs.content.lower()


def test_the_api_is_read_only(client):
    assert client.post("/api/events/", {"type": "x"}, format="json").status_code == 405
    assert client.delete("/api/events/2/").status_code == 405


@override_settings(API_ANONYMOUS_READ=False)
def test_without_anonymous_read_a_token_or_session_is_needed(client):
    assert client.get("/api/events/").status_code in (401, 403)
    user = User.objects.create_user("reviewer", password="pw")
    token = Token.objects.create(user=user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    assert client.get("/api/events/").status_code == 200
    client.credentials()
    client.force_login(user)
    assert client.get("/api/ledger/status/").status_code == 200


def test_the_openapi_schema_validates_without_warnings(db):
    from django.core.management import call_command

    call_command("spectacular", "--validate", "--fail-on-warn", "--file", "/dev/null")
