"""The reviewer's actions from the pages: login, permission and CSRF on every write; sign-off by
two reviewers; retraction with a required reason; publication freeze and its check; a gate
re-run whose page polls its progress and shows the outcome and the history line."""
from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client

from frontend import reruns
from frontend.models import RerunRow
from ledger.models import Event
from measurement import services as measurement_services
from measurement.models import OperatorResult
from tests.frontend.test_pages_case import CASE, CASE_URL, QUICK

ACTIONS = {
    "/actions/sign-off/": {"result": f"operator/cpu/{CASE}"},
    "/actions/retract/": {"result": f"operator/cpu/{CASE}", "reason": "because"},
    "/actions/rerun/": {"kind": "case", "target": CASE, "backend": "cpu", "confirmed": "1"},  # the confirm step's POST
    "/actions/freeze/": {},
}


def user(name: str, group: str | None = None) -> User:
    account = User.objects.create_user(name, password="pw")
    if group:
        account.groups.add(Group.objects.get(name=group))
    return account


def logged_in(name: str, group: str | None = None, **options) -> Client:
    client = Client(**options)
    client.force_login(user(name, group))
    return client


def page(client: Client, url: str = CASE_URL) -> str:
    return client.get(url).content.decode()


@pytest.mark.parametrize("url", ACTIONS)
def test_every_action_needs_login_permission_post_and_csrf(forged, url):
    events = Event.objects.count()
    anonymous = Client().post(url, ACTIONS[url])
    assert anonymous.status_code == 302 and anonymous["Location"].startswith(f"/accounts/login/?next={url}")
    assert logged_in("viewer").post(url, ACTIONS[url]).status_code == 403
    maintainer = logged_in("maintainer", "Maintainer", enforce_csrf_checks=True)
    assert maintainer.post(url, ACTIONS[url]).status_code == 403  # no CSRF token
    assert maintainer.get(url).status_code == 405
    assert Event.objects.count() == events
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page(maintainer)).group(1)
    assert maintainer.post(url, {**ACTIONS[url], "csrfmiddlewaretoken": token}).status_code == 302
    assert Event.objects.count() > events


def test_forms_are_shown_only_to_users_with_the_permission(forged):
    assert "Log in</a> to sign off" in page(Client())
    viewer = page(logged_in("viewer"))
    assert "/actions/" not in viewer and "no reviewer permission" in viewer
    reviewer = page(logged_in("reviewer", "Reviewer"))
    assert 'action="/actions/sign-off/"' in reviewer and 'action="/actions/rerun/"' in reviewer
    assert 'action="/actions/retract/"' not in reviewer
    maintainer = page(logged_in("maintainer", "Maintainer"))
    assert 'action="/actions/retract/"' in maintainer
    assert 'action="/actions/freeze/"' in page(logged_in("maintainer2", "Maintainer"), "/")
    assert 'action="/actions/freeze/"' not in page(logged_in("reviewer2", "Reviewer"), "/")


def test_two_different_reviewers_make_a_result_publishable_and_a_revision_resets_it(forged):
    alice, bob = logged_in("alice", "Reviewer"), logged_in("bob", "Reviewer")
    response = alice.post("/actions/sign-off/", {"result": forged, "comment": "looked at the samples", "next": CASE_URL}, follow=True)
    assert "Signed off operator/cpu/star_1/64x64x64/f32 version 1" in response.content.decode()
    response = alice.post("/actions/sign-off/", {"result": forged, "next": CASE_URL}, follow=True)  # not recorded twice
    assert "Not recorded again: user:alice signed off version 1" in response.content.decode()
    assert "Not publishable" in page(alice)
    bob.post("/actions/sign-off/", {"result": forged, "next": CASE_URL})
    html = page(bob)
    assert "signed off by user:alice, user:bob (2 of 2)." in html and '<span class="publishable">Publishable</span>' in html
    assert "✓ publishable" in page(bob, "/operators/")
    maintainer = logged_in("maintainer", "Maintainer")
    maintainer.post("/actions/retract/", {"result": forged, "reason": "a faster baseline exists", "next": CASE_URL})
    html = page(maintainer)
    assert "Version <strong>2</strong>" in html and "no sign-off yet" in html and "Not publishable" in html
    refused = alice.post("/actions/sign-off/", {"result": forged, "next": CASE_URL}, follow=True).content.decode()
    assert "Sign-off refused: operator/cpu/star_1/64x64x64/f32 is retracted" in refused
    unknown = alice.post("/actions/sign-off/", {"result": "operator/cpu/nothing", "next": CASE_URL}, follow=True).content.decode()
    assert "Sign-off refused: no result &#x27;operator/cpu/nothing&#x27; exists" in unknown


