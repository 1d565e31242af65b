"""Server-rendered audit pages (the reviewer's POST actions and the login page: frontend.actions).

Views stay thin: reads come from frontend.tables / frontend.provenance (shared with the REST
API), frontend.selectors (page-only reads), frontend.reruns and the apps' selectors.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from django.conf import settings
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils.http import urlencode

from ledger import event_types
from ledger import selectors as ledger_selectors
from ledger.models import Event, EventTypeCount
from ledger.review import ReviewError
from measurement.roofline import TARGETS

from . import app_figures, batches, plots, provenance, publication, reruns, selectors, tables, targets


def plotly_js(request: HttpRequest) -> FileResponse:
    """The plotly bundle shipped inside the plotly package: pages never load a CDN. Imported here,
    not with the module: the device machine's management commands load the URLs but serve no
    page, and plotly is the largest wheel the device would otherwise carry."""
    import plotly

    bundle = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    response = FileResponse(bundle.open("rb"), content_type="text/javascript")
    response["Cache-Control"] = "public, max-age=86400"
    return response


# ---- pages -------------------------------------------------------------------------------


def dashboard(request: HttpRequest) -> HttpResponse:
    """Every number here comes from projections or an index (no COUNT over the events)."""
    app_rows, every_operator_row = tables.application_rows(), tables.operator_rows()
    edges = selectors.edge_shape_cases()
    operator_rows = [row for row in every_operator_row if row["case"] not in edges]
    apps = [row for row in app_rows if row["status"] in tables.STANDING and row["real"]]
    status = ledger_selectors.status()
    return render(request, "frontend/dashboard.html", {
        "status": status,
        "counts": {**selectors.dashboard_counts(status["event_types"], operator_rows),
                   "edge_rows": len(every_operator_row) - len(operator_rows)},
        "figures": tables.headline_figures(operators=operator_rows, applications=app_rows),
        "targets": TARGETS,
        "scorecards": targets.scorecards(operator_rows),
        "distribution": plots.speedup_distribution([row["headline"] for row in apps]),
        "freezes": publication.freezes(),
        "recent": [selectors.record(e) for e in Event.objects.order_by("-position")[:10]],
    })


OPERATOR_FILTERS = ("backend", "matrix", "status", "search")
APPLICATION_FILTERS = ("state", "reason", "suite", "architecture", "search")
OPERATOR_HEADERS = (("case", "case"), ("backend", "backend · device"), ("status", "status"),
                    ("speedup", "speedup (95% CI)"), ("bound_label", "over the public bound"),
                    ("fraction_of_copy", "% copy BW"), ("roofline_ceiling", "roofline ceiling"),
                    ("flop_per_byte", "flop/byte · class"), ("kernel_hash", "kernel"), ("signoffs", "sign-offs (of 2)"))
APPLICATION_HEADERS = (("app", "application · arch"), ("suite", "suite · domain"), ("state", "state"),
                       ("reason_code", "reason"), ("status", "gate status"), ("headline", "headline (95% CI)"),
                       ("datasets", "datasets"), ("real", "REAL"), ("amdahl_ceiling", "Amdahl ceiling"),
                       ("hotspot_share", "hotspot (profile)"), ("baseline_quality", "baseline quality"),
                       ("upstream_repo", "upstream · commit · path"), ("signoffs", "sign-offs (of 2)"))


def _table_page(request: HttpRequest, builder: Callable[..., list[dict]], filter_names: tuple[str, ...],
                headers: tuple[tuple[str, str], ...], default_sort: str, api: str) -> dict:
    """Filters and sort from the query string, the rows, header links that sort by each column
    (a second click reverses) and the CSV link of the same rows in the same order (`api`: the
    table's API route). An unknown filter or sort value is a 400 page naming the known ones."""
    filters = {name: request.GET.get(name, "").strip() for name in filter_names}
    sort = request.GET.get("sort", "").strip() or default_sort
    error = None
    try:
        rows = builder(**{k: v or None for k, v in filters.items()}, sort=sort)
    except tables.TableQueryError as exc:
        rows, error = [], str(exc)
    active = {k: v for k, v in filters.items() if v}
    columns = [{"key": key, "label": label, "arrow": "▲" if sort == key else "▼" if sort == f"-{key}" else "",
                "url": "?" + urlencode({**active, "sort": f"-{key}" if sort == key else key})} for key, label in headers]
    csv_url = reverse(api) + "?" + urlencode({**active, **({"sort": sort} if sort != default_sort else {}), "format": "csv"})
    return {"rows": rows, "filters": filters, "sort": sort, "error": error, "columns": columns, "active": active,
            "csv_url": csv_url}


def operator_table(request: HttpRequest) -> HttpResponse:
    context = _table_page(request, tables.operator_rows, OPERATOR_FILTERS, OPERATOR_HEADERS, "case", "api-operator-cases")
    context.update(matrices=sorted(tables.matrix_backends()), statuses=tables.OPERATOR_STATUSES,
                   baselines=tables.BASELINE_MEANINGS, targets=TARGETS, scorecards=targets.scorecards())
    return render(request, "frontend/operators.html", context, status=400 if context["error"] else 200)


def operator_figures(request: HttpRequest) -> HttpResponse:
    """The per-case figures of design §9, over the results that stand (their current verdict's measurement)."""
    standing = [row["result"] for row in tables.operator_rows() if row["status"] in tables.STANDING]
    data = selectors.operator_figures_data(standing)
    return render(request, "frontend/operator_figures.html", {
        "cases": data,
        "bars": plots.baseline_bars(data),
        "roofline": plots.roofline_positions(data),
        "quality": plots.speedup_vs_baseline_quality(data),
    })


def case_detail(request: HttpRequest, backend: str, case: str) -> HttpResponse:
    try:
        chain = provenance.operator_chain(backend, case)
    except provenance.UnknownResult as exc:
        raise Http404(str(exc))
    return render(request, "frontend/case_detail.html", {
        "chain": chain,
        "language": "cuda" if backend == "cuda" else "c",
        "measurement_groups": _measurement_groups(chain["measurements"]),
        **_rerun_facts(chain["result"], backend),
    })


def _rerun_facts(result: str, backend: str) -> dict:
    """A result page's re-runs, and why none can be asked for here (then the page offers no button)."""
    return {"reruns": reruns.recent_reruns(result, 10), "rerun_blocked": reruns.worker_missing(backend)}


def _measurement_groups(measurements: list[dict]) -> list[dict]:
    """The chain's variants grouped by the measurement event holding them (admission, each
    re-run), each group with its backend description and a plot of every raw sample."""
    groups: dict[int, dict] = {}
    for m in measurements:
        group = groups.setdefault(m["event_position"], {
            "position": m["event_position"], "kind": m["kind"], "verdict_position": m["verdict_position"],
            "description": m["backend_description"], "harness_version": m["harness_version"], "protocol": m["protocol"],
            "copy_bandwidth": m["copy_bandwidth"], "noisy": m["noisy"], "attempts": m["attempts"], "variants": [],
            "times": {"time_of_record": m["time_of_record"], "imported_at": m["imported_at"]}})
        group["variants"].append(m)
    for group in groups.values():
        group["spreads"] = {v["variant"]: v["spread"] for v in group["variants"]}
        group["figure"] = plots.sample_distributions(
            [{"name": v["variant"], "samples": v["samples"]} for v in group["variants"] if v["samples"]],
            f"Raw samples of measurement #{group['position']} ({group['kind']})")
    return list(groups.values())


def case_history(request: HttpRequest, backend: str, case: str) -> HttpResponse:
    history = selectors.forging_history(backend, case)
    if not (history["defined"] or history["campaigns"] or history["map_cell"]):
        raise Http404(f"no case {case} is defined and the Kernel Agent never planned it on the {backend} backend")
    return render(request, "frontend/case_history.html",
                  {"h": history, "trajectory": plots.round_trajectories(history["trajectories"])})


def campaign_list(request: HttpRequest) -> HttpResponse:
    return render(request, "frontend/campaigns.html", {"campaigns": selectors.campaigns()})


def campaign_detail(request: HttpRequest, campaign: str) -> HttpResponse:
    found = selectors.campaign(campaign)
    if found is None:
        raise Http404(f"no forging campaign {campaign}")
    return render(request, "frontend/campaign.html", {"c": found})


def application_table(request: HttpRequest) -> HttpResponse:
    context = _table_page(request, tables.application_rows, APPLICATION_FILTERS, APPLICATION_HEADERS, "app",
                          "api-applications")
    context.update(states=tables.APP_STATES, counts=tables.application_counts(), **app_figures.figures(context["rows"]))
    return render(request, "frontend/applications.html", context, status=400 if context["error"] else 200)


def app_detail(request: HttpRequest, app: str) -> HttpResponse:
    try:
        chain = provenance.application_chain(app)
    except provenance.UnknownResult as exc:
        raise Http404(str(exc))
    for dataset in chain["datasets"]:
        dataset["figure"] = plots.sample_distributions(
            [{"name": variant, "samples": samples} for variant, samples in dataset["samples"].items()],
            f"Raw samples of dataset {dataset['dataset']} (#{dataset['position']})")
    return render(request, "frontend/app_detail.html", {"chain": chain, **_rerun_facts(chain["result"], chain["architecture"])})


def ablations(request: HttpRequest) -> HttpResponse:
    return render(request, "frontend/ablations.html", {"tables": selectors.ablation_tables()})


EVENT_FILTERS = ("stream", "type", "actor", "position_min", "position_max")


def _position(name: str, value: str) -> int | None:
    """A position filter: empty, or a whole number (anything else is refused, never ignored)."""
    value = value.strip()
    if value and not value.isdigit():
        raise tables.TableQueryError(f"{name} must be a whole number (a ledger position), not {value!r}")
    return int(value) if value else None


def event_browser(request: HttpRequest) -> HttpResponse:
    """Newest first, 50 a page, keyset-paginated on position (?before= older, ?after= newer):
    each page reads about 50 index entries whatever the ledger's size, and no page counts the
    matches unless a projection knows the count (ledger.selectors.count_events). The type is
    matched ignoring case against the known types; an unknown type or a position that is not a
    number is a 400 that says so (a filter that matched nothing would read as "no such events")."""
    filters = {key: request.GET.get(key, "").strip() for key in EVENT_FILTERS}
    types = list(EventTypeCount.objects.order_by("type").values_list("type", flat=True))
    context = {"filters": filters, "types": types, "events": [], "count": None}
    try:
        kind = tables.known_value("type", filters["type"], sorted({*types, *event_types.all_types()}))
        query = ledger_selectors.EventFilters(stream=filters["stream"], type=kind or "", actor=filters["actor"],
                                              position_min=_position("position_min", filters["position_min"]),
                                              position_max=_position("position_max", filters["position_max"]))
        before, after = (_position(name, request.GET.get(name, "")) for name in ("before", "after"))
    except tables.TableQueryError as exc:
        return render(request, "frontend/events.html", {**context, "error": str(exc)}, status=400)
    streams = ledger_selectors.match_streams(query.stream) if query.stream else None
    page = ledger_selectors.event_page(ledger_selectors.filtered_events(query, streams), before=before,
                                       after=None if before is not None else after)
    active = urlencode({k: v for k, v in {**filters, "type": kind or ""}.items() if v})
    return render(request, "frontend/events.html", {
        **context, "page": page, "events": [selectors.record(e) for e in page.events], "query": active,
        "count": ledger_selectors.count_events(query, streams), "paged": before is not None or after is not None,
    })


def event_detail(request: HttpRequest, position: int) -> HttpResponse:
    event = selectors.record(get_object_or_404(Event, position=position))
    result = event.payload.get("result") or event.payload.get("subject")
    return render(request, "frontend/event.html", {
        "event": event, "references": selectors.event_references(event), "result": result,
        "result_url": selectors.result_page(result), "rerun_url": selectors.rerun_page(event.stream),
    })


# ---- re-runs -----------------------------------------------------------------------------


def _rerun_or_404(rerun_id: str) -> dict:
    try:
        return reruns.rerun_status(rerun_id)
    except reruns.UnknownRerun as exc:
        raise Http404(str(exc))


def _rerun_context(rerun: dict) -> dict:
    """`polling`: while the state can still change by itself (queued, or running on a live worker);
    a running re-run whose worker stopped reporting changes only when the reaper closes it."""
    done = rerun["state"] in reruns.ENDED
    stalled = rerun["state"] == "running" and not (rerun.get("worker") or {}).get("alive")
    return {"rerun": rerun, "result_url": selectors.target_page(rerun["kind"], rerun["backend"], rerun["target"]), "done": done,
            "polling": not done and not stalled, "queue": reruns.queue_of(rerun["backend"]),
            "brokered": not settings.CELERY_TASK_ALWAYS_EAGER,
            "still_standing": done and reruns.still_standing(rerun)}  # then the page offers another re-run


RERUNS_SHOWN = 200


def rerun_list(request: HttpRequest) -> HttpResponse:
    """Every re-run, newest first (the newest RERUNS_SHOWN), by state, backend, kind or result: a
    failed or abandoned one stays findable after its page was closed. `?batch=ID`: the re-runs of
    one fanned-out whole-matrix re-run (frontend.batches), in case order, with how many ended."""
    filters = {name: request.GET.get(name, "").strip() for name in (*reruns.FILTERS, "result")}
    error, batch = None, None
    try:
        rows = reruns.listed(filters, RERUNS_SHOWN)
    except tables.TableQueryError as exc:
        rows, error = [], str(exc)
    if request.GET.get("batch", "").strip():  # a fanned-out whole-matrix re-run: its re-runs alone, n of N ended
        try:
            batch = batches.batch_status(request.GET["batch"].strip())
        except reruns.UnknownRerun as exc:
            raise Http404(str(exc))
        rows = batch["reruns"]
    return render(request, "frontend/reruns.html", {"rows": rows, "filters": filters, "error": error, "limit": RERUNS_SHOWN,
                                                    "choices": reruns.FILTERS, "batch": batch}, status=400 if error else 200)


def rerun_page(request: HttpRequest, rerun_id: str) -> HttpResponse:
    """The re-run's progress; while it runs the page polls `rerun_status` every second."""
    return render(request, "frontend/rerun.html", _rerun_context(_rerun_or_404(rerun_id)))


def rerun_status(request: HttpRequest, rerun_id: str) -> HttpResponse:
    """The polled fragment; header X-Rerun-Poll tells the page when to stop polling."""
    context = _rerun_context(_rerun_or_404(rerun_id))
    response = render(request, "frontend/_rerun_status.html", context)
    response["X-Rerun-State"] = context["rerun"]["state"]
    response["X-Rerun-Done"] = "1" if context["done"] else "0"
    response["X-Rerun-Poll"] = "1" if context["polling"] else "0"  # static/frontend/rerun.js stops polling at 0
    response["Cache-Control"] = "no-store"
    return response


def freeze_check(request: HttpRequest, position: int) -> HttpResponse:
    try:
        check = publication.check_freeze(position)
    except ReviewError as exc:
        raise Http404(str(exc))
    return render(request, "frontend/freeze_check.html", {"check": check})
