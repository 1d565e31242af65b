"""The forged-kernel library: what applications call to get, and run, an admitted kernel.

A read-only service over the ledger's projections (selectors style: plain functions, no
writes). Given a case (and backend, and for CUDA optionally the architecture), `lookup`
returns a `ForgedKernel`: the operator gate's admitted kernel for that exact case, or, when
the case itself has none, the kernel of the sealed operator-map cell of the same stencil type,
precision and backend nearest in shape (which kernels qualify, and in what order:
forge/library_offers.py). `ForgedKernel.run` runs it on host arrays through the
measurement backend interface. `run_forged` does both from the arrays alone.

Why another shape may be served: kernels in this project take nz, ny, nx at run time, and the
gate checks every candidate on the case shape and on an odd shape (e.g. 37x43x65) before it
admits it, so a kernel of star_1/64x64x64/f32 is a checked, correct kernel for any star_1 f32
grid; it was only *tuned* (and timed) for 64x64x64. Another type or precision is never served.

What is served, and never:
  * only kernels whose admission still stands: the OperatorResult status is admitted or
    downgraded. A retracted result is never served, neither for its own case nor as a neighbour;
    a sealed cell is served only while its own verdict is unretracted and its case's headline
    result still stands.
  * with `architecture`, only kernels whose CandidateMeasured evidence was measured on that
    device; without it, the returned kernel says where it was measured.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from measurement.backends import BACKENDS, get_backend
from measurement.backends.base import Kernel, Variant, unwritten
from measurement.harness.cases import PRECISIONS, Case, CaseError, parse_case
from measurement.models import OperatorResult
from measurement.services import result_key

from .library_offers import (
    STANDING,
    Offer,
    architecture_label,
    architecture_matches,
    measured_architecture,
    ranked_offers,
    verdict_standing,
)
from .models import MapCell

COEFFICIENT_SETS_KEPT = 8


class NoForgedKernel(LookupError):
    """No admitted kernel can be served for this case; the message says what is available."""

    def __init__(self, message: str, *, case: str, backend: str, architecture: str | None, available: list[str]):
        super().__init__(message)
        self.case = case
        self.backend = backend
        self.architecture = architecture
        self.available = available


# ---------------------------------------------------------------- the served kernel


@dataclass
class ForgedKernel:
    """An admitted kernel with its provenance, ready to run on arrays of any valid shape.

    `case` is the case it was admitted or sealed for; `requested` the case asked for. They
    differ when `dispatch` is NEAREST_SHAPE_CELL (`reason` says why that cell was chosen).
    `speedup` is over the public bound of `case` (after any downgrade), measured on
    `architecture`; for another shape it is a hint, not a measurement.
    """

    requested: str
    case: str
    backend: str
    source: str = field(repr=False)
    launch: dict[str, Any]
    source_hash: str
    verdict_event: str
    status: str  # admitted | downgraded
    speedup: float | None
    bound: dict[str, Any] | None
    dispatch: str  # exact_case | exact_shape_cell | nearest_shape_cell
    reason: str
    cell: str | None  # the MapCell key (backend|case) when a sealed cell was served
    architecture: dict[str, Any]  # device, compute_capability (CUDA) of the measurement
    _runtime: tuple[Any, Any] | None = field(default=None, init=False, repr=False, compare=False)
    _coefficients: dict[bytes, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def served_case(self) -> Case:
        return parse_case(self.case)

    @property
    def halo(self) -> int:
        """Cells the result lacks on every side of every axis (radius x time steps)."""
        return self.served_case.stencil.halo

    @property
    def architecture_label(self) -> str:
        return architecture_label(self.architecture)

    def run(self, inputs: Mapping[str, np.ndarray], coefficients: Sequence[float] | np.ndarray | None = None) -> np.ndarray:
        """Apply the kernel once to host arrays; returns the written region only.

        `inputs`: {"u": u} (plus "a" for varcoef_* types), NumPy arrays of the case's dtype,
        nz x ny x nx (2D types: ny x nx), any shape whose extents are at least 2 x halo + 1.
        `coefficients`: one per symmetry class (Case.stencil.classes); default: the case's
        recorded constant coefficients (Case.coefficients(), what CaseDefined records).
        Returns a new array of shape (n - 2 * halo for each extent n) and the case's dtype:
        the grid points the stencil defines, i.e. result[i, j, k] belongs at grid point
        (i + halo, j + halo, k + halo). The halo is not returned because the kernel never
        writes it (its content is the caller's boundary condition).
        """
        shaped = validated_case(self.served_case, inputs)
        coef = validated_coefficients(shaped, coefficients)
        backend, prepared = self._prepared()
        buffers = backend.allocate(shaped, {name: np.asarray(inputs[name]) for name in shaped.input_names})
        buffers.poison_output()
        prepared.run(buffers, self._device_coefficients(backend, coef))
        backend.synchronize()
        result = np.ascontiguousarray(buffers.output()[shaped.region])
        missed = int(np.count_nonzero(unwritten(result)))
        if missed:
            raise RuntimeError(f"the kernel of {self.case} left {missed} points of the {shaped.id} region unwritten")
        return result

    def _prepared(self) -> tuple[Any, Any]:
        """The backend and the compiled kernel, built once per ForgedKernel (compiling is slow)."""
        if self._runtime is None:
            backend = get_backend(self.backend)
            variant = Variant("forged", Kernel(self.source, dict(self.launch)), role="candidate")
            self._runtime = (backend, backend.prepare(self.served_case, variant))
        return self._runtime


    def _device_coefficients(self, backend: Any, coef: np.ndarray) -> Any:
        """The coefficients in the backend's form, made once per distinct set: the CUDA backend
        keeps every array it makes alive (a registry of host copies), so one per run would grow."""
        key = coef.tobytes()
        if key not in self._coefficients:
            if len(self._coefficients) >= COEFFICIENT_SETS_KEPT:
                self._coefficients.clear()
            self._coefficients[key] = backend.coefficients(coef)
        return self._coefficients[key]


def validated_case(served: Case, inputs: Mapping[str, np.ndarray]) -> Case:
    """The served case at the inputs' shape, or a ValueError that says what is wrong."""
    if not isinstance(inputs, Mapping):
        raise ValueError(f"inputs must be a dict of arrays, e.g. {{'u': u}}; got {type(inputs).__name__}")
    names = served.input_names
    missing = [name for name in names if name not in inputs]
    if missing:
        need = " and the variable coefficient field 'a' (varcoef types)" if "a" in missing else ""
        raise ValueError(f"{served.type} needs inputs {list(names)}{need}; missing {missing}")
    extra = sorted(set(inputs) - set(names))
    if extra:
        raise ValueError(f"{served.type} takes only inputs {list(names)}; unexpected {extra}")
    arrays = {name: np.asarray(inputs[name]) for name in names}
    dims = served.stencil.dims
    for name, array in arrays.items():
        if array.ndim != dims:
            axes = "(nz, ny, nx)" if dims == 3 else "(ny, nx)"
            raise ValueError(f"{served.type} is {dims}D: input {name!r} must be {axes}, got shape {array.shape}")
        if array.dtype != served.dtype:
            raise ValueError(f"input {name!r} is {array.dtype} but this kernel computes in {served.precision} "
                             f"({served.dtype}); kernels are forged per precision: convert the array or look up "
                             f"the {PRECISION_OF.get(array.dtype.name, array.dtype.name)} case")
    if "a" in arrays and arrays["a"].shape != arrays["u"].shape:
        raise ValueError(f"inputs 'u' {arrays['u'].shape} and 'a' {arrays['a'].shape} must have the same shape")
    try:
        return parse_case(served.with_shape(arrays["u"].shape).id)
    except CaseError as error:
        raise ValueError(f"cannot run {served.type} on shape {arrays['u'].shape}: {error}") from None


def validated_coefficients(case: Case, coefficients: Sequence[float] | np.ndarray | None) -> np.ndarray:
    classes = len(case.stencil.classes)
    if coefficients is None:
        return case.coefficients()
    coef = np.asarray(coefficients, dtype=np.float64)
    if coef.shape != (classes,):
        raise ValueError(f"{case.type} takes {classes} coefficients (one per symmetry class "
                         f"{list(case.stencil.classes)}), got shape {coef.shape}")
    if not np.all(np.isfinite(coef)):
        raise ValueError("coefficients must be finite")
    return coef


PRECISION_OF = {np.dtype(dtype).name: name for name, dtype in PRECISIONS.items()}


# ---------------------------------------------------------------- lookup


def lookup(case: str | Case, backend: str = "cpu", architecture: str | None = None) -> ForgedKernel:
    """The admitted kernel for `case` on `backend`: the exact case's, else the nearest sealed shape.

    Order: (1) the case's own OperatorResult while it stands (admitted/downgraded);
    (2) sealed MapCells of the same type, precision and backend whose kernels still stand,
    nearest first by |log2 of the points ratio|, then by aspect (the distance between the
    shapes' log-extents after removing their scale), then by case id for a fixed order.
    `architecture` (CUDA: device name such as "NVIDIA H200", or compute capability "9.0" /
    "sm_90"; CPU: the CPU model) keeps only kernels measured there.
    Raises NoForgedKernel when nothing qualifies; ValueError for a bad case id or backend.
    """
    wanted = case if isinstance(case, Case) else parse_case(case)
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; use one of {', '.join(BACKENDS)}")
    offers = ranked_offers(wanted, backend)
    for offer in offers:
        measured_on = measured_architecture(offer.verdict)
        if architecture is None or architecture_matches(measured_on, architecture):
            return _forged(offer, wanted, backend, measured_on)
    raise _no_kernel(wanted, backend, architecture, offers)


def run_forged(stencil_type: str, inputs: Mapping[str, np.ndarray], backend: str = "cpu",
               coefficients: Sequence[float] | np.ndarray | None = None, architecture: str | None = None) -> np.ndarray:
    """Look up the kernel for the arrays' own shape and precision and run it (the one-call form).

    Each call looks the kernel up again (a retraction takes effect at once); an application
    that calls often should keep the ForgedKernel from `lookup` instead, which compiles once.
    """
    u = np.asarray(inputs["u"]) if isinstance(inputs, Mapping) and "u" in inputs else None
    if u is None:
        raise ValueError("inputs must be a dict with at least the array 'u'")
    precision = PRECISION_OF.get(u.dtype.name)
    if precision is None:
        raise ValueError(f"input 'u' is {u.dtype}; forged kernels exist for {', '.join(PRECISIONS)} only")
    try:
        case = parse_case(f"{stencil_type}/{'x'.join(map(str, u.shape))}/{precision}")
    except CaseError as error:
        raise ValueError(f"no case for {stencil_type} arrays of shape {u.shape}: {error}") from None
    return lookup(case, backend, architecture).run(inputs, coefficients)


def _forged(offer: Offer, wanted: Case, backend: str, measured_on: dict[str, Any]) -> ForgedKernel:
    return ForgedKernel(
        requested=wanted.id, case=offer.case, backend=backend, source=offer.source,
        launch=dict(offer.launch), source_hash=offer.source_hash, verdict_event=offer.verdict_event,
        status=offer.status, speedup=offer.speedup, bound=offer.verdict.get("bound"), dispatch=offer.dispatch,
        reason=f"{offer.reason}; measured on {architecture_label(measured_on)}", cell=offer.cell,
        architecture=measured_on,
    )


# ---------------------------------------------------------------- the error


def _no_kernel(wanted: Case, backend: str, architecture: str | None, offers: list[Offer]) -> NoForgedKernel:
    available = available_kernels(wanted.type, backend)
    lines = [f"no forged kernel for {wanted.id} on {backend}" + (f" measured on {architecture!r}" if architecture else "") + "."]
    if architecture and offers:
        seen = sorted({architecture_label(measured_architecture(o.verdict)) for o in offers})
        lines.append(f"Kernels that would qualify were measured on: {'; '.join(seen)}.")
    own = OperatorResult.objects.filter(result=result_key(backend, wanted.id)).first()
    if own is not None and own.status not in STANDING:
        lines.append(f"Its own result {own.result} is {own.status}; a {own.status} result is never served.")
    lines.append(f"Available for {wanted.type} on {backend}: {', '.join(available) if available else 'none'}.")
    lines.append("Only the exact case or a sealed map cell of the same type and precision is served. To forge one: "
                 f".venv/bin/python manage.py forge run --case {wanted.id}" + (f" --backend {backend}" if backend != "cpu" else ""))
    return NoForgedKernel(" ".join(lines), case=wanted.id, backend=backend, architecture=architecture, available=available)


def available_kernels(stencil_type: str, backend: str) -> list[str]:
    """What this backend can serve for a stencil type, one line each (for messages and listings)."""
    results = OperatorResult.objects.filter(backend=backend, case__startswith=f"{stencil_type}/").order_by("case")
    cells = {cell.case: cell for cell in MapCell.objects.filter(backend=backend, case__startswith=f"{stencil_type}/")}
    lines = []
    for row in results:
        cell = cells.get(row.case)
        sealed = cell is not None and cell.verdict_event in verdict_standing(backend, row.case)
        if row.status in STANDING:
            lines.append(f"{row.case} ({row.status}{', sealed: serves its precision at any shape' if sealed else ', not sealed: this exact case only'})")
        else:
            lines.append(f"{row.case} ({row.status}: not served)")
    return lines
