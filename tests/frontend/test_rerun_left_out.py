"""A gate re-run that left library baselines out of contention (measurement.contenders) says which,
wherever its verdict is shown: the case page's history and re-run table, the re-run list, the
re-run's own page and the API; one that timed every baseline shows no such line. Each re-run is a
real one (frontend.reruns.run_rerun, what the worker's task does) of the real admitted kernel
(`admit`), its verdict recorded by the gate."""
from __future__ import annotations

import re

import pytest
from rest_framework.test import APIClient

from frontend.reruns import request_rerun, run_rerun
from ledger.models import Event
from ledger.records import RecordedEvent
from ledger.services import record_from_row
from measurement import contenders
from measurement.contenders import out_of_contention
from measurement.models import OperatorResult
from tests.forge.fixtures import CASE, QUICK

PROTOCOL = {"passes": QUICK.passes, "launches": QUICK.launches, "warmup": QUICK.warmup, "max_attempts": 1}
CASE_URL = f"/cases/cpu/{CASE}/"
WHY = "(out of contention: ≥3x behind the bound when last timed)"


def rerun_with_factor(monkeypatch, factor: float) -> tuple[str, RecordedEvent]:
    """Re-run the admitted result with the contention rule at `factor` (the pages then read the real rule);
    (re-run id, its verdict)."""
    with monkeypatch.context() as patched:
        patched.setattr(contenders, "CONTENTION_FACTOR", factor)
        # requested in the test's transaction, so never dispatched: run here, as the worker's task would
        rerun_id = request_rerun("case", CASE, "user:alice", protocol=PROTOCOL)
        status = run_rerun(rerun_id)
    assert status["state"] == "finished", status["detail"]
    verdict = record_from_row(Event.objects.get(position=status["outcome"]["verdict_position"]))
    assert verdict.type == "GateVerdict" and verdict.data["revises"]
    return rerun_id, verdict


def history_item(page: str, position: int) -> str:
    """The case page's history entry of the re-run verdict at `position`."""
    section = page[page.index('<section id="history">'):]
    entry = rf'<li class="GateVerdict"><a href="[^"]*">#{position}</a> re-run #{position} .*?</li>'
    found = re.search(entry, section, re.S)
    assert found, section[:2000]
    return found.group(0)


def test_a_rerun_that_left_baselines_out_names_them_on_every_page_that_shows_it(ledger, admit, monkeypatch, client):
    admit()
    row = OperatorResult.objects.get(result=f"operator/cpu/{CASE}")
    # Any baseline behind the bound is out of contention here (as in tests/measurement/test_contenders.py:
    # which ones trail it by 3x moves with the machine's load), so this re-run leaves at least one out.
    with monkeypatch.context() as patched:
        patched.setattr(contenders, "CONTENTION_FACTOR", 1.000001)
        expected = out_of_contention(row.baselines, row.bound)
    assert expected, row.baselines
    rerun_id, verdict = rerun_with_factor(monkeypatch, 1.000001)
    left_out = verdict.data["left_out"]
    assert sorted(left_out) == sorted(expected)
    line = f"left out: {', '.join(left_out)} {WHY}"

    page = client.get(CASE_URL).content.decode()
    assert line in history_item(page, verdict.position)
    reruns_section = page[page.index('<section id="reruns">'):]
    assert line in reruns_section[:reruns_section.index("</section>")]
    assert line in client.get("/reruns/").content.decode()
    own_page = client.get(f"/reruns/{rerun_id}/").content.decode()
    assert re.search(r'<p id="rerun-left-out">\s*<small class="left-out">' + re.escape(line) + "</small></p>", own_page)
    api = APIClient()
    assert api.get(f"/api/reruns/{rerun_id}/").json()["left_out"] == left_out
    assert api.get("/api/reruns/", {"result": f"operator/cpu/{CASE}"}).json()[0]["left_out"] == left_out


def test_a_rerun_that_timed_every_baseline_shows_no_left_out_line(ledger, admit, monkeypatch, client):
    admit()
    rerun_id, verdict = rerun_with_factor(monkeypatch, float("inf"))  # no baseline is that far behind
    assert verdict.data["left_out"] == []

    page = client.get(CASE_URL).content.decode()
    assert history_item(page, verdict.position)  # the re-run is in the history
    assert f'href="/reruns/{rerun_id}/"' in page  # and in the re-run table
    for shown in (page, client.get("/reruns/").content.decode(), client.get(f"/reruns/{rerun_id}/").content.decode()):
        assert "left out:" not in shown and "left-out" not in shown
    assert APIClient().get(f"/api/reruns/{rerun_id}/").json()["left_out"] == []
