"""Halide pipelines compiled ahead of time for the CUDA backend: the build (here, where pip
`halide` is installed) and the index that the device side reads (measurement.backends.halide_cuda).

Why AOT: the GPU machine has no halide wheel, and the wheel (69 MB) cannot travel beside
device_wheels under the device tool's 64 MiB limit; a compiled pipeline is a few tens of KB.

What a build makes, per case: one object per schedule of the case's CUDA family
(measurement.backends.halide_algorithm), compiled with `no_runtime` for AOT_TARGET; one Halide
runtime (AOT_TARGET with the runtime, the CUDA module loader in it); SHIM_SOURCE; all linked and
stripped into one shared object named by its sha256 (`<sha256>.so`), so the runtime is carried
once per case, not once per schedule. It is stored xz-packed (`<sha256>.so.xz`, about 65 KB of
about 295 KB) and unpacked on the GPU machine before use (`unpack`, `scripts/halide_aot.py
--unpack`): 37 unpacked objects (11 MB) did not fit beside device_wheels (38 MB) and the working
tree (16 MB) under the device call's 64 MiB. The folder's INDEX_NAME lists every (case, schedule):
its text, the function to call, the file and its hash, or the error that stopped its compilation
(the reason the baseline then reports for that case).

AOT_TARGET is generic x86-64, not halide_algorithm.halide_target("cuda"), which adds this
machine's CPU features (AVX-512 here): the host part of a pipeline must run on the GPU
machine's processor too. Halide 21 knows no capability above 8.6: the pipelines carry sm_86
PTX, which the driver compiles for the H200 (9.0) when the module is first loaded.

The calling convention of every function: `fn_argv(void **args)` with args = u, a (varcoef
only), coef, out; buffers are halide_buffer_t, out cropped to the case's written region with
its mins at the halo (halide_algorithm's contract).

Nothing here imports Django; halide itself is imported only by build_case.
"""
from __future__ import annotations

import hashlib
import json
import lzma
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from measurement.harness.cases import Case

AOT_TARGET = "x86-64-linux-cuda-cuda_capability_86"
AOT_ENV = "FORGESTENCIL_HALIDE_AOT"
DEFAULT_AOT_DIR = Path(__file__).resolve().parents[2] / "device_carry" / "halide"
INDEX_NAME = "index.json"
PACKED = ".xz"  # what travels: xz packs an object about 4.5x, and the device call's 64 MiB are shared
ARGUMENTS = ("u", "a", "coef")  # in this order, those the case has; the output comes last
FUNCTION_PREFIX = "fs_"

# Halide's CUDA runtime asks these hooks for its context and stream. Bound to CuPy's context
# (the device's primary context) and stream, Halide launches into the same context and queue as
# every other variant, on device pointers that CuPy allocated: no second context, no copies.
# Installed with the runtime's own setters (HalideRuntimeCuda.h), not by overriding weak
# symbols. The error handler keeps Halide's last message for the Python side's exception (the
# default one aborts the process); intermediate device allocations (the step-by-step diamond
# schedules) are reused from launch to launch, as a Halide application would set it.
SHIM_SOURCE = r"""
#include <stdbool.h>
#include <string.h>
typedef int (*acquire_t)(void *, void **, bool);
typedef int (*release_t)(void *);
typedef int (*stream_t)(void *, void *, void **);
typedef void (*error_t)(void *, const char *);
extern acquire_t halide_set_cuda_acquire_context(acquire_t);
extern release_t halide_set_cuda_release_context(release_t);
extern stream_t halide_set_cuda_get_stream(stream_t);
extern error_t halide_set_error_handler(error_t);
extern int halide_reuse_device_allocations(void *, bool);

static void *bound_context = 0;
static void *bound_stream = 0;
static char last_error[4096];

static int acquire(void *user_context, void **ctx, bool create) {
    (void)user_context; (void)create;
    if (!bound_context) {
        strncpy(last_error, "no CUDA context bound: call forgestencil_halide_bind first", sizeof last_error - 1);
        return -1;
    }
    *ctx = bound_context;
    return 0;
}
static int release(void *user_context) { (void)user_context; return 0; }
static int stream(void *user_context, void *ctx, void **out) { (void)user_context; (void)ctx; *out = bound_stream; return 0; }
static void on_error(void *user_context, const char *message) {
    (void)user_context;
    strncpy(last_error, message, sizeof last_error - 1);
}

/* At load: Halide's default error handler aborts the process; this one keeps the message. */
int forgestencil_halide_init(void) {
    halide_set_error_handler(on_error);
    halide_set_cuda_acquire_context(acquire);
    halide_set_cuda_release_context(release);
    halide_set_cuda_get_stream(stream);
    return halide_reuse_device_allocations(0, true);
}

void forgestencil_halide_bind(void *context, void *cuda_stream) {
    bound_context = context;
    bound_stream = cuda_stream;
}

const char *forgestencil_halide_last_error(void) { return last_error; }
"""


def aot_dir() -> Path:
    return Path(os.environ.get(AOT_ENV) or DEFAULT_AOT_DIR)


