"""Which admitted kernels may serve a case, best first, and where each was measured.

forge/library.py's `lookup` takes the first of `ranked_offers` measured on the wanted architecture:
the case's own standing OperatorResult, then the sealed MapCells of the same stencil type, precision
and backend whose verdicts still stand, nearest in shape first. A verdict's standing is replayed
from its result stream here (`verdict_standing`), not read from a projection, so a cell whose
kernel was retracted is never offered even after its case admitted another kernel.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ledger.models import Event
from ledger.records import RecordedEvent
from measurement.harness.cases import Case, parse_case
from measurement.models import OperatorResult
from measurement.services import result_key

from .models import MapCell

STANDING = ("admitted", "downgraded")
EXACT_CASE = "exact_case"
EXACT_SHAPE_CELL = "exact_shape_cell"
NEAREST_SHAPE_CELL = "nearest_shape_cell"


@dataclass(frozen=True)
class Offer:
    """One kernel that could be served, before the architecture filter."""

    case: str
    source: str
    launch: dict[str, Any]
    source_hash: str
    verdict_event: str
    status: str
    speedup: float | None
    verdict: dict[str, Any]  # the GateVerdict payload that admitted it
    dispatch: str
    reason: str
    cell: str | None = None


def ranked_offers(wanted: Case, backend: str) -> list[Offer]:
    """Every kernel that may be served for `wanted`, best first (the exact case, then by shape)."""
    offers = []
    exact = _exact_offer(wanted, backend)
    if exact is not None:
        offers.append(exact)
    ranked = sorted(_standing_cells(wanted, backend), key=lambda cell: shape_distance(wanted, parse_case(cell.case)) + (cell.case,))
    offers.extend(_cell_offer(wanted, cell) for cell in ranked)
    seen: set[str] = set()
    unique = []
    for offer in offers:  # the exact case's own sealed cell may hold the same verdict
        if offer is not None and offer.verdict_event not in seen:
            seen.add(offer.verdict_event)
            unique.append(offer)
    return unique


def _exact_offer(wanted: Case, backend: str) -> Offer | None:
    row = OperatorResult.objects.filter(result=result_key(backend, wanted.id), status__in=STANDING).first()
    verdict = _event_data(row.verdict_event) if row else None
    if row is None or verdict is None:
        return None
    return Offer(case=row.case, source=row.source, launch=row.launch, source_hash=row.source_hash,
                  verdict_event=row.verdict_event, status=row.status, speedup=row.speedup, verdict=verdict,
                  dispatch=EXACT_CASE, reason=f"the operator gate admitted this kernel for {row.case} itself")


def _cell_offer(wanted: Case, cell: MapCell) -> Offer | None:
    standing = verdict_standing(cell.backend, cell.case).get(cell.verdict_event)
    if standing is None:
        return None
    status, speedup, verdict = standing
    if cell.case == wanted.id:
        dispatch, reason = EXACT_SHAPE_CELL, f"sealed map cell {cell.key} has this exact case"
    else:
        other = parse_case(cell.case)
        dispatch = NEAREST_SHAPE_CELL
        reason = (f"no kernel of {wanted.id} itself qualified; nearest sealed shape of {wanted.type} "
                  f"{wanted.precision} on {cell.backend} is {cell.case} ({other.points / wanted.points:.3g}x the "
                  f"points); kernels take nz, ny, nx at run time and the gate checked this one on an odd shape too")
    return Offer(case=cell.case, source=cell.source, launch=cell.launch, source_hash=cell.source_hash,
                  verdict_event=cell.verdict_event, status=status, speedup=speedup, verdict=verdict,
                  dispatch=dispatch, reason=reason, cell=cell.key)


def _same_kind_cells(wanted: Case, backend: str) -> list[MapCell]:
    """Sealed cells of the same stencil type on this backend (any precision)."""
    return [cell for cell in MapCell.objects.filter(backend=backend).order_by("case") if _type_of(cell.case) == wanted.type]


def _standing_cells(wanted: Case, backend: str) -> list[MapCell]:
    """Cells of the same type and precision whose case's headline result still stands."""
    cells = [c for c in _same_kind_cells(wanted, backend) if parse_case(c.case).precision == wanted.precision and c.verdict_event]
    standing = set(OperatorResult.objects.filter(result__in=[result_key(backend, c.case) for c in cells], status__in=STANDING)
                   .values_list("case", flat=True))
    return [cell for cell in cells if cell.case in standing]


