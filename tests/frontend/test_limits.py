"""Limits where input enters the site: request bodies (JSON included), the length of a sign-off
comment or retraction reason (one limit for the form and the API), and OPTIONS on every route."""
from __future__ import annotations

import json

import pytest
from django.conf import settings
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from ledger.models import Event, SignOff
from ledger.review import MAX_TEXT_CHARS
from tests.frontend.test_api import client_for
from tests.frontend.test_pages_actions import logged_in
from tests.frontend.test_tables import register_apps

RESULT = "app/cpu/app000"


def test_a_20_mib_comment_through_the_api_is_refused_and_not_stored(ledger):
    register_apps(1)
    events = Event.objects.count()
    body = json.dumps({"result": RESULT, "comment": "x" * (20 * 1024 * 1024)})
    response = client_for("rita", "Reviewer").post("/api/signoffs/", body, content_type="application/json")
    assert response.status_code == 413 and "limit is 1048576" in response.json()["detail"]
    assert Event.objects.count() == events and not SignOff.objects.exists()


def test_a_body_just_under_the_limit_reaches_the_view(ledger):
    """The 413 comes from the body's size, not from the endpoint: a body of the same kind under
    the limit gets the text-length answer of the view."""
    register_apps(1)
    padding = settings.DATA_UPLOAD_MAX_MEMORY_SIZE - 100
    body = json.dumps({"result": RESULT, "comment": "x" * padding})
    response = client_for("rita", "Reviewer").post("/api/signoffs/", body, content_type="application/json")
    assert response.status_code == 400 and response.json()["comment"] == [
        f"Ensure this field has no more than {MAX_TEXT_CHARS} characters."]


@pytest.mark.parametrize("url,field,extra", [("/api/signoffs/", "comment", {}), ("/api/retractions/", "reason", {})])
def test_the_api_takes_text_up_to_the_limit_and_no_more(ledger, url, field, extra):
    register_apps(1)
    maintainer = client_for("mia", "Maintainer")
    too_long = maintainer.post(url, {"result": RESULT, field: "y" * (MAX_TEXT_CHARS + 1)}, format="json")
    assert too_long.status_code == 400 and field in too_long.json()
    assert not Event.objects.filter(type__in=["AuditSignedOff", "ResultRetracted"]).exists()
    assert maintainer.post(url, {"result": RESULT, field: "y" * MAX_TEXT_CHARS}, format="json").status_code == 201


@pytest.mark.parametrize("url,field", [("/actions/sign-off/", "comment"), ("/actions/retract/", "reason")])
def test_the_form_refuses_what_the_api_refuses(ledger, url, field):
    register_apps(1)
    maintainer = logged_in("mia", "Maintainer")
    response = maintainer.post(url, {"result": RESULT, field: "y" * (MAX_TEXT_CHARS + 1), "next": "/apps/"}, follow=True)
    assert f"the limit is {MAX_TEXT_CHARS}" in response.content.decode()
    assert not Event.objects.filter(type__in=["AuditSignedOff", "ResultRetracted"]).exists()
    maintainer.post(url, {"result": RESULT, field: "y" * MAX_TEXT_CHARS})
    assert Event.objects.filter(type__in=["AuditSignedOff", "ResultRetracted"]).count() == 1


def test_the_page_form_declares_the_same_limit(ledger):
    register_apps(1)
    text = logged_in("mia", "Maintainer").get("/apps/app000/").content.decode()
    assert text.count(f'maxlength="{MAX_TEXT_CHARS}"') == 2  # comment and reason


# Any value of the right converter reaches the view; the view may answer 404, never 500.
SAMPLE = {"int": "1", "str": "x", "path": "cpu/star_1/64x64x64/f32", "slug": "x", "uuid": "00000000-0000-0000-0000-000000000000"}


def _routes(patterns, prefix: str = "") -> list[str]:
    routes = []
    for entry in patterns:
        pattern = str(entry.pattern)
        if isinstance(entry, URLResolver):
            if not pattern.startswith("admin/"):
                routes += _routes(entry.url_patterns, prefix + pattern)
        elif isinstance(entry, URLPattern) and "(?P" not in pattern and "^" not in pattern:
            route = prefix + pattern
            for converter, value in SAMPLE.items():
                route = _fill(route, converter, value)
            routes.append("/" + route)
    return routes


def _fill(route: str, converter: str, value: str) -> str:
    while f"<{converter}:" in route:
        start = route.index(f"<{converter}:")
        route = route[:start] + value + route[route.index(">", start) + 1:]
    return route


def test_options_on_every_route_is_never_a_server_error(ledger):
    routes = _routes(get_resolver().url_patterns)
    assert "/api/freezes/1/tables/x/" in routes and "/api/events/" in routes  # the walk found the API
    client = Client(raise_request_exception=False)
    failed = {route: client.options(route).status_code for route in routes}
    assert {route: code for route, code in failed.items() if code >= 500} == {}


def test_options_on_a_frozen_table_describes_the_view_in_json(ledger):
    response = Client().options("/api/freezes/1/tables/applications/")
    assert response.status_code == 200 and response.json()["name"] == "Frozen Table"
