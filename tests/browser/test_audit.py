"""What reviewers do, in a real browser: log in, read the operator table, drill from a headline
to its raw samples, sign off as two reviewers, export the table as CSV, request a gate re-run
and watch it, retract (maintainer only), freeze the published tables."""
import csv
import io
import re
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.conf import settings

from frontend.provenance import operator_chain
from tests.browser.conftest import CASE, log_in, log_out
from tests.conftest import broker_unreachable

RERUN_TIMEOUT_S = 240  # a gate run on a 2-core machine shared with other work, with room to spare

pytestmark = pytest.mark.browser


def test_a_headline_reaches_its_raw_samples_in_three_clicks(page, admitted):
    page.goto("/")
    page.get_by_role("link", name="operator table (cpu)").click()  # 1: the headline's rows
    row = page.locator("#operator-table tr", has=page.get_by_role("link", name=CASE))
    speedup = f"{admitted.data['speedup']:.2f}×"
    row.get_by_role("link", name=speedup).click()  # 2: the number's provenance
    page.get_by_role("link", name=re.compile(r"^measurement #\d+$")).click()  # 3: its measurement
    assert page.url.endswith(f"#measurement-{admitted.position - 1}")
    measured = page.locator(f"#measurement-{admitted.position - 1}")
    candidate = measured.locator("table.samples tr", has=page.locator("td", has_text="candidate")).first
    shown = [float(s) for s in candidate.locator("td").last.inner_text().split()]
    recorded = next(m for m in operator_chain("cpu", CASE)["measurements"] if m["variant"] == "candidate")
    assert shown == recorded["samples"] and len(shown) == 9  # every raw sample: 3 passes x 3 launches
    assert measured.locator("div.plot .main-svg").count() > 0  # the sample plot was drawn by plotly


def test_two_reviewers_sign_off_and_the_result_becomes_publishable(page, admitted, accounts):
    from ledger.review import signoff_state

    case_url = f"/cases/cpu/{CASE}/"
    for number, reviewer in enumerate(("reviewer1", "reviewer2"), start=1):
        log_in(page, reviewer)
        page.goto(case_url)
        page.locator("#review").get_by_label("comment").fill(f"checked the samples ({reviewer})")
        page.get_by_role("button", name="Sign off version 1").click()
        assert "Signed off operator/cpu/" in page.locator(".messages").inner_text()
        review = page.locator("#review").inner_text()
        assert ("Publishable" in review) == (number == 2), review
        log_out(page)
    assert signoff_state(admitted.data["result"]) == {
        "version": 1, "reviewers": ["user:reviewer1", "user:reviewer2"], "publishable": True}
    page.goto("/operators/")
    row = page.locator("#operator-table tr", has=page.get_by_role("link", name=CASE))
    assert "✓ publishable" in row.inner_text()


def test_the_csv_export_holds_the_rows_of_the_operator_table(page, admitted):
    from measurement.services import load_matrix, matrix_cases

    load_matrix("cpu", "user:test")  # cases without a kernel are rows too; CASE is one of them
    assert CASE in matrix_cases("cpu")
    page.goto("/operators/")
    shown = []
    for row in page.locator("#operator-table tr").all()[1:]:
        cells = row.locator("td").all()
        case = cells[0].inner_text().splitlines()[0]
        shown.append((case, cells[1].inner_text(), cells[2].inner_text().rstrip(" ⟲"), cells[3].inner_text().split(" ")[0]))
    with page.expect_download() as download:
        page.get_by_role("link", name="CSV").click()
    assert download.value.suggested_filename == "operator-cases.csv"
    exported = list(csv.DictReader(io.StringIO(Path(download.value.path()).read_text(encoding="utf-8"))))
    assert len(exported) == len(shown) == len(matrix_cases("cpu"))
    as_shown = sorted(
        (r["case"], r["backend"], r["status"], f"{float(r['speedup']):.2f}×" if r["speedup"] else "—") for r in exported
    )
    assert as_shown == sorted(shown)
    assert (CASE, "cpu", "admitted", f"{admitted.data['speedup']:.2f}×") in shown


