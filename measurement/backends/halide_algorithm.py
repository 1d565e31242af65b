"""Halide (pip `halide`, 21.0) as a public baseline: the algorithm of every case and a small
family of schedules per target. Shared by the CPU baseline (halide_cpu, JIT) and the CUDA one
(AOT for the H200); neither Django nor cupy is imported here.

API (what the backends use):

    schedules(case, target) -> dict[str, str]      # name -> schedule text, family order; target "cpu" | "cuda"
    default_schedule(case, target) -> str          # the name used before any tuning run ("untuned")
    build(case, target, schedule=None) -> Built    # algorithm + the named schedule applied
    halide_target(target) -> hl.Target             # the Halide target the family is written for
    VERSION                                        # the installed Halide's version, for identities

`Built` holds `pipeline` (hl.Pipeline of the output Func), `params` ({"u", "a" (varcoef only),
"coef"} ImageParams: u and a of the case's element type with x as dimension 0, coef float64
1-D with one coefficient per symmetry class, Case.stencil.classes), `funcs` (one per time step;
the last is the output), `schedule` (its name) and `schedule_text` (what was applied: the
family's text, and for an autoscheduler entry also the schedule source it generated).

The algorithm, over Halide coordinates (x, y[, z]) = numpy's (..., z, y, x) reversed:
    step_k(p) = Σ_o acc(coef[class(o)]) · step_{k-1}(p + o),  step_0 = acc(u);  y = store(a · step_T)
with acc = float32 for f16 and f32 and float64 for f64, and the output stored in the case's
element type: the same numerical model as the harness's straightforward kernels (f16 is half
storage with float accumulation; scratch steps in the accumulation type, so the only rounding
to f16 is the final store). The output is realized over the case's written region only (the
caller crops the output buffer to it, with its mins at the halo): nothing else of y is written,
and every read of u stays inside the grid (step k is needed within radius · (T - k) of the
region; Halide's bounds inference derives it and refuses an out-of-range read at run time).

A schedule's text is Python statements run with `hl`, `out` (the output Func), `steps` (all
Funcs, steps[-1] is out), the Vars `x`, `y` (and `z` in 3D) and `G` (TailStrategy.GuardWithIf)
in scope. Every split guards its tail, so any extent (the checks use odd ones down to 3) is
computed exactly and nothing outside the region is written. An autoscheduler entry's text is
`autoschedule <Name> <key>=<value> ...` instead. The text is part of the baseline's identity.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

import halide as hl

from measurement.harness.cases import Case

VERSION = version("halide")
TARGETS = ("cpu", "cuda")
# The H200 is compute capability 9.0; Halide 21's highest capability feature is 8.6, whose
# PTX the driver JIT-compiles for 9.0.
# The host side of CUDA code is plain x86-64 (no host-specific vector features): it is compiled
# on one machine and loaded on the GPU machine.
CUDA_TARGET = "x86-64-linux-cuda-cuda_capability_86"
GPU_AUTOSCHEDULER = ("Anderson2021", "libautoschedule_anderson2021.so")  # a plugin library of the wheel
# Anderson2021's search is randomised beam search; a fixed seed keeps its output (and so the
# baseline's identity) the same on every build.
GPU_AUTOSCHEDULER_PARAMS = {"parallelism": "132", "beam_size": "1", "random_dropout_seed": "0"}
AUTOSCHEDULE = "autoschedule "
UNIQUIFIED = re.compile(r"\b(out|u_acc|step\d+)_\d+\b")


@dataclass
class Built:
    pipeline: hl.Pipeline
    params: dict[str, hl.ImageParam]
    funcs: list[hl.Func]
    schedule: str
    schedule_text: str

    @property
    def output(self) -> hl.Func:
        return self.funcs[-1]


def halide_target(target: str) -> hl.Target:
    if target == "cpu":
        return hl.get_host_target()
    if target == "cuda":
        return hl.Target(CUDA_TARGET)
    raise ValueError(f"unknown Halide target {target!r}; use one of {TARGETS}")


def _types(case: Case) -> tuple[hl.Type, hl.Type]:
    """(element type, accumulation type) of the case: the straightforward kernels' pair."""
    bits = {"f16": 16, "f32": 32, "f64": 64}[case.precision]
    return hl.Float(bits), hl.Float(64 if bits == 64 else 32)


