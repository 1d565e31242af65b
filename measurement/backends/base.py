"""The small interface every backend implements. It runs inside the harness child process.

Kernel ABI (both languages), T = the case's element type (`_Float16`/`__half`, `float`, `double`):

    C:     void stencil(const T* u, const T* a, T* y, const double* coef, int nz, int ny, int nx)
    CUDA:  extern "C" __global__ void stencil(const T* __restrict__ u, const T* __restrict__ a,
                                              T* __restrict__ y, const double* __restrict__ coef,
                                              int nz, int ny, int nx)

`a` is the variable coefficient field (NULL unless the type is varcoef_*); 2D cases pass nz = 1;
`coef` holds one coefficient per symmetry class (Case.stencil.classes). Arrays are C-contiguous
nz×ny×nx, x fastest. The kernel writes y over the case's written region (the grid minus the
halo on every axis) and must not write anything else or touch u, a, coef.

Launch configuration (JSON): CPU `{"threads": N}` (OpenMP threads; omitted = all cores);
CUDA `{"block": [bx, by, bz], "tile": [tx, ty, tz], "shared_bytes": S}` where the grid is
ceil(nx/tx) × ceil(ny/ty) × ceil(nz/tz) (tile defaults to block).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata, util
from typing import Any, Protocol

import numpy as np

from measurement.harness.cases import Case, CaseTooLarge

# The largest candidate source the gate compiles. The largest real sources: 29 KiB (the
# hand-written octa candidates of fixtures/ledgers/h200_campaign.jsonl and forge/handwritten.py)
# and 45 KiB (the straightforward C kernel of box_4); 256 KiB leaves more than 5x over both.
# forge.kernelgen can render more for the deepest diamonds (231 KiB for diamond_ts8 with
# `march` and 4-wide vectors, 1.4 MiB for diamond_ts16): the gate refuses those as it refuses
# any other source above the limit.
MAX_SOURCE_BYTES = 256 * 1024
# What the harness holds of one case at once, in multiples of its arrays (inputs, coefficient
# field, output: Case.compulsory_bytes). CPU: the drawn inputs, the guarded copies, the pristine
# copies, the output, the library baselines' scratch and the parent's own inputs for the
# oracle; CUDA: the padded arrays, the pristine copies, the copy-bandwidth pair and the
# library baselines' scratch. About 3-4x on both; refusing above 4x keeps a case that cannot
# fit from allocating anything.
HARNESS_COPIES = 4


class BaselineUnavailable(Exception):
    """A library baseline the bound needs cannot run on this machine: a fact about the machine,
    not the library's correctness, so no verdict may be given without it."""


def not_installed(module: str | None) -> str | None:
    """Why a baseline that needs `module` cannot run here, or None (also where it needs none)."""
    return f"{module} is not installed" if module and util.find_spec(module) is None else None


# Before every run the output is filled with this quiet NaN (by bit pattern, per element size);
# any other input NaN (the CUDA padding around the inputs) has a different pattern. So after a
# run, an output NaN with exactly this pattern was never written, and any other NaN was
# computed from a NaN the kernel read: past an input's ends, or uninitialised memory.
OUTPUT_POISON_BITS = {2: 0x7F55, 4: 0x7FC5A5A5, 8: 0x7FF8A5A5A5A5A5A5}


def unsigned_view(array):
    """The same memory as unsigned integers of the element's size (numpy or cupy)."""
    return array.view(f"u{array.dtype.itemsize}")


def fill_output_poison(array) -> None:
    unsigned_view(array).fill(OUTPUT_POISON_BITS[array.dtype.itemsize])


def unwritten(output: np.ndarray) -> np.ndarray:
    """Where the output still holds the poison, bit for bit."""
    return unsigned_view(output) == OUTPUT_POISON_BITS[output.dtype.itemsize]


class CompileError(Exception):
    """The candidate did not compile; the message is the compiler's output."""


class SourceTooLarge(ValueError):
    """A kernel source above MAX_SOURCE_BYTES: refused before anything compiles or is recorded."""


def check_source(source: str) -> None:
    """SourceTooLarge for a source above MAX_SOURCE_BYTES (every entry of candidate code calls this)."""
    size = len(source.encode("utf-8", "surrogatepass"))
    if size > MAX_SOURCE_BYTES:
        raise SourceTooLarge(f"the kernel source is {size / 1024:.1f} KiB; the gate takes at most "
                             f"{MAX_SOURCE_BYTES // 1024} KiB (MAX_SOURCE_BYTES in measurement/backends/base.py)")


def ensure_fits(backend: "Backend", case: Case) -> None:
    """CaseTooLarge, before anything of the case is allocated, when HARNESS_COPIES times its
    arrays exceed what the backend can give (Backend.memory_limit)."""
    need = HARNESS_COPIES * case.compulsory_bytes
    limit, source = backend.memory_limit()
    if need > limit:
        arrays = len(case.input_names) + 1
        raise CaseTooLarge(
            f"{case.id} needs about {need / 2**30:.1f} GiB on the {backend.name} backend ({HARNESS_COPIES} x its {arrays} "
            f"arrays of {case.points * case.dtype.itemsize / 2**30:.2f} GiB); {source} gives {limit / 2**30:.1f} GiB. "
            "Choose a smaller shape or precision."
        )


