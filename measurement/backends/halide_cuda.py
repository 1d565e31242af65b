"""The "halide" baseline of the CUDA backend: a Halide pipeline compiled ahead of time
(measurement.backends.halide_aot, scripts/halide_aot.py), loaded with ctypes and run on CuPy's
device arrays in CuPy's context and stream.

No copies and no second context: the shim linked into every AOT object hands Halide the
context and stream CuPy uses (the device's primary context, the legacy default stream that
the backend's timing events are recorded on), and each array is a halide_buffer_t that wraps
the CuPy device pointer (halide_cuda_wrap_device_ptr) with no host allocation. So a launch is
one call of the pipeline's argv entry, timed by the same events and L2 flush as every other
variant. The output buffer is y cropped to the written region (its mins at the halo), so
Halide writes nothing else; the coefficients stay the float64 device array the harness made.

The pipeline is shape-generic: it is chosen by the case id it was compiled for and runs on
any shape of the same type and precision (the checks use smaller and odd ones).

Nothing here imports Django or halide; cupy only through cuda_device's lazy handle.
"""
from __future__ import annotations

import ctypes
from pathlib import Path
from typing import TYPE_CHECKING, Any

from measurement.harness.cases import Case

from .cuda_device import cupy
from .halide_aot import aot_dir, case_entries, entry_for, not_built, read_index

if TYPE_CHECKING:
    from .cuda import CudaBuffers

HALIDE_FLOAT = 2  # halide_type_code_t
DRIVER_LIBRARY = "libcuda.so.1"
CACHED_COEFFICIENTS = 8  # argument sets kept per problem (one per coefficient array in use)


class HalideDimension(ctypes.Structure):
    _fields_ = [("min", ctypes.c_int32), ("extent", ctypes.c_int32), ("stride", ctypes.c_int32), ("flags", ctypes.c_uint32)]


class HalideBuffer(ctypes.Structure):
    """halide_buffer_t of HalideRuntime.h (Halide 21): 56 bytes, the type as code/bits/lanes."""

    _fields_ = [
        ("device", ctypes.c_uint64),
        ("device_interface", ctypes.c_void_p),
        ("host", ctypes.c_void_p),
        ("flags", ctypes.c_uint64),
        ("code", ctypes.c_uint8),
        ("bits", ctypes.c_uint8),
        ("lanes", ctypes.c_uint16),
        ("dimensions", ctypes.c_int32),
        ("dim", ctypes.POINTER(HalideDimension)),
        ("padding", ctypes.c_void_p),
    ]


_libraries: dict[Path, ctypes.CDLL] = {}
_bound: set[Path] = set()


def _library(path: Path) -> ctypes.CDLL:
    if path not in _libraries:
        # Halide's runtime looks the driver API up with dlsym in the process, then dlopens the
        # unversioned "libcuda.so", which a driver-only machine may lack: make the libcuda.so.1
        # that CuPy already uses visible to that lookup.
        ctypes.CDLL(DRIVER_LIBRARY, mode=ctypes.RTLD_GLOBAL)
        lib = ctypes.CDLL(str(path))
        lib.forgestencil_halide_bind.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        lib.forgestencil_halide_bind.restype = None
        lib.forgestencil_halide_last_error.restype = ctypes.c_char_p
        lib.halide_cuda_wrap_device_ptr.argtypes = [ctypes.c_void_p, ctypes.POINTER(HalideBuffer), ctypes.c_uint64]
        code = lib.forgestencil_halide_init()
        if code != 0:
            raise RuntimeError(f"the Halide runtime of {path.name} did not start ({code}): {_last_error(lib)}")
        _libraries[path] = lib
    return _libraries[path]


def _last_error(lib: ctypes.CDLL) -> str:
    return lib.forgestencil_halide_last_error().decode(errors="replace").strip()


def _bind(path: Path, lib: ctypes.CDLL) -> None:
    """Hand CuPy's current context and stream to this object's Halide runtime (once; after the
    first CuPy allocation, so the context exists)."""
    if path in _bound:
        return
    context = cupy.cuda.driver.ctxGetCurrent()
    if not context:
        raise RuntimeError("no current CUDA context: allocate the problem's arrays before running Halide")
    lib.forgestencil_halide_bind(context, cupy.cuda.get_current_stream().ptr)
    _bound.add(path)


