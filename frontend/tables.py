"""The operator and application tables: one source for what the pages, the REST API and the
CSV export show, so that they cannot disagree.

Each table is built from its projections with a fixed number of queries (no query per row):
the measurement app's cases and operator results, the appgate's application rows, and the
ledger's result statuses and sign-offs. Rows are flat dicts whose keys are the table's
columns (also the CSV header order).
"""
from __future__ import annotations

import csv
import io
import json
import math
import statistics
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, get_args

import numpy as np
from django.conf import settings
from django.db.models import Count
from django.urls import reverse

from appgate.events import AppState
from appgate.models import AppRow
from appgate.verdicts import ceiling_problem, parity
from ledger.review import signoff_states
from measurement.models import CaseRow, OperatorResult

from . import app_sources
from .roofline import case_roofline, measured_runs

# Every public baseline family gets a column of the kernel's speedup over it (issue 15): the
# bound is only the fastest of them, and a reader should see how far each one is.
BASELINE_FAMILIES = ("straightforward", "halide", "devito", "pystencils", "cupyx.ndimage", "scipy.ndimage",
                     "torch.conv", "composed")
BASELINE_COLUMNS = [f"over_{family.replace('.', '_')}" for family in BASELINE_FAMILIES]
# What each family is, for the table's legend of the public bound (docs/measurement.md, "Baselines").
BASELINE_MEANINGS = {
    "straightforward": "the case's stencil written plainly (one point per thread or iteration, every neighbour "
                       "loaded; fair in every precision): the naive reference",
    "halide": "Halide, with the fastest schedule of the case's recorded tuning run, in brackets: [vec_par_z]",
    "devito": "Devito's generated OpenMP C (CPU)",
    "pystencils": "pystencils' generated kernel",
    "cupyx.ndimage": "cupyx.scipy.ndimage's correlate (GPU)",
    "scipy.ndimage": "scipy.ndimage's correlate (CPU)",
    "torch.conv": "PyTorch's convolution through cuDNN (GPU)",
    "composed": "of a multi-step case: a single-step kernel applied step after step, e.g. composed(star_1 admitted x8)",
}
OPERATOR_COLUMNS = [
    "result", "case", "backend", "type", "precision", "shape", "status", "revised", "version", "kernel_hash",
    "speedup", "speedup_ci_low", "speedup_ci_high", "bound_name", "bound_label", "bound_precision", "same_precision",
    *BASELINE_COLUMNS, "fraction_of_copy", "device", "flop_per_byte", "bound_class", "roofline_ceiling",
    "verdict_position", "history", "signoffs", "publishable", "provenance_url", "api_provenance_url",
]
APPLICATION_COLUMNS = [
    "result", "app", "suite", "domain", "architecture", "state", "reason_code", "reason", "milestone", "status",
    "revised", "version", "headline", "ci_low", "ci_high", "datasets", "real", "amdahl_ceiling", "hotspot_fraction",
    "hotspot_kernel", "hotspot_share", "baseline_quality", "checks", "noisy", "parity", "above_ceiling",
    "upstream_repo", "upstream_version", "source_path", "signoffs", "publishable", "provenance_url", "api_provenance_url",
]
NO_REASON_CODE = "none"  # the reason filter's value for a row whose state carries no code (REGISTERED, v1 events)
BACKENDS = ("cpu", "cuda")  # a case's backend, an application's architecture
OPERATOR_STATUSES = ("admitted", "downgraded", "retracted", "none")
APPLICATION_STATUSES = ("admitted", "downgraded", "retracted", "rejected", "self-checked", "inconclusive", "none")
APP_STATES = ("REGISTERED", *get_args(AppState))  # REGISTERED: before the App Agent set one (appgate.projections)
STANDING = ("admitted", "downgraded")  # a result that still holds (its number may be reported)
BOOTSTRAP_SEED = 0
BOOTSTRAP_RESAMPLES = 4000


class TableQueryError(ValueError):
    """A filter or sort the table does not know; the message lists what it accepts."""


def known_value(name: str, value: str | None, known: Iterable[str]) -> str | None:
    """A filter's value as the data spells it: None when not given, else the known value it names
    ignoring case ("CUDA" is cuda). Anything else is refused with the values that exist: a filter
    that matched nothing would look like an empty result."""
    if not value:
        return None
    known = list(known)
    match = next((k for k in known if k.lower() == value.strip().lower()), None)
    if match is None:
        raise TableQueryError(f"unknown {name} {value!r}; known: {', '.join(known) or 'none yet'}")
    return match


