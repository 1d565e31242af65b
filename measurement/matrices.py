"""The case matrices: named lists of case ids in fixtures/matrices/*.json, and their loading as
CaseDefined events.

Its own module because campaigns, edge sets, re-runs and the UI all need the matrices while none of
them needs the gate's measuring in measurement.services; kept apart, services stays the
orchestration of harness children and verdicts, and a test points MATRIX_DIR at other files here,
where it is read.
"""
from __future__ import annotations

import json
import uuid
from pathlib import Path

from django.conf import settings

from ledger.services import NewEvent, append_many
from measurement.harness.cases import parse_case

from . import selectors
from .services import MeasurementError

MATRIX_DIR = Path(settings.BASE_DIR) / "fixtures" / "matrices"
# CaseDefined event ids derive from it: a fixed namespace makes reloading a matrix add nothing.
CASE_NAMESPACE = uuid.UUID("0f4d3c3e-7f0a-4a53-8d59-8c4f0e3a3b21")


def matrix_cases(name: str) -> list[str]:
    """The case ids of matrix `name`; MeasurementError naming the known matrices when there is none."""
    path = MATRIX_DIR / f"{name}.json"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in MATRIX_DIR.glob("*.json")))
        raise MeasurementError(f"no matrix named {name!r}; known matrices: {known}")
    return json.loads(path.read_text())["cases"]


def load_matrix(name: str, actor: str) -> int:
    """Record CaseDefined for every case of the matrix (idempotent: reloading adds nothing)."""
    events = []
    for case_id in matrix_cases(name):
        case = parse_case(case_id)
        stencil = case.stencil
        events.append(
            NewEvent(
                stream=f"case/{case.id}",
                type="CaseDefined",
                actor=actor,
                event_id=uuid.uuid5(CASE_NAMESPACE, f"{name}/{case.id}"),
                payload={
                    "case": case.id,
                    "matrix": name,
                    "type": case.type,
                    "shape": list(case.shape),
                    "precision": case.precision,
                    "dims": stencil.dims,
                    "radius": stencil.radius,
                    "time_steps": stencil.time_steps,
                    "variable_coefficient": stencil.variable_coefficient,
                    "coefficient_classes": [list(c) for c in stencil.classes],
                    "coefficients": [float(c) for c in case.coefficients()],
                    "compulsory_bytes": case.compulsory_bytes,
                    "flops": case.flops,
                },
            )
        )
    before = selectors.case_count()
    append_many(events)
    return selectors.case_count() - before
