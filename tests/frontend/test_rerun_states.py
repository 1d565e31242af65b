"""Issue 19, points 2 and 3: a re-run's page says what its state means (queued on which queue,
running on a live worker, or left running by a worker that stopped reporting, which the page
stops polling for), a CUDA result offers no re-run where no worker could run it, and every
re-run stays findable: the re-runs page with strict filters, the result's page, the event page."""
from __future__ import annotations

import html
import uuid
from datetime import timedelta
from pathlib import Path

from django.conf import settings as django_settings
from django.contrib.auth.models import Group, User
from django.test import Client
from django.utils import timezone

from ledger import leases
from ledger.models import Event, Lease
from ledger.services import NewEvent, append_many
from ledger.transfer import import_ledger

ROOT = Path(django_settings.BASE_DIR)
CASE = "star_1/64x64x64/f32"


def rerun_events(state: str, *, backend: str = "cpu", target: str = CASE) -> str:
    """A re-run's own events up to `state` (queued, running, failed), as its worker appends them;
    the measuring itself is tested in test_reruns.py."""
    rerun = str(uuid.uuid4())
    stream, result = f"rerun/{rerun}", f"operator/{backend}/{target}"
    events = [NewEvent(stream=stream, type="RerunRequested", actor="user:rita", payload={
        "rerun": rerun, "kind": "case", "target": target, "backend": backend, "result": result, "protocol": None})]
    if state in ("running", "failed"):
        events.append(NewEvent(stream=stream, type="RerunStarted", actor="user:rita", payload={"rerun": rerun}))
        events.append(NewEvent(stream=stream, type="RerunProgress", actor="user:rita",
                               payload={"rerun": rerun, "message": "timing 4 variants"}))
    if state == "failed":
        events.append(NewEvent(stream=stream, type="RerunFinished", actor="user:rita",
                               payload={"rerun": rerun, "state": "failed", "detail": "OSError: no compiler"}))
    append_many(events)
    return rerun


def html_text(response) -> str:
    return html.unescape(response.content.decode())


def reviewer() -> Client:
    client = Client()
    account = User.objects.create_user("rita", password="pw")
    account.groups.add(Group.objects.get(name="Reviewer"))
    client.force_login(account)
    return client


def fragment(client: Client, rerun: str):
    response = client.get(f"/reruns/{rerun}/status/")
    return response, response.content.decode()


def test_each_state_says_what_it_means_and_a_dead_workers_rerun_is_not_polled(ledger, client, settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    queued = rerun_events("queued")
    response, html = fragment(client, queued)
    assert response["X-Rerun-Poll"] == "1" and "waiting for a worker on the <code>cpu</code> queue" in html
    assert "this server runs it itself" in html

    running = rerun_events("running")
    lease = leases.take("rerun", running, f"rerun/{running}")  # held by this live process, heartbeat now
    response, html = fragment(client, running)
    assert response["X-Rerun-Poll"] == "1" and f"the gate is measuring on {lease.host} (pid {lease.pid}" in html
    page = client.get(f"/reruns/{running}/").content.decode()
    assert 'data-poll="1"' in page

    # Its worker stops reporting (a stopped web server, a killed worker): the state is still
    # "running" until the reaper closes it, and the page says so and stops polling.
    Lease.objects.filter(key=lease.key).update(heartbeat_at=timezone.now() - timedelta(seconds=settings.WORKER_LEASE_S + 5))
    response, html = fragment(client, running)
    assert response["X-Rerun-State"] == "running" and response["X-Rerun-Poll"] == "0"
    assert f"its worker {lease.host} pid {lease.pid} stopped reporting" in html and "it will not finish" in html
    assert "the gate is measuring" not in html and 'data-poll="0"' in client.get(f"/reruns/{running}/").content.decode()

    leases.reap([lease.key])  # what beat, a worker's start or the server's start does
    response, html = fragment(client, running)
    assert response["X-Rerun-State"] == "abandoned" and response["X-Rerun-Poll"] == "0"
    assert "the process running it stopped before the end" in html and "Nothing about the result was changed" in html

    failed = rerun_events("failed")
    response, html = fragment(client, failed)
    assert response["X-Rerun-Poll"] == "0" and "The re-run failed: OSError: no compiler" in html


def test_a_cuda_result_offers_no_rerun_where_no_gpu_worker_can_run_it(ledger, settings):
    import_ledger(ROOT / "docs/benchmarks/appgate_h200.jsonl", "user:test")  # applications gated on an H200
    client = reviewer()
    settings.CELERY_TASK_ALWAYS_EAGER = True  # the embedded default: no broker, the web process runs CPU re-runs
    html = client.get("/apps/heat3d-cuda/").content.decode()
    assert 'id="rerun-blocked"' in html and "needs a worker on the `gpu` queue" in html
    assert "Re-run the gate</button>" not in html
    refused = client.post("/actions/rerun/", {"kind": "app", "target": "heat3d-cuda", "backend": "cuda"}, follow=True)
    assert "Re-run refused: a CUDA re-run needs a worker on the `gpu` queue" in refused.content.decode()
    api = client.post("/api/reruns/", {"kind": "app", "target": "heat3d-cuda"}, content_type="application/json")
    assert api.status_code == 400 and "needs a worker on the `gpu` queue" in api.json()["detail"]
    assert not Event.objects.filter(type="RerunRequested").exists()

    settings.CELERY_TASK_ALWAYS_EAGER = False  # with a broker the request waits on the gpu queue for a GPU worker
    html = client.get("/apps/heat3d-cuda/").content.decode()
    assert "Re-run the gate</button>" in html and 'id="rerun-blocked"' not in html
    queued = rerun_events("queued", backend="cuda")
    assert "waiting for a worker on the <code>gpu</code> queue" in fragment(client, queued)[1]


def test_reruns_are_listed_filtered_strictly_and_linked_from_results_and_events(ledger, client, speed_rule_lifted, admit):
    admit()
    failed, queued = rerun_events("failed"), rerun_events("queued")
    html = client.get("/reruns/").content.decode()
    assert f'href="/reruns/{failed}/"' in html and f'href="/reruns/{queued}/"' in html and "2 re-runs." in html
    html = client.get("/reruns/", {"state": "FAILED"}).content.decode()  # values are matched ignoring case
    assert f'href="/reruns/{failed}/"' in html and f'href="/reruns/{queued}/"' not in html
    assert "OSError: no compiler" in html
    for bad, named in (({"state": "broken"}, "unknown state 'broken'; known: queued, running, finished, failed, abandoned"),
                       ({"backend": "gpu"}, "unknown backend 'gpu'; known: cpu, cuda")):
        response = client.get("/reruns/", bad)
        assert response.status_code == 400 and named in html_text(response)
        api = client.get("/api/reruns/", bad)  # the API lists with the same filters
        assert api.status_code == 400 and api.json()["detail"] == named
    assert [r["id"] for r in client.get("/api/reruns/", {"state": "Failed"}).json()] == [failed]

    case_page = client.get(f"/cases/cpu/{CASE}/").content.decode()
    section = case_page.split('<section id="reruns">')[1].split("</section>")[0]
    assert f'href="/reruns/{failed}/"' in section and "OSError: no compiler" in section
    assert f'href="/reruns/?result=operator/cpu/{CASE}"' in section
    finished = Event.objects.get(stream=f"rerun/{failed}", type="RerunFinished")
    assert f'href="/reruns/{failed}/"' in client.get(f"/events/{finished.position}/").content.decode()
