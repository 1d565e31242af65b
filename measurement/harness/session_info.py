"""Child-side: what a backend offers for one case, and the checks of all its baselines.

Baselines are harness code, so they share one child (one process start, one CUDA context)
instead of one each; candidates and prior bests still get a child of their own.
"""
from __future__ import annotations

from typing import Any

from measurement.backends import get_backend
from measurement.backends.base import Kernel, Variant, ensure_fits

from .cases import parse_case
from .protocol import CheckRun, CheckSpec, check_variant


def baseline_session(backend_name: str, case_id: str, specs: list[CheckSpec], schedules: dict[str, str] | None = None,
                     extra: list[Variant] | None = None) -> tuple[dict[str, Any], Kernel, dict[str, list[CheckRun] | str]]:
    """(description with each baseline's precision and identity, the straightforward kernel,
    {baseline name: its check runs, or the error that stopped it}). `schedules` names the tuned
    schedule of a library baseline ({"halide": "fused_z4"}, measurement.selectors.tuned_schedules);
    a baseline not named runs its default. `extra` are baselines the parent made (the composed
    bounds of measurement.composed), checked here like the backend's own."""
    backend = get_backend(backend_name)
    case = parse_case(case_id)
    ensure_fits(backend, case)  # the first child of a measurement: refuse a case too large for the backend here
    straightforward = backend.straightforward(case)
    variants = [Variant("straightforward", straightforward, "baseline")]
    variants += [Variant(name, schedule=(schedules or {}).get(name)) for name in backend.baseline_names(case)
                 if name != "straightforward"]
    variants += extra or []
    precisions = {"straightforward": case.precision}
    identities: dict[str, dict[str, Any]] = {}
    runs: dict[str, list[CheckRun] | str] = {}
    for variant in variants:
        try:
            prepared = backend.prepare(case, variant)
            precisions[variant.name] = prepared.precision
            identities[variant.name] = dict(getattr(prepared, "identity", None) or {})
            runs[variant.name] = check_variant(backend_name, case_id, variant, specs)
        except Exception as exc:  # a baseline that cannot run here is reported, not fatal
            runs[variant.name] = f"{type(exc).__name__}: {exc}"
    return {**backend.describe(), "precisions": precisions, "identities": identities}, straightforward, runs


def baseline_schedules(backend_name: str, case_id: str, library: str) -> tuple[str, dict[str, str]]:
    """(the library's version, {schedule name: text} of its family for the case, default first):
    what a tuning run (measurement.tuning) checks and times, read where the baseline runs."""
    backend = get_backend(backend_name)
    family = getattr(backend, "baseline_schedules", None)
    if family is None:
        raise ValueError(f"the {backend_name} backend has no schedule families (Backend.baseline_schedules)")
    return family(parse_case(case_id), library)