@lru_cache(maxsize=1)
def matrix_backends() -> dict[str, str]:
    """Matrix name -> the backend it is measured on (fixtures/matrices/*.json)."""
    folder = Path(settings.BASE_DIR) / "fixtures" / "matrices"
    return {path.stem: json.loads(path.read_text())["backend"] for path in sorted(folder.glob("*.json"))}


def operator_result_key(backend: str, case: str) -> str:
    return f"operator/{backend}/{case}"


def operator_rows(*, backend: str | None = None, matrix: str | None = None, status: str | None = None,
                  search: str | None = None, sort: str | None = None) -> list[dict]:
    """Every (backend, case) of the defined matrices, with its admitted kernel if any; results
    admitted for cases outside every matrix are listed too. Filters take a known value in any
    case (known_value); the search is a case-insensitive substring."""
    status = known_value("status", status, OPERATOR_STATUSES)
    backend = known_value("backend", backend, BACKENDS)
    backends = matrix_backends()
    matrix = known_value("matrix", matrix, backends)
    cases = {row["case"]: row for row in CaseRow.objects.values("case", "type", "precision", "shape", "matrices", "flops",
                                                                 "compulsory_bytes")}
    results = {
        (row["backend"], row["case"]): row
        for row in OperatorResult.objects.values(
            "result", "case", "backend", "status", "source_hash", "speedup", "speedup_ci", "bound", "baselines",
            "same_precision", "fraction_of_copy", "verdict_event", "verdict_position", "history", "revisions")
    }
    keys = set(results)
    for case, row in cases.items():
        keys.update((backends.get(name, name), case) for name in row["matrices"])
    if matrix:
        keys = {(b, c) for b, c in keys if matrix in cases.get(c, {}).get("matrices", [])}
    if backend:
        keys = {(b, c) for b, c in keys if b == backend}
    signoffs = signoff_states(prefix="operator/")
    runs = measured_runs(results[key]["verdict_event"] for key in keys if key in results)
    rows = [_operator_row(b, c, cases.get(c), results.get((b, c)), signoffs, runs) for b, c in keys]
    if status:
        rows = [row for row in rows if row["status"] == status]
    rows = _search(rows, search, ("case", "kernel_hash", "bound_name", "type"))
    return _sort(rows, sort or "case", OPERATOR_COLUMNS, tiebreak=("case", "backend"))


def _operator_row(backend: str, case: str, defined: dict | None, result: dict | None, signoffs: dict, runs: dict) -> dict:
    key = operator_result_key(backend, case)
    parts = case.split("/")
    kind, shape, precision = (parts + ["", "", ""])[:3]
    if defined:
        kind, precision, shape = defined["type"], defined["precision"], "x".join(str(n) for n in defined["shape"])
    result = result or {}
    ci = result.get("speedup_ci") or [None, None]
    bound = result.get("bound") or {}
    signoff = signoffs.get(key, {"version": 1, "reviewers": [], "publishable": False})
    status = result.get("status", "none")
    run = runs.get(result.get("verdict_event", ""))
    return {
        "result": key, "case": case, "backend": backend, "type": kind, "precision": precision, "shape": shape,
        "status": status, "revised": bool(result.get("revisions")), "version": signoff["version"],
        "kernel_hash": result.get("source_hash", ""), "speedup": result.get("speedup"),
        "speedup_ci_low": ci[0], "speedup_ci_high": ci[1], "bound_name": bound.get("name", ""),
        # bounds recorded before labels (verdict v1) are named by their variant alone
        "bound_label": bound.get("label") or bound.get("name", ""),
        "bound_precision": bound.get("precision", ""), "same_precision": result.get("same_precision"),
        **baseline_speedups(result.get("baselines")),
        "fraction_of_copy": result.get("fraction_of_copy"), "device": (run or {}).get("device", ""),
        **case_roofline(defined, run, bound.get("median")), "verdict_position": result.get("verdict_position"),
        "history": " | ".join(result.get("history") or []),
        **_review_cells(status, signoff),
        # a case without a result has no provenance page: no link that would answer 404
        "provenance_url": reverse("case_detail", args=[backend, case]) if result else "",
        "api_provenance_url": reverse("api-provenance", args=["case", f"{backend}/{case}"]) if result else "",
    }


def _review_cells(status: str, signoff: dict) -> dict:
    """How many different reviewers signed off the current version (two make it publishable)."""
    return {"signoffs": len(set(signoff["reviewers"])), "publishable": status in STANDING and signoff["publishable"]}


