"""One case of a baselines JSON (docs/benchmarks/baselines_h200.json), built from a measurement's
evidence: the payload that BaselinesMeasured and CandidateMeasured record (`MeasurementReport.evidence`
in measurement/reports.py).

Why one builder: the file is written either by a device run (baselines_matrix.py, from the report
it has just measured) or from a ledger export (baselines_from_export.py, from the events a gate
run recorded); both must write the same schema so that one table (baselines_table.py) renders
either. Only the public baselines are kept: a CandidateMeasured's candidate is not one.
Needs no Django: evidence is plain data.
"""
from __future__ import annotations

from operator_table_rows import usable


def env_summary(state: dict | None) -> dict | None:
    """The GPU state the harness recorded before or after timing, cut to what the table reports."""
    if not state:
        return None
    gpu = state.get("gpu") or {}
    return {
        "idle": state.get("idle"),
        "other_compute_processes": state.get("other_compute_processes"),
        "sm_mhz": gpu.get("clocks.sm"),
        "mem_mhz": gpu.get("clocks.mem"),
        "temperature_c": gpu.get("temperature.gpu"),
        "power_w": gpu.get("power.draw"),
        "throttle": gpu.get("clocks_event_reasons.active") or gpu.get("clocks_throttle_reasons.active"),
        "utilization": gpu.get("utilization.gpu"),
    }


def variant_entry(variant: dict) -> dict:
    """A variant's result; check errors and the timed-output error are already finite or null in
    evidence (JSON has no inf/NaN)."""
    correctness, timing = variant["correctness"], variant.get("timing") or {}
    errors = [c["error"] for c in correctness.get("checks", []) if c.get("error") is not None]
    return {
        "name": variant["name"],
        "role": variant["role"],
        "precision": variant["precision"],
        "correct": correctness["correct"],
        "reason": correctness.get("reason"),
        "detail": (correctness.get("detail") or "")[:500],
        "usable": usable(variant),
        "max_check_error": max(errors) if errors else None,
        "median_s": timing.get("median"),
        "pass_medians_s": timing.get("pass_medians"),
        "spread": timing.get("spread"),
        "fraction_of_copy": timing.get("fraction_of_copy"),
        "effective_bandwidth": timing.get("achieved_bandwidth"),
        "gflops": timing.get("gflops"),
        "impossible": timing.get("impossible"),
        "timed_output_error": timing.get("timed_output_error"),
        "identity": variant.get("identity") or {},
    }


def case_entry(evidence: dict, *, compulsory_bytes: int, flops: int) -> dict:
    """The case's baselines, its bound as the measurement recorded it (the fastest usable baseline,
    with its label: library version, tuned schedule, a composed bound's parts) and the GPU state."""
    variants = [variant_entry(v) for v in evidence["variants"] if v["role"] == "baseline"]
    recorded = evidence.get("bound")
    bound = None
    if recorded is not None:
        timed = next(v for v in variants if v["name"] == recorded["name"])
        bound = {
            "name": recorded["name"],
            "label": recorded.get("label", recorded["name"]),
            "precision": recorded["precision"],
            "median_s": recorded["median"],
            "fraction_of_copy": timed["fraction_of_copy"],
            "effective_bandwidth": timed["effective_bandwidth"],
        }
    environment = evidence.get("environment") or {}
    return {
        "case": evidence["case"],
        "compulsory_bytes": compulsory_bytes,
        "flops": flops,
        "copy_bandwidth": evidence["copy_bandwidth"],
        "bound": bound,
        "noisy": evidence["noisy"],
        "attempts": evidence["attempts"],
        "harness_version": evidence.get("harness_version"),
        "variants": variants,
        "environment": {"before": env_summary(environment.get("before")), "after": env_summary(environment.get("after"))},
    }