@dataclass(frozen=True)
class Kernel:
    source: str
    launch: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Variant:
    """One thing to measure: a kernel (candidate, straightforward, prior best) or a library baseline."""

    name: str  # e.g. "candidate", "straightforward", "scipy.ndimage", "prior_best"
    kernel: Kernel | None = None  # None: a library baseline named by `name`
    role: str = "baseline"  # candidate | baseline | prior_best
    schedule: str | None = None  # a tuned library baseline's schedule (Halide): part of what the bound is
    steps: int = 1  # a composed bound: the single-step `kernel` launched this many times

    @property
    def library(self) -> str:
        """The library baseline this variant runs: its name before any "[schedule]". A tuning run
        (measurement.tuning) times all of a library's schedules in the same passes, and the
        harness keys a run's variants by name, so each schedule is a variant of its own name,
        "halide[z_march]", which the backends prepare as "halide" with that schedule."""
        return self.name.split("[", 1)[0]


def scheduled(library: str, schedule: str) -> Variant:
    """The variant of one schedule of a library baseline, named apart from its siblings (Variant.library)."""
    return Variant(f"{library}[{schedule}]", schedule=schedule)


def library_identity(library: str, distribution: str, computes_in: str, **details: Any) -> dict[str, Any]:
    """What a library baseline is, for its Prepared.identity: the library, the installed
    version of its distribution (from the package metadata: no import needed) and the
    precision it computes in."""
    try:
        version = metadata.version(distribution)
    except metadata.PackageNotFoundError:
        version = "not installed"
    return {"library": library, "version": version, "computes_in": computes_in, **details}


class Prepared(Protocol):
    """A compiled kernel or a ready baseline for one case; `precision` is what it computes in."""

    precision: str
    # What exactly ran, beyond the variant's name: library and version, schedule, the parts of a
    # composed bound. Recorded with the measurement, so a verdict names its bound precisely.
    identity: dict[str, Any]

    def run(self, buffers: "Buffers", coef: Any) -> None: ...


class Buffers(Protocol):
    """Device (or host) arrays of one problem: inputs, output, and their checks."""

    def poison_output(self) -> None: ...

    def fill_output(self, value: float) -> None:
        """Fill the output array (not any padding around it) with `value`: the refill before
        every timed launch (measurement.harness.protocol)."""

    def sampler(self, points: np.ndarray) -> Callable[[], np.ndarray]:
        """A function that reads the output at `points` (rows of indices) into host memory."""

    def output(self) -> np.ndarray: ...

    def inputs_unchanged(self) -> bool: ...

    def input_array(self, name: str) -> np.ndarray: ...


class Backend(Protocol):
    name: str  # "cpu" | "cuda"

    def describe(self) -> dict[str, Any]:
        """Device/CPU model, capability, driver and compiler versions, flags, cache/L2 size."""

    def copy_bandwidth(self, nbytes: int) -> float:
        """Measured copy rate in bytes/s, counting read + write, for arrays of `nbytes`."""

    def straightforward(self, case: Case) -> Kernel:
        """The naive kernel: one thread/iteration per output point, every neighbour loaded."""

    def empty(self, case: Case) -> Kernel:
        """A kernel with the ABI and an empty body: its time is the harness's launch overhead,
        subtracted before the physics floor is applied."""

    def baseline_names(self, case: Case) -> list[str]:
        """Library baselines available for this case on this machine."""

    def library_unavailable(self, case: Case, library: str) -> str | None:
        """Why the library baseline `library` cannot run for `case` on this machine (not
        installed, not built for the case, not unpacked), or None where it can. The gate refuses
        to measure rather than let such a baseline drop out of the bound without a word
        (session_info.refuse_missing_libraries)."""

    def prepare(self, case: Case, variant: Variant) -> Prepared:
        """Compile a kernel (raising CompileError) or set up a baseline."""

    def allocate(self, case: Case, inputs: dict[str, np.ndarray], guard: str | None = None) -> Buffers:
        """Place inputs and an output for one problem; `guard` = "end"/"start" puts an
        inaccessible page right after/before each array where the backend can (CPU)."""

    def coefficients(self, coef: np.ndarray) -> Any:
        """The coefficient array in the form kernels receive (float64, on the device)."""

    def memory_limit(self) -> tuple[int, str]:
        """(bytes one case's arrays may take here, where that figure comes from), read before
        anything of the case is allocated (ensure_fits)."""

    def time_launches(self, prepared: Prepared, buffers: Buffers, coef: Any, launches: int, flush: bool, *,
                      before: Callable[[int], None] | None = None, after: Callable[[int], None] | None = None) -> list[float]:
        """Seconds of each of `launches` launches, flushing caches/L2 before each when asked.
        `before(i)` runs before launch i's flush and `after(i)` once launch i has finished;
        neither is inside the timed region."""

    def synchronize(self) -> None: ...

    def environment(self) -> dict[str, Any]:
        """State that can spoil a measurement, read just before and after timing: other
        processes on the device (the idle check), clocks and throttle reasons, load average."""