def baseline_speedups(baselines: dict[str, dict] | None) -> dict[str, float | None]:
    """The kernel's speedup over each baseline family (None where it was not measured); of
    several composed bounds, the hardest (the smallest speedup)."""
    columns: dict[str, float | None] = dict.fromkeys(BASELINE_COLUMNS)
    for name, baseline in (baselines or {}).items():
        family = "composed" if name.startswith("composed(") else name
        column = f"over_{family.replace('.', '_')}"
        speedup = baseline.get("speedup")
        if column in columns and speedup is not None:
            columns[column] = speedup if columns[column] is None else min(columns[column], speedup)
    return columns


def application_rows(*, state: str | None = None, reason: str | None = None, suite: str | None = None,
                     architecture: str | None = None, search: str | None = None, sort: str | None = None) -> list[dict]:
    """Every registered application with its state, reason code and text, gate result and where
    its program comes from (frontend.app_sources). The filters are strict (known_value): a state of
    APP_STATES, a reason code or suite that some row carries (`none`: no code), an architecture."""
    if sort is None:
        sort = "app"
    fields = ("name", "architecture", "domain", "state", "state_code", "state_reason", "milestones", "result", "status",
              "headline", "headline_ci", "datasets", "real", "amdahl_ceiling", "hotspot_fraction", "noisy", "checks",
              "revisions", "registered_position")
    projected = list(AppRow.objects.values(*fields))
    state, architecture = known_value("state", state, APP_STATES), known_value("architecture", architecture, BACKENDS)
    reason = known_value("reason", reason, sorted({row["state_code"] or NO_REASON_CODE for row in projected}))
    sources = app_sources.for_rows(projected)
    suite = known_value("suite", suite, sorted({sources[row["name"]]["provenance"]["suite"] for row in projected} - {""}))
    signoffs = signoff_states(prefix="app/")
    rows = [_application_row(row, sources[row["name"]], signoffs) for row in projected
            if (state is None or row["state"] == state) and (architecture is None or row["architecture"] == architecture)
            and (reason is None or (row["state_code"] or NO_REASON_CODE) == reason)
            and (suite is None or sources[row["name"]]["provenance"]["suite"] == suite)]
    rows = _search(rows, search, ("app", "domain", "reason"))
    return _sort(rows, sort, APPLICATION_COLUMNS, tiebreak=("app",))


def _application_row(row: dict, source: dict, signoffs: dict) -> dict:
    result = row["result"] or f"app/{row['architecture']}/{row['name']}"
    ci = row["headline_ci"] or [None, None]
    signoff = signoffs.get(result, {"version": 1, "reviewers": [], "publishable": False})
    status = row["status"] or "none"
    origin, hot = source["provenance"], source["hotspots"]
    return {
        "result": result, "app": row["name"], "suite": origin["suite"], "domain": row["domain"],
        "architecture": row["architecture"], "state": row["state"], "reason_code": row["state_code"],
        "reason": row["state_reason"], "milestone": row["milestones"][-1]["milestone"] if row["milestones"] else "",
        "status": status, "revised": bool(row["revisions"]), "version": signoff["version"],
        "headline": row["headline"], "ci_low": ci[0], "ci_high": ci[1], "datasets": len(row["datasets"]),
        "real": row["real"], "amdahl_ceiling": row["amdahl_ceiling"], "hotspot_fraction": row["hotspot_fraction"],
        # the profile shown (app_sources.shown_profile: M1's, or a later `appgate profile` of the same
        # baseline that measured the speed of light): the top kernel and its share of all kernels' GPU time
        "hotspot_kernel": hot["kernel"], "hotspot_share": hot["share"],
        # the baseline's fraction of its roofline: that ncu profile's max(memory, compute throughput)
        # over peak, time-weighted over the kernels (appgate.profiler); None: not measured, never estimated
        "baseline_quality": hot["speed_of_light"],
        # issue 17: the correctness checks the verdict rests on ("" before they were recorded), the
        # datasets still noisy after every attempt, a CI reaching 1.0, a headline above its ceiling
        "checks": " + ".join(row["checks"] or []), "noisy": ", ".join(row["noisy"]), "parity": parity(status, ci),
        "above_ceiling": bool(ceiling_problem(row["headline"], row["amdahl_ceiling"])),
        "upstream_repo": origin["upstream_repo"], "upstream_version": origin["upstream_version"],
        "source_path": origin["source_path"],
        **_review_cells(status, signoff),
        "provenance_url": reverse("app_detail", args=[row["name"]]),
        "api_provenance_url": reverse("api-provenance", args=["app", row["name"]]),
    }


