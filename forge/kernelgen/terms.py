"""How a stencil's offsets become source text: shared by the C and the CUDA writers."""
from __future__ import annotations

from typing import Any

from measurement.harness.cases import Case


def offsets3(case: Case) -> list[tuple[int, int, int]]:
    """The stencil's offsets as (dz, dy, dx) (2D: dz = 0)."""
    return [tuple(o) if len(o) == 3 else (0, *o) for o in case.stencil.offsets]  # type: ignore[misc]


def offset_text(offset: tuple[int, int, int], sz: str, sy: str) -> str:
    """` + dz*sz + dy*sy + dx` (empty for the centre)."""
    text = ""
    for step, stride in zip(offset, (sz, sy, "")):
        if step == 0:
            continue
        sign = "-" if step < 0 else "+"
        m = abs(step)
        term = str(m) if stride == "" else (stride if m == 1 else f"{m} * {stride}")
        text += f" {sign} {term}"
    return text


def grouped(terms: list[tuple[Any, Any]]) -> list[tuple[Any, list[Any]]]:
    """[(key, [items...]), ...] keyed by first appearance of each key, items in order."""
    order: list[Any] = []
    groups: dict[Any, list[Any]] = {}
    for item, key in terms:
        if key not in groups:
            order.append(key)
            groups[key] = []
        groups[key].append(item)
    return [(k, groups[k]) for k in order]


