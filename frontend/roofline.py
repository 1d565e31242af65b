"""What the operator table states about each case beside its speedup: the device it was measured
on, the case's arithmetic intensity and class, and the roofline ceiling over its bound.

The generated operator tables (docs/benchmarks/*_operator_table.md, benchmarks/operator_table_rows.py)
and this module share the peak, the ceiling and the targets (measurement/roofline.py); they
state them from a ledger export; the page, the API and the CSV read them from this ledger's
events, computed the same way: the FP32 peak from the device's recorded description (compute
capability 9.0 only; elsewhere unknown), the copy bandwidth measured in the run of the verdict,
the machine balance = peak / copy bandwidth, a case memory-bound when its intensity (CaseDefined
flops / compulsory bytes) is below the balance, and the roofline ceiling = the bound's median /
max(compulsory bytes / copy bandwidth, flops / peak): the most any kernel could gain over that
bound on that machine. One difference: the generated table takes the balance from the median copy
bandwidth of the whole export, a row here from its own run's, so a case within a few percent of
the balance may be classed differently.
"""
from __future__ import annotations

from typing import Any, Iterable

from ledger.models import Event
from ledger.records import RecordedEvent
from measurement.roofline import roofline_ceiling
from measurement.roofline import fp32_peak as machine_peak


def fp32_peak(description: dict[str, Any]) -> float | None:
    return machine_peak(description.get("compute_capability"), description.get("sm_count"),
                        (description.get("clocks_max_mhz") or {}).get("sm"))


def device_name(description: dict[str, Any]) -> str:
    return description.get("device") or description.get("cpu_model") or ""


def measured_runs(verdict_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
    """Per verdict event id: the device and the copy bandwidth of the measurement behind it and
    the device's FP32 peak. Two queries whatever the number of verdicts."""
    def records(ids: set[str]) -> list[RecordedEvent]:
        rows = Event.objects.filter(event_id__in=[i for i in ids if i]).values_list("body", "prev_hash", "hash")
        return [RecordedEvent.from_body(*row) for row in rows] if ids else []

    verdicts = {e.event_id: e.data.get("measurement") for e in records(set(verdict_ids))}
    measured = {e.event_id: e.data for e in records({m for m in verdicts.values() if m})}
    runs = {}
    for verdict, measurement in verdicts.items():
        data = measured.get(measurement or "")
        if data is not None:
            description = data.get("description") or {}
            runs[verdict] = {"device": device_name(description), "copy_bandwidth": data.get("copy_bandwidth"),
                             "peak": fp32_peak(description)}
    return runs


def case_roofline(defined: dict[str, Any] | None, run: dict[str, Any] | None, bound_median: float | None) -> dict[str, Any]:
    """flop_per_byte, bound_class and roofline_ceiling of one row (None / "unknown" where a fact is missing)."""
    flops, nbytes = (defined or {}).get("flops"), (defined or {}).get("compulsory_bytes")
    intensity = flops / nbytes if flops and nbytes else None
    copy, peak = (run or {}).get("copy_bandwidth"), (run or {}).get("peak")
    balance = peak / copy if peak and copy else None
    klass = "unknown" if intensity is None or balance is None else "memory-bound" if intensity < balance else "compute-bound"
    ceiling = roofline_ceiling(bound_median, nbytes, flops, copy, peak) if bound_median and copy and nbytes else None
    return {"flop_per_byte": intensity, "bound_class": klass, "roofline_ceiling": ceiling}
