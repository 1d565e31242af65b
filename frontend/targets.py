"""The targets scorecard of the audit site: each target of issue 16 over the matrix of each backend,
with its measured value and met / not met, as the generated operator tables state them.

The rules are measurement/targets.py's (the tables use them too); this module only gathers their
facts from this ledger: per row of the operator table (frontend.tables.operator_rows: status,
fraction of copy, class, speedup, same precision), the sealed map cells and the converged cases of
the forge's projections, the composed bound of each diamond_tsT from its result's stream (the
newest verdict, admitting or re-run, that timed one), and the latest whole re-run from the
backend's MatrixRerunFinished events. An edge file's cases are generalisation measurements, not a
matrix of their own: they get no scorecard (forge.edges).

One difference with the generated table, as on the operator page (frontend/roofline.py): a row is
classed against the balance of its own run, so a case without a result has no class here and is
outside the memory-bound targets' scope.
"""
from __future__ import annotations

from dataclasses import asdict
from typing import Any

from forge.edges import edge_set_names
from forge.models import CaseCampaign, MapCell
from ledger.selectors import stream_events
from measurement.events import matrix_rerun_stream
from measurement.models import CaseRow
from measurement.targets import (TEMPORAL_MIN_STEPS, CaseFacts, TargetEvaluation, WholeRerun, composed_speedup,
                                 evaluate, temporal_steps)

from .tables import STANDING, matrix_backends, operator_rows

VERDICTS = {True: "met", False: "not met", None: "not recorded"}


def scorecards(rows: list[dict] | None = None) -> list[dict[str, Any]]:
    """Per matrix with a defined case (edge files left out), in name order: its backend, how many
    cases it has and every target's evaluation (scorecard_entry). `rows`: the operator table's
    rows when the caller has them (any superset of the matrices' rows)."""
    rows = operator_rows() if rows is None else rows
    edge_sets = edge_set_names()
    membership = dict(CaseRow.objects.values_list("case", "matrices"))
    cards = []
    for matrix, backend in sorted(matrix_backends().items()):
        mine = [row for row in rows if row["backend"] == backend and matrix in membership.get(row["case"], [])]
        if matrix in edge_sets or not mine:
            continue
        evaluations = evaluate(case_facts(mine, backend=backend), latest_whole_rerun(backend))
        cards.append({"matrix": matrix, "backend": backend, "cases": len(mine),
                      "targets": [scorecard_entry(e) for e in evaluations]})
    return cards


def scorecard_entry(evaluation: TargetEvaluation) -> dict[str, Any]:
    """An evaluation as the pages and the API show it: every field, the cases without a value, and
    the verdict in words ("not recorded" where nothing could be judged)."""
    return {**asdict(evaluation), "uncounted": list(evaluation.uncounted), "verdict": VERDICTS[evaluation.met]}


def case_facts(rows: list[dict], *, backend: str) -> list[CaseFacts]:
    """The facts of measurement.targets for operator table rows of one backend. Three queries, and
    one stream read per diamond_tsT case with T >= 4 that has a result."""
    sealed = dict(MapCell.objects.filter(backend=backend).values_list("case", "source_hash"))
    converged: dict[str, bool] = {}
    for case, best in CaseCampaign.objects.filter(backend=backend).exclude(converged="").values_list("case", "best"):
        converged[case] = converged.get(case, False) or bool(best and best.get("speedup") is not None)
    facts = []
    for row in rows:
        standing = row["status"] in STANDING
        facts.append(CaseFacts(
            case=row["case"], precision=row["precision"], bound_class=row["bound_class"], standing=standing,
            fraction_of_copy=row["fraction_of_copy"], speedup=row["speedup"], same_precision=row["same_precision"],
            composed_speedup=composed_over(row), sealed=row["case"] in sealed,
            sealed_for_standing_kernel=standing and sealed.get(row["case"]) == row["kernel_hash"],
            converged=row["case"] in converged, converged_with_kernel=converged.get(row["case"], False)))
    return facts


def composed_over(row: dict) -> float | None:
    """A diamond_tsT's (T >= 4) speedup over its composed bound: the result's current verdict and
    the re-runs revising it, from its stream (measurement.targets.composed_speedup); None for any
    other case or one without a result."""
    if (temporal_steps(row["case"]) or 0) < TEMPORAL_MIN_STEPS or row["verdict_position"] is None:
        return None
    verdicts = [e for e in stream_events(row["result"]) if e.type == "GateVerdict"]
    current = next((e for e in verdicts if e.position == row["verdict_position"]), None)
    if current is None:
        return None
    return composed_speedup(e.data for e in verdicts if e is current or e.data.get("revises") == current.event_id)


def latest_whole_rerun(backend: str) -> WholeRerun | None:
    """The newest MatrixRerunFinished of the backend that planned every standing result."""
    whole = [e.data for e in stream_events(matrix_rerun_stream(backend)) if e.data["whole"]]
    return WholeRerun.from_payload(whole[-1]) if whole else None