def _type_of(case_id: str) -> str:
    return case_id.split("/", 1)[0]


def shape_distance(a: Case, b: Case) -> tuple[float, float]:
    """(|log2 points ratio|, aspect distance): how far apart two shapes of one type are.

    Aspect distance: the sum over axes of the difference of log2 extents once each shape's
    mean log2 extent is removed, so 64x64x64 and 32x32x32 have aspect distance 0 and 16x128x128
    is far from both. Rounded so that float noise cannot reorder equal distances.
    """
    la, lb = np.log2(np.array(a.shape, dtype=float)), np.log2(np.array(b.shape, dtype=float))
    points = abs(float(la.sum() - lb.sum()))
    aspect = float(np.abs((la - la.mean()) - (lb - lb.mean())).sum())
    return round(points, 9), round(aspect, 9)


def verdict_standing(backend: str, case_id: str) -> dict[str, tuple[str, float | None, dict[str, Any]]]:
    """Every admitting verdict of a (backend, case) and how it stands now: status, speedup, payload.

    Replays the result stream's GateVerdict / ResultRetracted / ResultDowngraded events. A
    revision names the verdict it revises (`revises`); one without it applies to the verdict
    standing at that point of the stream, as the operator_results projection does. Retracted
    verdicts are left out, so a sealed cell whose kernel was retracted is never served even
    after its case admitted another kernel.
    """
    states: dict[str, list] = {}
    current = None
    events = Event.objects.filter(stream=result_key(backend, case_id),
                                  type__in=["GateVerdict", "ResultRetracted", "ResultDowngraded"]).order_by("position")
    for row in events:
        event = RecordedEvent.from_body(row.body, row.prev_hash, row.hash)
        data = event.data
        if event.type == "GateVerdict":
            if data["verdict"] == "admitted":
                current = event.event_id
                states[current] = ["admitted", data.get("speedup"), data]
            continue
        target = states.get(data.get("revises") or current)
        if target is None or target[0] == "retracted":
            continue
        if event.type == "ResultRetracted":
            target[0] = "retracted"
        else:
            target[0], target[1] = "downgraded", data["to_value"]
    return {key: (s[0], s[1], s[2]) for key, s in states.items() if s[0] in STANDING}


def _event_data(event_id: str | None) -> dict[str, Any] | None:
    if not event_id:
        return None
    row = Event.objects.filter(event_id=event_id).first()
    return RecordedEvent.from_body(row.body, row.prev_hash, row.hash).data if row else None


def measured_architecture(verdict: dict[str, Any]) -> dict[str, Any]:
    """Where the verdict's evidence was measured: the CandidateMeasured backend description."""
    measured = _event_data(verdict.get("measurement")) or {}
    description = measured.get("description") or {}
    return {"device": description.get("device"), "compute_capability": description.get("compute_capability")}


def architecture_label(architecture: Mapping[str, Any]) -> str:
    device = architecture.get("device") or "an unrecorded device"
    capability = architecture.get("compute_capability")
    return f"{device} (compute capability {capability})" if capability else str(device)


def architecture_matches(architecture: Mapping[str, Any], wanted: str) -> bool:
    """`wanted` names the device ("NVIDIA H200", a CPU model) or the capability ("9.0", "sm_90", "90")."""
    names = set()
    if architecture.get("device"):
        names.add(str(architecture["device"]).strip().lower())
    capability = architecture.get("compute_capability")
    if capability:
        compact = str(capability).replace(".", "")
        names.update({str(capability), compact, f"sm_{compact}"})
    return wanted.strip().lower() in names