def application_counts() -> dict[str, Any]:
    """How many registered applications are in each state (every state, 0 included) and, per
    state, in each reason code, over the whole table: one grouped query."""
    by_state = dict.fromkeys(APP_STATES, 0)
    reasons: dict[str, dict[str, int]] = {}
    for row in AppRow.objects.values("state", "state_code").annotate(n=Count("name")).order_by("state", "state_code"):
        by_state[row["state"]] = by_state.get(row["state"], 0) + row["n"]
        reasons.setdefault(row["state"], {})[row["state_code"] or NO_REASON_CODE] = row["n"]
    return {"total": sum(by_state.values()), "states": by_state,
            "reasons": {state: dict(sorted(codes.items(), key=lambda item: (-item[1], item[0])))
                        for state, codes in reasons.items()}}


def _search(rows: list[dict], search: str | None, fields: tuple[str, ...]) -> list[dict]:
    needle = (search or "").strip().lower()
    if not needle:
        return rows
    return [row for row in rows if any(needle in str(row[field]).lower() for field in fields)]


def _sort(rows: list[dict], sort: str, columns: list[str], tiebreak: tuple[str, ...]) -> list[dict]:
    """Sort by a column ("-column": descending); empty values go last either way."""
    descending = sort.startswith("-")
    column = sort.lstrip("-")
    if column not in columns:
        raise TableQueryError(f"cannot sort by {column!r}; columns: {', '.join(columns)}")
    rows = sorted(rows, key=lambda row: tuple(str(row[c]) for c in tiebreak))
    present = [row for row in rows if row[column] is not None and row[column] != ""]
    missing = [row for row in rows if row[column] is None or row[column] == ""]
    return sorted(present, key=lambda row: row[column], reverse=descending) + missing


def figures(speedups: list[float]) -> dict[str, Any]:
    """n, median, geometric mean and a bootstrap 95% CI of the geometric mean (fixed seed, so
    the same ledger always shows the same interval)."""
    values = [v for v in speedups if v is not None and v > 0 and math.isfinite(v)]
    if not values:
        return {"n": 0, "median": None, "geomean": None, "ci_low": None, "ci_high": None}
    logs = np.log(np.asarray(values))
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    means = logs[rng.integers(0, len(logs), size=(BOOTSTRAP_RESAMPLES, len(logs)))].mean(axis=1)
    low, high = np.exp(np.percentile(means, [2.5, 97.5]))
    return {"n": len(values), "median": statistics.median(values), "geomean": float(np.exp(logs.mean())),
            "ci_low": float(low), "ci_high": float(high)}


def headline_figures(operators: list[dict] | None = None, applications: list[dict] | None = None) -> dict[str, Any]:
    """The dashboard's figures over the results that stand (admitted or downgraded): operator
    speedups per backend, and per backend split by same / mixed precision of the bound (never
    pooled across backends: a CPU and a GPU speedup over different bounds are not one sample),
    and the REAL applications' all-dataset geometric means (a proxy measurement is never a
    headline). `operators` / `applications`: the unfiltered table rows when the caller has them."""
    operators = [row for row in (operator_rows() if operators is None else operators) if row["status"] in STANDING]
    apps = [row for row in (application_rows() if applications is None else applications) if row["status"] in STANDING]
    real = [row for row in apps if row["real"]]
    by_backend = {backend: [row for row in operators if row["backend"] == backend]
                  for backend in sorted({row["backend"] for row in operators})}
    return {
        "operators": {backend: {
            "all": figures([row["speedup"] for row in rows]),
            "same": figures([row["speedup"] for row in rows if row["same_precision"]]),
            "mixed": figures([row["speedup"] for row in rows if row["same_precision"] is False]),
        } for backend, rows in by_backend.items()},
        "applications": {**figures([row["headline"] for row in real]), "not_real": len(apps) - len(real)},
    }


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def table_csv(rows: list[dict], columns: list[str]) -> str:
    """The CSV form of a table (header = columns; empty cell = no value; booleans true/false)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows([_cell(row[column]) for column in columns] for row in rows)
    return out.getvalue()


def result_exists(result: str) -> bool:
    """Whether `result` names an operator or application result the gates recorded (the
    ledger's review actions accept any key; pages and the API check this first)."""
    return OperatorResult.objects.filter(result=result).exists() or AppRow.objects.filter(result=result).exists()