def algorithm(case: Case) -> tuple[dict[str, hl.ImageParam], list[hl.Func], list[hl.Var]]:
    """The unscheduled pipeline of `case`: its params, one Func per time step, its Vars (x first)."""
    s = case.stencil
    element, acc = _types(case)
    variables = [hl.Var(name) for name in ("x", "y", "z")[: s.dims]]
    params = {"u": hl.ImageParam(element, s.dims, "u")}
    if s.variable_coefficient:
        params["a"] = hl.ImageParam(element, s.dims, "a")
    params["coef"] = hl.ImageParam(hl.Float(64), 1, "coef")
    c = [hl.cast(acc, params["coef"][k]) for k in range(len(s.classes))]
    source = hl.Func("u_acc")
    source[variables] = hl.cast(acc, params["u"][variables])
    funcs: list[hl.Func] = []
    for step in range(1, s.time_steps + 1):
        terms = []
        for offset, k in zip(s.offsets, s.class_index):
            # Case offsets are numpy-ordered (z, y, x); Halide's dimension 0 is x.
            shifted = [v + o for v, o in zip(variables, reversed(offset))]
            terms.append(c[k] * source[shifted])
        total = terms[0]
        for term in terms[1:]:
            total = total + term
        if step == s.time_steps:
            if s.variable_coefficient:
                total = total * hl.cast(acc, params["a"][variables])
            source = hl.Func("out")
            total = hl.cast(element, total)
        else:
            source = hl.Func(f"step{step}")
        source[variables] = total
        funcs.append(source)
    return params, funcs, variables


def _lanes(case: Case) -> int:
    """The host's natural vector width for the accumulation type (16 f32 lanes with AVX-512)."""
    return halide_target("cpu").natural_vector_size(_types(case)[1])


def _cpu_family(case: Case) -> dict[str, str]:
    s, v = case.stencil, _lanes(case)
    outer = "z" if s.dims == 3 else "y"
    if s.time_steps > 1:
        root = (f"for f in steps[:-1]:\n    f.compute_root().vectorize(x, {v}, G).parallel(z)\n"
                f"out.vectorize(x, {v}, G).parallel(z)")
        fused = ("zo, zi = hl.Var('zo'), hl.Var('zi')\n"
                 f"out.split(z, zo, zi, {{slab}}, G).vectorize(x, {v}, G).parallel(zo)\n"
                 f"for f in steps[:-1]:\n    f.compute_at(out, zo).vectorize(x, {v}, G)")
        return {"root_steps": root, "fused_z4": fused.format(slab=4), "fused_z16": fused.format(slab=16)}
    rows = "fuse(y, z, rows)" if s.dims == 3 else "split(y, rows, y, 8, G)"
    tiles = "z" if s.dims == 3 else "yo"
    family = {
        f"vec_par_{outer}": f"out.vectorize(x, {v}, G).parallel({outer})",
        "vec_par_rows": f"rows = hl.Var('rows')\nout.vectorize(x, {v}, G).{rows}.parallel(rows)",
        "tiled": ("xo, yo, xi, yi = hl.Var('xo'), hl.Var('yo'), hl.Var('xi'), hl.Var('yi')\n"
                  f"out.tile(x, y, xo, yo, xi, yi, {4 * v}, 8, G).vectorize(xi, {v}, G).parallel({tiles})"),
    }
    if s.dims == 3:
        family["vec_unroll_y2"] = f"out.vectorize(x, {v}, G).unroll(y, 2, G).parallel(z)"
    return family


def _gpu_tile(func: str, dims: int, tile: tuple[int, ...]) -> str:
    if dims == 2 or len(tile) == 2:
        return f"{func}.gpu_tile(x, y, xo, yo, xi, yi, {tile[0]}, {tile[1]}, G)"
    return f"{func}.gpu_tile(x, y, z, xo, yo, zo, xi, yi, zi, {tile[0]}, {tile[1]}, {tile[2]}, G)"


VARS = "xo, yo, zo, xi, yi, zi = (hl.Var(n) for n in ('xo', 'yo', 'zo', 'xi', 'yi', 'zi'))\n"


def _z_march(func: str, bx: int, by: int, slab: int, unroll: bool) -> str:
    """Each thread marches `slab` planes in z (serial, innermost), blocks over x, y and z slabs."""
    text = (f"{func}.split(z, zo, zi, {slab}, G).gpu_tile(x, y, xo, yo, xi, yi, {bx}, {by}, G)"
            f".reorder(zi, xi, yi, xo, yo, zo).gpu_blocks(zo)")
    return text + (".unroll(zi)" if unroll else "")


def _cuda_family(case: Case) -> dict[str, str]:
    name, _ = GPU_AUTOSCHEDULER
    settings = "".join(f" {k}={v}" for k, v in GPU_AUTOSCHEDULER_PARAMS.items())
    auto = {f"auto_{name.lower()}": AUTOSCHEDULE + name + settings}
    return {**_cuda_hand_written(case), **auto}


