"""The application pages and the ablations page on real events: registered manifests, a real
application gate run of a small C program built here, and real ablation runs."""
from __future__ import annotations

import re

from django.db import connection
from django.test.utils import CaptureQueriesContext

from appgate.models import AppRow
from appgate.protocol_ablation import ablate_app
from appgate.services import register, run_gate
from forge.ablation import run_ablation
from tests.appgate.test_gate import QUICK, smooth_app
from tests.appgate.test_manifest import write_app
from tests.appgate.test_protocol_ablation import QUICK_APP, smoothing_app
from tests.frontend.test_pages_case import QUICK as QUICK_CASE
from tests.frontend.test_pages_case import figures


def register_apps(tmp_path, first: int, count: int) -> None:
    for number in range(first, first + count):
        (tmp_path / f"app{number}").mkdir()
        register(write_app(tmp_path / f"app{number}", name=f"app-{number:03d}", domain=f"domain {number % 7}"), "user:test")


def table_queries(client) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert client.get("/apps/").status_code == 200
    return len(queries)


def test_the_application_table_takes_the_same_queries_for_5_and_125_applications(ledger, tmp_path, client, django_assert_max_num_queries):
    register_apps(tmp_path, 0, 5)
    few = table_queries(client)
    register_apps(tmp_path, 5, 120)
    with django_assert_max_num_queries(few):
        html = client.get("/apps/").content.decode()
    assert html.count('class="app-link"') == 125 and "125 applications" in html
    assert few == table_queries(client) and few <= 6
    filtered = client.get("/apps/", {"search": "domain 3", "sort": "-app"}).content.decode()
    names = re.findall(r'class="app-link" href="/apps/(app-\d+)/"', filtered)
    assert names == sorted((f"app-{n:03d}" for n in range(125) if n % 7 == 3), reverse=True)
    assert client.get("/apps/", {"state": "HAPPY"}).status_code == 400


def test_the_application_page_shows_state_verdict_every_raw_sample_and_both_builds(ledger, tmp_path, client):
    outcome = run_gate(smooth_app(tmp_path), "user:test", QUICK)
    row = AppRow.objects.get(name="smooth")
    table = client.get("/apps/").content.decode()
    assert 'href="/apps/smooth/"' in table and f'class="{row.status}"' in table
    html = client.get("/apps/smooth/").content.decode()
    assert f'href="/events/{outcome.verdict_event.position}/"' in html and outcome.verdict_event.hash in html
    assert f"{outcome.verdict_event.data['headline']:.3f}×" in html and "Amdahl" in html
    for payload in outcome.measured:
        for variant, samples in payload["samples"].items():
            assert all(repr(s) in html for s in samples), (payload["dataset"], variant)
    assert html.count("-DFORGED") >= 1 and "cc -O2" in html  # both variants' build commands
    assert len([f for f in figures(html) if f["data"][0]["type"] == "box"]) == 2  # one per dataset
    assert ">verifies<" in html
    assert client.get("/apps/nothing/").status_code == 404


def test_the_ablations_page_shows_both_tables_from_real_runs(ledger, tmp_path, client):
    assert "no protocol ablation recorded" in client.get("/ablations/").content.decode()
    protocol = ablate_app(str(smoothing_app(tmp_path)), "user:test", QUICK_APP, wrong_switch="-DFORGED -DWRONG")
    search = run_ablation("star_1/64x64x64/f32", "cpu", 1, "user:test", protocol=QUICK_CASE, arms=("autotune",))
    html = client.get("/ablations/").content.decode()
    for arm in protocol.arms:
        assert f"<td>{arm.arm}</td>" in html
    assert f"ablation/{protocol.ablation}" in html and "app/cpu/smoothing" in html and "fresh process" in html
    autotune = search[0].event
    assert f'href="/events/{autotune.position}/"' in html and f"ablation/{autotune.data['ablation']}" in html
    if autotune.data["best_speedup"] is not None:
        assert f"{autotune.data['best_speedup']:.3f}×" in html