@contextmanager
def worker_if_brokered():
    """With a broker (CI: Redis) the re-run goes to the cpu queue: run a real worker for it.
    Without one (the embedded default) the web process runs it on a thread of its own."""
    if not settings.CELERY_BROKER_URL:
        yield
        return
    problem = broker_unreachable()
    if problem:
        pytest.skip(problem)
    from celery.contrib.testing.worker import start_worker

    from config.celery import app

    with start_worker(app, pool="solo", queues=["cpu"], perform_ping_check=False, shutdown_timeout=30):
        yield


def test_a_rerun_shows_its_progress_live_then_its_outcome_and_history(page, admitted, accounts, monkeypatch):
    from frontend.reruns import rerun_status
    from measurement.harness.plan import DEFAULT_PROTOCOL, ProtocolSettings

    # The re-run takes the default protocol (7 passes x 5 launches, up to 3 attempts: about a
    # minute here). What is tested is the page following a running gate; one attempt of 3 x 3
    # (the admission's own protocol) still runs for seconds, several polls of the page. The
    # worker (or, without a broker, the server's thread) runs in this process and sees it.
    monkeypatch.setitem(DEFAULT_PROTOCOL, "cpu", ProtocolSettings(passes=3, launches=3, warmup=1, max_attempts=1))
    log_in(page, "reviewer1")
    page.goto(f"/cases/cpu/{CASE}/")
    with worker_if_brokered():
        page.get_by_role("button", name="Re-run the gate").click()
        page.get_by_role("button", name="Confirm the re-run").click()  # a re-run asks first
        page.wait_for_url(re.compile(r"/reruns/[0-9a-f-]{36}/$"))
        rerun_id = page.url.rstrip("/").rsplit("/", 1)[1]
        seen = []  # (state, progress lines) as the page showed them, without reloading it
        deadline = time.monotonic() + RERUN_TIMEOUT_S
        while time.monotonic() < deadline:
            state = page.locator("#rerun-state").inner_text()
            progress = page.locator("#rerun-progress li").all_inner_texts()
            if not seen or seen[-1] != (state, progress):
                seen.append((state, progress))
            if state in ("finished", "failed", "abandoned"):
                break
            time.sleep(0.3)
    assert seen[-1][0] == "finished", seen
    assert any(state == "running" and lines != ["no progress reported yet"] for state, lines in seen), seen
    recorded = rerun_status(rerun_id)
    assert seen[-1][1] == recorded["progress"]
    history_line = page.locator("#history-line").inner_text()
    assert history_line == recorded["history_line"] and re.match(r"^was \d+\.\d{3}× on \d{4}-\d\d-\d\d", history_line)
    verdict = recorded["outcome"]["verdict_position"]
    page.get_by_role("link", name="the result's provenance and full history →").click()
    history = page.locator("#history")
    assert history.get_by_role("link", name=f"#{verdict}").count() == 1


def test_only_a_maintainer_retracts_and_a_retraction_needs_its_reason(page, admitted, accounts):
    log_in(page, "reviewer1")
    page.goto(f"/cases/cpu/{CASE}/")
    assert page.locator("#review").get_by_role("button", name="Retract").count() == 0
    log_out(page)
    log_in(page, "maintainer")
    page.goto(f"/cases/cpu/{CASE}/")
    retract = page.locator("#review").get_by_role("button", name="Retract")
    retract.click()  # the browser refuses the empty required reason: nothing is sent
    assert page.locator(".messages").count() == 0
    page.locator("#review").get_by_label("reason").fill("the bound was built without -O3")
    retract.click()
    assert "Retracted operator/cpu/" in page.locator(".messages").inner_text()
    assert page.locator("h1 .retracted").inner_text() == "retracted"
    assert "the bound was built without -O3" in page.locator("#history").inner_text()


def test_a_freeze_of_the_published_tables_checks_against_the_ledger(page, admitted, accounts):
    log_in(page, "maintainer")
    page.get_by_role("button", name="Freeze the published tables now").click()
    page.wait_for_url(re.compile(r"/freezes/\d+/"))
    checks = page.locator("table tr td:nth-child(4)").all_inner_texts()
    assert checks and all(check == "matches" for check in checks)
