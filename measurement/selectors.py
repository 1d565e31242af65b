"""Reads of measurement projections (and of the tuning streams, read from the ledger)."""
from __future__ import annotations

from ledger.selectors import stream_events
from measurement.backends.base import Kernel

from .events import tuning_stream
from .models import CaseRow, OperatorResult


def case_count() -> int:
    return CaseRow.objects.count()


def operator_result(key: str) -> OperatorResult | None:
    return OperatorResult.objects.filter(result=key).first()


def admitted_kernel(key: str) -> Kernel | None:
    """The persisted prior best: the admitted (or downgraded, still standing) kernel."""
    row = OperatorResult.objects.filter(result=key, status__in=["admitted", "downgraded"]).first()
    return Kernel(row.source, row.launch) if row else None


def standing_operator_results(backend: str) -> list[OperatorResult]:
    """The results a whole-matrix gate re-run re-checks: every one of `backend` not retracted
    (a retracted result has no kernel left to defend), in case order so runs are comparable."""
    return list(OperatorResult.objects.filter(backend=backend).exclude(status="retracted").order_by("case"))


def tuned(backend: str, case_id: str) -> dict[str, str | None]:
    """{library: the schedule its latest tuning run chose, None where it found no correct one} of
    every library baseline ever tuned for the case on `backend` (measurement.tuning): the keys are
    the ledger's word that the case's bound includes them (session_info.refuse_missing_libraries)."""
    return {event.payload["library"]: event.payload["chosen"] for event in stream_events(tuning_stream(backend, case_id))}
