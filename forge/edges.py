"""Edge shapes: whether a forged kernel generalises to a shape no round targeted (issue 16).

An edge file (fixtures/matrices/gpu_edges.json, cpu_edges.json) is a matrix of its own, with
`matrix` (the matrix whose kernels it tests) and `why` (the reason for each shape); it declares,
for each stencil type and precision of that matrix, one shape no round was run on: a thin slab
or a long box in 3-D, a thin strip in 2-D.

`measure_edge` gates on the edge case, unchanged and without a forging round, the kernel that
the forged-kernel library (forge.library.lookup) serves for the largest case of the matrix with
the edge's type and precision that has one: a standing admitted kernel, never a retracted one.
The kernel is not rendered again for the new shape: every kernel here takes nz, ny, nx at run
time and its launch grid is computed from the shape (measurement/backends/base.py), and the gate
checked it on an odd shape before admitting it; re-rendering a design (its lever plan, or a
hand-written family's chunk, chosen per shape by forge/handwritten.py) would make another kernel
than the one admitted, and the question is whether the admitted one holds its speedup. The gate
measures it against the edge case's own baselines as it measures any case (CandidateMeasured and
GateVerdict on operator/<backend>/<edge>), and EdgeShapeMeasured on edge/<backend>/<edge> says
that this verdict is a generalisation measurement and whose kernel it measured.

benchmarks/forge_edges.py drives it over an edge file; benchmarks/operator_table.py reports the
outcome beside the matrix ("Edge shapes (generalisation)").
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache

from ledger.selectors import stream_events
from ledger.services import NewEvent, append
from measurement.backends.base import Kernel
from measurement.harness.cases import parse_case
from measurement.harness.plan import ProtocolSettings
from measurement.matrices import MATRIX_DIR, matrix_cases
from measurement.selectors import standing_operator_results
from measurement.services import GateOutcome, MeasurementError, gate_candidate

from .events import EdgeShapeMeasured, edge_stream
from .library import ForgedKernel, NoForgedKernel, available_kernels, lookup


@dataclass(frozen=True)
class EdgeShape:
    case: str
    reason: str  # why this shape: the edge file's `why` of its shape


@dataclass(frozen=True)
class EdgeSet:
    name: str
    matrix: str  # the matrix whose admitted kernels the edges borrow
    edges: list[EdgeShape]


EDGE_KEYS = {"matrix", "why"}  # what makes a matrix file an edge file: the matrix it tests, a reason per shape


@lru_cache(maxsize=1)
def edge_set_names() -> frozenset[str]:
    """The matrix files that are edge files: their cases are reported beside the matrices, never in
    a matrix's headline figures. Read once a process (the dashboard asks on every request; the
    files are fixtures)."""
    return frozenset(path.stem for path in MATRIX_DIR.glob("*.json") if EDGE_KEYS <= set(json.loads(path.read_text())))


def read_edges(name: str) -> EdgeSet:
    """The edge file fixtures/matrices/NAME.json; MeasurementError naming what is wrong with it."""
    path = MATRIX_DIR / f"{name}.json"
    data = json.loads(path.read_text()) if path.is_file() else None
    if data is None or not EDGE_KEYS <= set(data):
        raise MeasurementError(f"{path} is not an edge file: it needs `matrix`, `why` and `cases` "
                               "(fixtures/matrices/gpu_edges.json is one)")
    edges, targeted = [], set(matrix_cases(data["matrix"]))
    for case_id in data["cases"]:
        shape = case_id.split("/")[1]
        if shape not in data["why"]:
            raise MeasurementError(f"{path}: {case_id} has no reason: add its shape {shape} to `why`")
        if case_id in targeted:
            raise MeasurementError(f"{path}: {case_id} is a case of the matrix {data['matrix']}: "
                                   "an edge is a shape no round targeted")
        edges.append(EdgeShape(parse_case(case_id).id, data["why"][shape]))
    return EdgeSet(data["name"], data["matrix"], edges)


def lenders(edge: str, matrix: str) -> list[str]:
    """The matrix's cases of the edge's type and precision, largest first (the cube, in both
    shipped matrices): the cases whose admitted kernel the edge may borrow, in that order."""
    wanted = parse_case(edge)
    same = [parse_case(c) for c in matrix_cases(matrix)]
    same = [c for c in same if (c.type, c.precision) == (wanted.type, wanted.precision)]
    return [c.id for c in sorted(same, key=lambda c: (-c.points, c.id))]


def borrowed_kernel(edge: str, matrix: str, backend: str) -> ForgedKernel:
    """What the library serves for the first lender that has a kernel; NoForgedKernel naming every
    lender tried and what the backend has for the type when none has one."""
    tried = lenders(edge, matrix)
    for case in tried:
        try:
            return lookup(case, backend)
        except NoForgedKernel:
            continue
    wanted = parse_case(edge)
    available = available_kernels(wanted.type, backend)
    raise NoForgedKernel(
        f"no admitted {wanted.type} {wanted.precision} kernel on {backend} to measure on {edge}: "
        + (f"none of the matrix {matrix}'s {', '.join(tried)} has a standing one" if tried
           else f"the matrix {matrix} has no {wanted.type} {wanted.precision} case")
        + f". Available for {wanted.type} on {backend}: {', '.join(available) if available else 'none'}.",
        case=edge, backend=backend, architecture=None, available=available)


def edge_measured(edge: str, backend: str) -> bool:
    """Whether this ledger already holds a generalisation measurement of the edge (a second run
    of the same edge file measures only the rest: a device call has 10 minutes)."""
    return bool(stream_events(edge_stream(backend, edge)))


def measured_kernel(edge: str, backend: str) -> str | None:
    """The source hash of the kernel the newest generalisation measurement of the edge gated, or
    None when the edge was never measured."""
    events = stream_events(edge_stream(backend, edge))
    return events[-1].data["source_hash"] if events else None


def edge_up_to_date(edge: str, matrix: str, backend: str, measured: str | None) -> bool:
    """Whether the edge was measured (`measured`: measured_kernel's hash, read once by the caller)
    with the kernel the library would lend it now: one measured before its matrix case's kernel was
    replaced (diamond_ts4 in issue 16) is measured again, since the table leaves such a pair out of
    its means; one with nothing to lend stays as it is."""
    if measured is None:
        return False
    try:
        return borrowed_kernel(edge, matrix, backend).source_hash == measured
    except NoForgedKernel:
        return True


def standing_matrix_cases(backend: str) -> list[str]:
    """The cases of `backend`'s standing operator results less the edge shapes: what a whole-matrix
    re-run (benchmarks/matrix_rerun.py) re-gates. An edge's admitted verdict stands like any case's
    (the library serves its kernel for that shape), but it is no case of the matrix, and re-gating it
    would spend the re-run's time budget (issue 16) on a measurement of generalisation."""
    return [row.case for row in standing_operator_results(backend) if not edge_measured(row.case, backend)]


def measure_edge(edge: EdgeShape, matrix: str, backend: str, *, actor: str, protocol: ProtocolSettings | None = None,
                 progress=None) -> tuple[ForgedKernel, GateOutcome]:
    """Gate the borrowed kernel on the edge case and record EdgeShapeMeasured beside the verdict.
    NoForgedKernel when nothing can be borrowed (nothing is recorded then); MeasurementError from
    the gate when the edge case cannot be measured here."""
    kernel = borrowed_kernel(edge.case, matrix, backend)
    hypothesis = (f"generalisation, no round targeted {edge.case}: the kernel admitted for {kernel.case} "
                  f"(`{kernel.source_hash[:12]}`), unchanged. {edge.reason}")
    outcome = gate_candidate(edge.case, backend, Kernel(kernel.source, kernel.launch), actor, hypothesis, protocol,
                             progress)
    verdict = outcome.verdict_event.data
    payload = EdgeShapeMeasured(
        case=edge.case, backend=backend, reason=edge.reason, borrowed_from=kernel.case,
        borrowed_verdict=kernel.verdict_event, source_hash=kernel.source_hash,
        verdict_event=str(outcome.verdict_event.event_id), verdict=outcome.verdict, state=verdict["state"],
        speedup=outcome.speedup)
    append(NewEvent(stream=edge_stream(backend, edge.case), type="EdgeShapeMeasured", actor=actor,
                    payload=payload.model_dump()))
    return kernel, outcome