def test_a_retraction_needs_a_reason_and_enters_the_history(forged):
    maintainer = logged_in("maintainer", "Maintainer")
    refused = maintainer.post("/actions/retract/", {"result": forged, "reason": "  ", "next": CASE_URL}, follow=True)
    assert "Retraction refused: a retraction needs a reason" in refused.content.decode()
    assert OperatorResult.objects.get(result=forged).status == "admitted"
    response = maintainer.post("/actions/retract/", {"result": forged, "reason": "the bound was mis-built", "next": CASE_URL})
    assert response.status_code == 302 and response["Location"] == CASE_URL
    html = page(maintainer)
    assert re.search(r"retracted on \d{4}-\d\d-\d\d by user:maintainer, because the bound was mis-built", html)
    assert '<span class="retracted">retracted</span>' in html
    retraction = Event.objects.filter(type="ResultRetracted").get()
    assert retraction.actor == "user:maintainer"
    # an outside `next` is not followed
    elsewhere = maintainer.post("/actions/sign-off/", {"result": forged, "next": "https://example.com/"})
    assert elsewhere["Location"] == "/"


def test_a_freeze_records_the_published_tables_and_its_check_page_compares_them(forged):
    alice, bob = logged_in("alice", "Reviewer"), logged_in("bob", "Reviewer")
    for client in (alice, bob):
        client.post("/actions/sign-off/", {"result": forged})
    maintainer = logged_in("maintainer", "Maintainer")
    response = maintainer.post("/actions/freeze/")
    position = Event.objects.get(type="PublicationFrozen").position
    assert response["Location"] == f"/freezes/{position}/"
    html = page(maintainer, response["Location"])
    assert html.count('<span class="ok">matches</span>') == 2 and f'href="/api/freezes/{position}/tables/operator-cases/"' in html
    assert f'href="/freezes/{position}/"' in page(maintainer, "/")
    maintainer.post("/actions/retract/", {"result": forged, "reason": "noisy machine"})
    html = page(Client(), f"/freezes/{position}/")  # anyone may check
    assert "differs: the published table changed since the freeze" in html
    assert Client().get("/freezes/1/").status_code == 404


def test_a_rerun_page_polls_its_progress_and_shows_the_outcome_and_history(forged, monkeypatch, django_capture_on_commit_callbacks):
    monkeypatch.setitem(measurement_services.DEFAULT_PROTOCOL, "cpu", QUICK)
    reviewer = logged_in("reviewer", "Reviewer")
    with django_capture_on_commit_callbacks(execute=False) as dispatched:
        response = reviewer.post("/actions/rerun/", {"kind": "case", "target": CASE, "backend": "cpu", "confirmed": "1"})
    assert len(dispatched) == 1
    rerun_id = RerunRow.objects.get().rerun
    assert response["Location"] == f"/reruns/{rerun_id}/"
    html = page(reviewer, response["Location"])
    assert "queued" in html and f'data-url="/reruns/{rerun_id}/status/"' in html and 'src="/static/frontend/rerun.js"' in html
    fragment = reviewer.get(f"/reruns/{rerun_id}/status/")
    assert fragment["X-Rerun-State"] == "queued" and fragment["X-Rerun-Done"] == "0" and "<html" not in fragment.content.decode()
    reruns.run_rerun(rerun_id)  # what the Celery task does
    fragment = reviewer.get(f"/reruns/{rerun_id}/status/")
    html = fragment.content.decode()
    status = reruns.rerun_status(rerun_id)
    assert fragment["X-Rerun-State"] == "finished" and fragment["X-Rerun-Done"] == "1" and status["progress"]
    assert all(line in html for line in status["progress"]) and status["history_line"] in html
    assert re.match(r"was \d+\.\d{3}× on \d{4}-\d\d-\d\d", status["history_line"])
    verdict = status["outcome"]["verdict_position"]
    assert f'href="/events/{verdict}/"' in html and CASE_URL in html
    case_page = page(reviewer)
    assert f"re-run #{verdict}" in case_page and case_page.count("Measurement <a") == 2  # the admission's and the re-run's samples
    refused = reviewer.post("/actions/rerun/", {"kind": "case", "target": "star_1/8x8x8/f32", "backend": "cpu", "next": "/operators/"},
                            follow=True).content.decode()
    assert "Re-run refused: no kernel was ever admitted for star_1/8x8x8/f32" in refused
    assert reviewer.get("/reruns/not-a-rerun/").status_code == 404


def test_login_and_logout_pages(db, client):
    user("carol", "Reviewer")
    assert 'name="username"' in client.get("/accounts/login/").content.decode()
    response = client.post("/accounts/login/", {"username": "carol", "password": "pw"})
    assert response.status_code == 302 and response["Location"] == "/"
    assert "signed in as <strong>carol</strong>" in page(client, "/")
    wrong = Client().post("/accounts/login/", {"username": "carol", "password": "no"}).content.decode()
    assert "did not match" in wrong
    assert client.post("/accounts/logout/").status_code == 302
    assert "signed in as" not in page(client, "/")
