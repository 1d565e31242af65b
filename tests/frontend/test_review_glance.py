"""Issue 19, points 7 and 8: sign-off comments are shown with their reviewer, version and time; a
second sign-off of the same version by the same reviewer is not recorded and says what is still
missing (page and API); a noisy badge says which variant's spread crossed which band, and a quiet
dataset says how quiet it was; source listings keep the source's own line numbers."""
from __future__ import annotations

import html
import re
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import Group, User
from django.test import Client

from frontend.templatetags.audit import source_code
from ledger.models import Event
from ledger.transfer import import_ledger
from tests.frontend.test_tables import TINY

ROOT = Path(settings.BASE_DIR)


def reviewer(name: str) -> Client:
    client = Client()
    account = User.objects.create_user(name, password="pw")
    account.groups.add(Group.objects.get(name="Reviewer"))
    client.force_login(account)
    return client


def text_of(markup: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html.unescape(markup)))


def text(response) -> str:
    return text_of(response.content.decode())


def test_signoffs_show_their_comments_and_a_second_one_by_the_same_reviewer_is_refused(ledger, speed_rule_lifted, admit):
    admit()
    key, url = f"operator/cpu/{TINY}", f"/cases/cpu/{TINY}/"
    alice = reviewer("alice")
    first = alice.post("/actions/sign-off/", {"result": key, "comment": "every sample checked", "next": url}, follow=True)
    assert f"Signed off {key} version 1" in text(first)
    raw = alice.get(url).content.decode()
    page = text_of(raw)
    assert "user:alice signed off version 1" in page and "<q>every sample checked</q>" in raw and "(1 of 2)" in page
    again = alice.post("/actions/sign-off/", {"result": key, "comment": "again", "next": url}, follow=True)
    shown = text(again)
    assert "Signed off" not in shown and f"Not recorded again: user:alice signed off version 1 of {key} already" in shown
    assert "it needs 1 more, different reviewer(s)" in shown
    assert Event.objects.filter(type="AuditSignedOff").count() == 1
    api = alice.post("/api/signoffs/", {"result": key}, content_type="application/json")
    assert api.status_code == 400 and "signed off version 1" in api.json()["detail"]
    bob = reviewer("bob")
    bob.post("/actions/sign-off/", {"result": key, "next": url})
    page = text(bob.get(url))
    assert "user:bob signed off version 1" in page and "(no comment)" in page and "Publishable" in page
    chain = bob.get(f"/api/provenance/case/cpu/{TINY}/").json()
    assert [(s["reviewer"], s["comment"]) for s in chain["signoffs"]] == [("user:alice", "every sample checked"),
                                                                         ("user:bob", "")]


def test_a_noisy_badge_says_which_spread_crossed_the_band_and_a_quiet_dataset_says_how_quiet(ledger, client):
    import_ledger(ROOT / "docs/benchmarks/appgate_h200.jsonl", "user:test")
    from frontend.provenance import application_chain

    app = "heat3d-cuda"  # one dataset noisy (a baseline spread of 2.7%), two quiet (0.1-0.4%)
    datasets = application_chain(app)["datasets"]
    assert {d["noisy"] for d in datasets} == {True, False}
    page = client.get(f"/apps/{app}/").content.decode()
    for dataset in datasets:
        heading = re.search(rf'<div id="dataset-{dataset["position"]}">\s*<h3>(.*?)</h3>', page, re.S).group(1)
        worst = max((v for v in dataset["spread"].items() if v[1] is not None), key=lambda item: item[1])
        if dataset["noisy"]:
            assert f"noisy: {worst[0]} spread {worst[1] * 100:.1f}% &gt; the 2.0% band" in heading, heading
        else:
            assert f"quiet: widest spread {worst[1] * 100:.1f}% ({worst[0]}) within the 2.0% band" in heading, heading
    assert "Spread = (max − min) / median" in page


def test_source_listings_number_the_sources_own_lines():
    listing = source_code("\n\nint x;\nint y;\n")  # two blank lines first: pygments drops them by default
    gutter = re.search(r'<td class="linenos">.*?</td>', listing, re.S).group(0)
    assert re.findall(r'<span class="normal">\s*(\d+)</span>', gutter) == ["1", "2", "3", "4"]
    code = re.search(r'<td class="code">.*?</td>', listing, re.S).group(0)
    assert re.sub(r"<[^>]+>", "", code).split("\n")[2:4] == ["int x;", "int y;"]
