"""Child-side: what a backend offers for one case, gathered before any measurement."""
from __future__ import annotations

from typing import Any

from measurement.backends import get_backend
from measurement.backends.base import Kernel, Variant

from .cases import parse_case


def backend_session_info(backend_name: str, case_id: str) -> tuple[dict[str, Any], list[str], Kernel]:
    """(description with each baseline's precision, library baseline names, straightforward kernel)."""
    backend = get_backend(backend_name)
    case = parse_case(case_id)
    straightforward = backend.straightforward(case)
    names = [name for name in backend.baseline_names(case) if name != "straightforward"]
    precisions = {"straightforward": case.precision}
    for name in names:
        precisions[name] = backend.prepare(case, Variant(name)).precision
    description = {**backend.describe(), "precisions": precisions}
    return description, names, straightforward
