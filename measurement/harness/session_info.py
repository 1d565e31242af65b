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


def baseline_session(backend_name: str, case_id: str, specs: list[CheckSpec]) -> tuple[dict[str, Any], Kernel, dict[str, list[CheckRun] | str]]:
    """(description with each baseline's precision and identity, the straightforward kernel,
    {baseline name: its check runs, or the error that stopped it})."""
    backend = get_backend(backend_name)
    case = parse_case(case_id)
    ensure_fits(backend, case)  # the first child of a measurement: refuse a case too large for the backend here
    straightforward = backend.straightforward(case)
    variants = [Variant("straightforward", straightforward, "baseline")]
    variants += [Variant(name) for name in backend.baseline_names(case) if name != "straightforward"]
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