def function_name(schedule: str) -> str:
    return FUNCTION_PREFIX + schedule


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _run(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed: {done.stderr.strip()}")


def build_case(case: Case, out_dir: Path, *, compiler: str = "cc") -> list[dict[str, Any]]:
    """Compile every CUDA schedule of `case` into one shared object in `out_dir`; its index
    entries (a schedule that does not compile gets an entry with its `error`)."""
    import halide as hl

    from . import halide_algorithm

    entries: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="halide-aot-") as scratch:
        work = Path(scratch)
        pipeline_target = hl.Target(AOT_TARGET).with_feature(hl.TargetFeature.NoRuntime)
        objects = []
        family = halide_algorithm.schedules(case, "cuda")
        for name in family:
            entry = {"case": case.id, "schedule": name, "default": name == halide_algorithm.default_schedule(case, "cuda")}
            try:
                built = halide_algorithm.build(case, "cuda", name)
                arguments = [built.params[key] for key in ARGUMENTS if key in built.params]
                path = work / f"{name}.o"
                built.pipeline.compile_to({hl.OutputFileType.object: str(path)}, arguments, function_name(name), pipeline_target)
            except Exception as error:  # recorded: the reason this schedule has no pipeline
                entries.append({**entry, "schedule_text": family[name], "error": f"{type(error).__name__}: {error}".strip()})
                continue
            objects.append(path)
            entries.append({**entry, "schedule_text": built.schedule_text, "function": function_name(name),
                            "arguments": [key for key in ARGUMENTS if key in built.params]})
        if not objects:
            return entries
        runtime, shim = work / "runtime.o", work / "shim.c"
        hl.compile_standalone_runtime(str(runtime), hl.Target(AOT_TARGET))
        shim.write_text(SHIM_SOURCE)
        linked = work / "pipelines.so"
        _run([compiler, "-shared", "-fPIC", "-O2", "-s", "-o", str(linked), *map(str, objects), str(runtime), str(shim),
              "-ldl", "-lpthread"])
        digest = _sha256(linked)
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / f"{digest}.so{PACKED}").write_bytes(lzma.compress(linked.read_bytes(), preset=9 | lzma.PRESET_EXTREME))
    for entry in entries:
        if "error" not in entry:
            entry.update(file=f"{digest}.so", aot_sha256=digest)
    return entries


def unpack(folder: Path | None = None) -> list[Path]:
    """Decompress every packed object of the folder that is not unpacked yet (on the GPU machine,
    before anything loads them: the harness children see the repository read-only); each one's
    sha256 must be the name it was packed under."""
    folder = folder or aot_dir()
    made = []
    for packed in sorted(folder.glob(f"*.so{PACKED}")):
        target = packed.with_suffix("")
        if target.exists():
            continue
        data = lzma.decompress(packed.read_bytes())
        if hashlib.sha256(data).hexdigest() != target.stem:
            raise ValueError(f"{packed.name} does not unpack to the object it names (sha256 {target.stem}): build it again")
        target.write_bytes(data)
        made.append(target)
    return made


def write_index(out_dir: Path, entries: list[dict[str, Any]], *, matrix: str) -> Path:
    from . import halide_algorithm

    index = {"halide_version": halide_algorithm.VERSION, "target": AOT_TARGET, "matrix": matrix, "entries": entries}
    path = out_dir / INDEX_NAME
    path.write_text(json.dumps(index, indent=1, sort_keys=True) + "\n")
    return path


def read_index(folder: Path | None = None) -> dict[str, Any] | None:
    """The index of an AOT folder, or None where none was built or carried."""
    path = (folder or aot_dir()) / INDEX_NAME
    if not path.is_file():
        return None
    return json.loads(path.read_text())


def case_entries(index: dict[str, Any], case_id: str) -> list[dict[str, Any]]:
    return [entry for entry in index["entries"] if entry["case"] == case_id]


def not_built(case_id: str) -> str:
    """Why a case has no pipeline in the folder, and what builds one."""
    return (f"no Halide AOT pipeline for {case_id}: run scripts/halide_aot.py with a matrix that holds it "
            f"and carry {DEFAULT_AOT_DIR.parent.name}/{DEFAULT_AOT_DIR.name}")


def entry_for(index: dict[str, Any], case_id: str, schedule: str | None) -> dict[str, Any]:
    """The entry of (case, schedule); schedule None is the family's default. ValueError with the
    reason (the recorded reason on the case) when there is no compiled pipeline for it."""
    entries = case_entries(index, case_id)
    if not entries:
        raise ValueError(not_built(case_id))
    chosen = [e for e in entries if (e["schedule"] == schedule if schedule else e["default"])]
    if not chosen:
        raise ValueError(f"no Halide schedule {schedule!r} for {case_id}; compiled: {sorted(e['schedule'] for e in entries)}")
    entry = chosen[0]
    if "error" in entry:
        raise ValueError(f"Halide {index['halide_version']} could not compile {case_id} with schedule "
                         f"{entry['schedule']!r} for {index['target']}: {entry['error']}")
    return entry