def _cuda_hand_written(case: Case) -> dict[str, str]:
    s = case.stencil
    if s.dims == 2:
        return {f"gpu_{bx}x{by}": VARS + _gpu_tile("out", 2, (bx, by))
                for bx, by in ((32, 8), (64, 4), (128, 2), (32, 16))}
    if s.time_steps > 1:
        # Step-by-step (one kernel per step) or fused: each block marches z with every earlier
        # step computed plane by plane into shared memory (store_at the block, compute_at the
        # march: Halide's sliding window keeps only the planes still needed).
        fused = (VARS + "out.split(z, zo, zi, {slab}, G).gpu_tile(x, y, xo, yo, xi, yi, 32, 8, G)"
                 ".reorder(xi, yi, zi, xo, yo, zo).gpu_blocks(zo)\n"
                 "for f in steps[:-1]:\n    f.store_at(out, xo).compute_at(out, zi).gpu_threads(x, y)")
        return {
            "gpu_steps_32x8x1": VARS + "for f in steps:\n    " + _gpu_tile("f.compute_root()", 3, (32, 8, 1)),
            "gpu_steps_zmarch8": VARS + "for f in steps:\n    " + _z_march("f.compute_root()", 32, 8, 8, False),
            "gpu_sliding_z16": fused.format(slab=16),
            "gpu_sliding_z64": fused.format(slab=64),
        }
    family = {f"gpu_{bx}x{by}x{bz}": VARS + _gpu_tile("out", 3, (bx, by, bz))
              for bx, by, bz in ((32, 8, 1), (64, 4, 1), (32, 4, 2))}
    family["gpu_32x8_zmarch8"] = VARS + _z_march("out", 32, 8, 8, False)
    family["gpu_32x8_zmarch8_unrolled"] = VARS + _z_march("out", 32, 8, 8, True)
    family["gpu_32x4_zmarch16"] = VARS + _z_march("out", 32, 4, 16, False)
    return family


def schedules(case: Case, target: str) -> dict[str, str]:
    """The schedule family of `case` on `target`: name -> text, in order (the first is the default)."""
    if target == "cpu":
        return _cpu_family(case)
    if target == "cuda":
        return _cuda_family(case)
    raise ValueError(f"unknown Halide target {target!r}; use one of {TARGETS}")


def default_schedule(case: Case, target: str) -> str:
    return next(iter(schedules(case, target)))


def _autoschedule(pipeline: hl.Pipeline, case: Case, target: str, params: dict[str, hl.ImageParam], text: str) -> str:
    """Run the autoscheduler named by `text` with the case's shape as estimates; its schedule source."""
    name, *settings = text[len(AUTOSCHEDULE):].split()
    plugin = dict((GPU_AUTOSCHEDULER,))[name]
    hl.load_plugin(str(Path(hl.__file__).parent / "lib64" / plugin))
    extents = list(reversed(case.shape))
    h = case.stencil.halo
    for key, param in params.items():
        param.set_estimates([(0, len(case.stencil.classes))] if key == "coef" else [(0, n) for n in extents])
    pipeline.outputs()[0].set_estimates([(h, n - 2 * h) for n in extents])
    chosen = hl.AutoschedulerParams(name, dict(s.split("=", 1) for s in settings))
    results = pipeline.apply_autoscheduler(halide_target(target), chosen)
    # Halide makes Func names unique per process ("out_1" for the second "out" built): the
    # recorded text uses the algorithm's own names, so one schedule has one text.
    return UNIQUIFIED.sub(r"\1", results.schedule_source)


def build(case: Case, target: str, schedule: str | None = None) -> Built:
    """The case's pipeline with schedule `schedule` of the family (None: the default) applied.

    KeyError naming the family for a schedule it does not have."""
    family = schedules(case, target)
    name = schedule or default_schedule(case, target)
    if name not in family:
        raise KeyError(f"no Halide schedule {name!r} for {case.id} on {target}; the family: {sorted(family)}")
    text = family[name]
    params, funcs, variables = algorithm(case)
    pipeline = hl.Pipeline(funcs[-1])
    if text.startswith(AUTOSCHEDULE):
        applied = text + "\n" + _autoschedule(pipeline, case, target, params, text)
    else:
        scope = {"hl": hl, "out": funcs[-1], "steps": funcs, "G": hl.TailStrategy.GuardWithIf}
        scope.update(zip("xyz", variables))
        exec(compile(text, f"<halide schedule {name}>", "exec"), scope)  # the family's own text, never input
        applied = text
    return Built(pipeline, params, funcs, name, applied)