class _Arguments:
    """The halide_buffer_t structs of one problem and one coefficient array, and the argv
    array that points at them (kept together, so nothing is freed while Halide holds it)."""

    def __init__(self, lib: ctypes.CDLL, buffers: "CudaBuffers", coef, names: list[str]):
        case = buffers.case
        self.structs: list[tuple[HalideBuffer, Any]] = []
        for name in names:
            self.structs.append(self._wrap(lib, buffers.array(name), case, whole=True))
        self.structs.append(self._wrap(lib, coef, case, whole=True))
        self.structs.append(self._wrap(lib, buffers.array("y"), case, whole=False))
        self.argv = (ctypes.c_void_p * len(self.structs))(*(ctypes.addressof(s) for s, _ in self.structs))

    @staticmethod
    def _wrap(lib: ctypes.CDLL, array, case: Case, whole: bool) -> tuple[HalideBuffer, Any]:
        """A device buffer over `array` (x first); the output (`whole` False) cropped to the
        case's region, its pointer at the region's first element and its mins at the halo."""
        item = array.dtype.itemsize
        shape = array.shape[::-1]
        strides = [s // item for s in array.strides[::-1]]
        h = 0 if whole else case.stencil.halo
        dims = (HalideDimension * len(shape))(*(HalideDimension(h, n - 2 * h, s, 0) for n, s in zip(shape, strides)))
        pointer = array.data.ptr + item * sum(h * s for s in strides)
        struct = HalideBuffer(code=HALIDE_FLOAT, bits=8 * item, lanes=1, dimensions=len(shape), dim=dims)
        code = lib.halide_cuda_wrap_device_ptr(None, ctypes.byref(struct), pointer)
        if code != 0:
            raise RuntimeError(f"halide_cuda_wrap_device_ptr failed ({code}): {_last_error(lib)}")
        return struct, dims


class HalideCudaBaseline:
    """One compiled schedule of the case's Halide pipeline (Variant.schedule; None: the family's
    default). ValueError at construction, with the reason, where none was compiled."""

    def __init__(self, case: Case, schedule: str | None, folder: Path | None = None):
        folder = folder or aot_dir()
        reason = unavailable(case.id, folder)
        if reason is not None:
            raise ValueError(reason)
        index = read_index(folder)
        entry = entry_for(index, case.id, schedule)
        self.case = case
        self.precision = case.precision  # halide_algorithm: f16 storage with f32 accumulation, as straightforward
        self.identity = {
            "library": "halide",
            "version": index["halide_version"],
            "schedule": entry["schedule"],
            "schedule_text": entry["schedule_text"],
            "target": index["target"],
            "aot_sha256": entry["aot_sha256"],
            "computes_in": "f64" if case.precision == "f64" else "f32",
        }
        self._path = folder / entry["file"]
        self._lib = _library(self._path)
        self._function = getattr(self._lib, entry["function"] + "_argv")
        self._function.argtypes = [ctypes.c_void_p]
        self._inputs = [name for name in entry["arguments"] if name != "coef"]

    def run(self, buffers: "CudaBuffers", coef) -> None:
        _bind(self._path, self._lib)
        key = ("halide", self._path, self._function.__name__)
        known = buffers.cache.setdefault(key, [])
        arguments = next((args for c, args in known if c is coef), None)
        if arguments is None:
            arguments = _Arguments(self._lib, buffers, coef, self._inputs)
            known[:] = known[-(CACHED_COEFFICIENTS - 1):] + [(coef, arguments)]
        code = self._function(arguments.argv)
        if code != 0:
            raise RuntimeError(f"Halide pipeline {self.identity['schedule']} on {buffers.case.id} failed ({code}): "
                               f"{_last_error(self._lib)}")


def schedule_family(case: Case, folder: Path | None = None) -> tuple[str, dict[str, str]]:
    """(Halide's version, {schedule: text}) of the case's entries in the AOT folder, default first:
    the candidates of a tuning run on the GPU (CudaBackend.baseline_schedules). A schedule whose
    compilation failed stays in: preparing it raises its recorded reason (entry_for), so the
    tuning run records why it could not be chosen. ValueError where the folder has no entry."""
    folder = folder or aot_dir()
    index = read_index(folder)
    if index is None:
        raise ValueError(f"no Halide AOT folder at {folder}: run scripts/halide_aot.py and carry it")
    entries = case_entries(index, case.id)
    if not entries:
        entry_for(index, case.id, None)  # raises, saying how to build the case's pipelines
    entries.sort(key=lambda entry: not entry["default"])  # stable: the build's order after the default
    return index["halide_version"], {entry["schedule"]: entry["schedule_text"] for entry in entries}


def compiled_cases(folder: Path | None = None) -> set[str]:
    """The case ids an AOT folder has entries for (compiled or with a recorded error)."""
    index = read_index(folder)
    return set() if index is None else {entry["case"] for entry in index["entries"]}


def unavailable(case_id: str, folder: Path | None = None) -> str | None:
    """Why this machine cannot run the case's Halide pipelines (no AOT folder, none built for the
    case, an object not unpacked), or None where it can. A schedule recorded as not compiled is
    not missing: it is the library failing, which preparing it reports (entry_for)."""
    folder = folder or aot_dir()
    index = read_index(folder)
    if index is None:
        return f"no Halide AOT folder at {folder}: run scripts/halide_aot.py and carry it"
    entries = case_entries(index, case_id)
    if not entries:
        return not_built(case_id)
    packed = [folder / entry["file"] for entry in entries if "file" in entry and not (folder / entry["file"]).exists()]
    if packed:
        return f"{packed[0]} is not unpacked: run python3 scripts/halide_aot.py --unpack"
    return None
