#!/usr/bin/env python
"""Which launch parameter of the hand-written plane-queue kernel (forge/handwritten.py) limits a
case: block height, planes per thread, vectors per thread, each changed alone from rows16.

The gate admits one change per round at 10 s a case; this sweep times every one-parameter
variant of a case in one process (interleaved passes, L2 flushed before each launch, the
straightforward kernel beside them) in about as long, so the next round submits the change the
sweep points at and the refuted directions are on record (the JSON keeps every variant).
Correctness here is only the relative difference from the straightforward kernel's output on
the same inputs (a variant that differs is reported, not timed); the gate does the real checks.

`--family changes` times session 28's two changes instead (forge/handwritten.py `render`'s
`shuffle` and `l2_prefetch`), alone and together, on rows16 and on the 4-row blocks of short4
(and on rows8 where it is offered), beside those kernels unchanged; `--family march` its third
(`alternate`: odd chunks march down) the same way; `--family lean` session 30's `split` and
`stride` (fewer instructions a plane, benchmarks/sass_count.py) on each of those kernels, with and
without `alternate`, and `split` alone on rows16; `--family stream` session 32's `streaming` (evict-first
output stores) on each lean kernel; `--family rows` its `ry` (several rows a thread) on each lean kernel;
`--family tall` rows16's and rows8's lean kernels in 8-, 16- and 32-row blocks;
`--family bulk` forge/handwritten_planes.py's `planes` with and without `bulk`, and with its producer warp (star_R in f32 and f64);
`--family producer` the producer warp over buffers and planes a block;
`--family unroll` session 34's `unroll` (rows or planes a step of the march) beside every Halide schedule of the case;
`--family narrow` one double a lane (f64) the same way; `--family pull` the producer warp without the queue;
`--family burst` session 41's `burst` (a short chunk unrolled whole) beside every Halide schedule too.

On the device machine (docs/gpu.md):

    source scripts/device_env.sh && python3 benchmarks/handwritten_sweep.py \\
        --cases star_4/512x512x512/f32,box_1/512x512x512/f32 --out $OUT/handwritten_sweep_h200.json
"""
from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from forge.candidates import marching_down, rows8_fits  # noqa: E402
from forge.handwritten import VECTOR_BYTES, default_chunk, render  # noqa: E402
from measurement.harness.cases import parse_case  # noqa: E402

# Worse than this relative difference from the straightforward kernel: not timed (f16 is
# compared after both round to half, so it gets the half-precision spacing).
AGREEMENT = {"f16": 2e-3, "f32": 1e-5, "f64": 1e-12}


def variants(case) -> list[tuple[str, dict]]:
    """rows16 (8-row blocks, default chunk, one vector), then each parameter changed alone."""
    chunk = default_chunk(case, 1)
    base = {"nv": 1, "by": 8, "chunk": chunk}
    changes = [("rows16", {})]
    changes += [(f"by={by}", {"by": by}) for by in (4, 16, 32)]
    changes += [(f"chunk={c}", {"chunk": c}) for c in (chunk // 4, chunk // 2, chunk * 2) if c >= 1]
    changes += [("nv=2", {"nv": 2}), ("nv=2,by=4", {"nv": 2, "by": 4})]
    return [(label, {**base, **change}) for label, change in changes]


def change_variants(case, march: bool = False) -> list[tuple[str, dict]]:
    """rows16, short4 (and rows8 where the campaign offers it), each unchanged, with the x halo by
    shuffles, with L2::256B loads, and with both; with `march`, each unchanged and with odd chunks
    marching down (`alternate`)."""
    base = {"nv": 1, "chunk": default_chunk(case, 1)}
    kernels = [("rows16", {"by": 8}), ("short4", {"by": 4})]
    if rows8_fits(case):
        kernels.append(("rows8", {"by": 8, "vector_bytes": 8}))
    changes = ([("", {}), ("+alternate", {"alternate": True})] if march else
               [("", {}), ("+shuffle", {"shuffle": True}), ("+l2", {"l2_prefetch": True}),
                ("+shuffle+l2", {"shuffle": True, "l2_prefetch": True})])
    return [(name + label, {**base, **kernel, **change}) for name, kernel in kernels for label, change in changes]


def lean_variants(case) -> list[tuple[str, dict]]:
    """short4, rows16 (and rows8 where offered), each as gated, with `split` and `stride`, marching
    down, and marching down with both; and rows16 with `split` alone, to tell the two apart."""
    base = {"nv": 1, "chunk": default_chunk(case, 1)}
    kernels = [("rows16", {"by": 8}), ("short4", {"by": 4})]
    if rows8_fits(case):
        kernels.append(("rows8", {"by": 8, "vector_bytes": 8}))
    lean = {"split": True, "stride": True}
    changes = [("", {}), ("+lean", lean), ("+alternate", {"alternate": True}), ("+alternate+lean", {"alternate": True, **lean})]
    made = [(name + label, {**base, **kernel, **change}) for name, kernel in kernels for label, change in changes]
    return made + [("rows16+split", {**base, "by": 8, "split": True})]


def stream_variants(case) -> list[tuple[str, dict]]:
    """rows16 as gated (the column every row is divided by), each `lean` kernel marching up and down,
    and each of those with session 32's evict-first output stores (`streaming`)."""
    made = [(label, p) for label, p in lean_variants(case) if label == "rows16" or label.endswith("+lean")]
    return made + [(f"{label}+stream", {**p, "streaming": True}) for label, p in made if label != "rows16"]


def sweep_case(backend, case_id: str, passes: int, launches: int, candidates: list[tuple], extra=None,
               baselines: tuple = ()) -> dict:
    """`candidates`: (label, parameters, render) triples; `extra`: rows timed in the same passes on their own buffers, each
    (name, prepared, buffers, coef, multiplier) (a composed bound: a T = 1 kernel times T); `baselines`: library variants
    (measurement.backends.base.Variant, e.g. each Halide schedule) prepared on the same buffers and checked like the
    candidates, so a variant is compared with the case's public bound in the same passes."""
    import numpy as np

    from measurement.backends.base import Kernel, Variant
    from measurement.harness.oracle import make_inputs, relative_error

    case = parse_case(case_id)
    began = time.perf_counter()
    buffers = backend.allocate(case, make_inputs(case, 1))
    coef = backend.coefficients(case.coefficients())
    prepared = {"straightforward": backend.prepare(case, Variant("straightforward"))}
    parameters: dict = {"straightforward": None}
    reference = None
    rejected = {}
    libraries = [(variant.name, {"baseline": variant.name}, variant) for variant in baselines]
    for label, params, renderer in [("straightforward", None, None), *candidates, *libraries]:
        try:
            if isinstance(renderer, Variant):
                prepared[label] = backend.prepare(case, renderer)
            elif params is not None:
                source, launch, _ = renderer(case, **params)
                prepared[label] = backend.prepare(case, Variant(label, Kernel(source, launch), "candidate"))
            buffers.poison_output()
            prepared[label].run(buffers, coef)
            backend.synchronize()
            output = np.asarray(buffers.output(), dtype=np.float64)[case.region]
        except Exception as error:  # a compile error, a launch over the register file, a stray write
            if params is None:
                raise
            rejected[label] = {"parameters": params, "error": str(error)[:300]}
            prepared.pop(label, None)
            continue
        if reference is None:
            reference = output
            continue
        difference = relative_error(output, reference)
        if not difference <= AGREEMENT[case.precision]:
            rejected[label] = {"parameters": params, "error": f"differs from straightforward by {difference:.3g}"}
            prepared.pop(label)
            continue
        parameters[label] = params
    runs = {name: (prepared[name], buffers, coef, 1) for name in prepared}
    runs.update({row[0]: row[1:] for row in extra or []})
    names = list(runs)
    samples = {name: [] for name in names}
    copy = []
    for index in range(passes):
        copy.append(backend.copy_bandwidth(case.points * case.dtype.itemsize))
        shift = index % len(names)
        for name in names[shift:] + names[:shift]:
            kernel, on, with_coef, times = runs[name]
            samples[name] += [s * times for s in backend.time_launches(kernel, on, with_coef, launches, True)]
    copy_bandwidth = max(copy)
    medians = {name: statistics.median(values) for name, values in samples.items()}
    rows = {
        name: {
            "parameters": parameters.get(name),
            "median_ms": round(medians[name] * 1e3, 5),
            "percent_of_copy": round(100 * case.compulsory_bytes / medians[name] / copy_bandwidth, 1),
            "x_straightforward": round(medians["straightforward"] / medians[name], 3),
            "x_rows16": round(medians["rows16"] / medians[name], 3) if "rows16" in medians else None,
            "samples_ms": [round(s * 1e3, 5) for s in samples[name]],
        }
        for name in names
    }
    library_names = {name for name, _, _ in libraries}
    best = min((n for n in prepared if n != "straightforward" and n not in library_names), key=medians.get, default=None)
    return {"case": case_id, "copy_bandwidth_bytes_per_s": copy_bandwidth, "vector_bytes": VECTOR_BYTES,
            "variants": rows, "rejected": rejected, "best": best, "seconds": round(time.perf_counter() - began, 1)}


def sweep_main(description: str, cases_help: str, sweep_one, families: dict | None = None) -> int:
    """The command line both sweeps share: `sweep_one(backend, case_id, passes, launches)` gives
    a case's row and its one-line summary (`families`: other such functions by `--family` name);
    the JSON is rewritten after every case."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--cases", required=True, help=cases_help)
    if families:
        parser.add_argument("--family", choices=["parameters", *families], default="parameters",
                            help="which variants: the one-parameter changes (default) or another family")
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--launches", type=int, default=10)
    parser.add_argument("--out", required=True)
    if families:
        parser.add_argument("--admitted", metavar="EXPORT",
                            help="also time each case's latest admitted kernel in this ledger export, as gated")
    options = parser.parse_args()
    sweep_one = (families or {}).get(getattr(options, "family", None), sweep_one)
    admitted = admitted_kernels(options.admitted) if getattr(options, "admitted", None) else None
    from measurement.backends import get_backend

    backend = get_backend("cuda")
    result = {"command": " ".join(sys.argv), "backend": backend.describe(), "passes": options.passes,
              "launches": options.launches, "cases": []}
    for case_id in options.cases.split(","):
        mine = admitted if getattr(sweep_one, "wants_every_admitted", False) else (admitted or {}).get(case_id)
        row, line = sweep_one(backend, case_id, options.passes, options.launches,
                              **({"admitted": mine} if admitted is not None else {}))
        result["cases"].append(row)
        print(f"{case_id}: {line} [{row['seconds']} s]", file=sys.stderr, flush=True)
        Path(options.out).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 0


def admitted_kernels(export: str) -> dict[str, tuple[str, dict]]:
    """Each case's latest admitted kernel in a ledger export, (source, launch) as its GateVerdict
    recorded them: the kernel a sweep's variants must beat, byte for byte and launch for launch."""
    kernels = {}
    with open(export, encoding="utf-8") as lines:
        for line in lines:
            event = json.loads(line)
            payload = event["payload"]
            if event["type"] == "GateVerdict" and payload.get("verdict") == "admitted" and payload.get("backend") == "cuda":
                kernels[payload["case"]] = (payload["candidate_source"], payload["candidate_launch"])
    return kernels


def with_admitted(made: list[tuple[str, dict]], admitted: tuple[str, dict] | None) -> list[tuple]:
    """The (label, parameters, render) triples of `made`, then the admitted kernel as gated."""
    triples = [(label, p, render) for label, p in made]
    if admitted:
        source, launch = admitted
        digest = hashlib.sha256(source.encode()).hexdigest()[:12]
        triples.append(("admitted", {"source_sha256": digest, "launch": launch}, lambda _case, **_: (source, launch, "")))
    return triples


def _best_line(row: dict) -> str:
    best = row["variants"].get(row["best"], {})
    return f"best {row['best']} {best.get('percent_of_copy')}% of copy, {best.get('x_rows16')}x rows16"


def sweep_rows16(backend, case_id: str, passes: int, launches: int, admitted=None) -> tuple[dict, str]:
    row = sweep_case(backend, case_id, passes, launches, with_admitted(variants(parse_case(case_id)), admitted))
    return row, _best_line(row)


def _lean_family(case, kernels: list[tuple[str, dict]], parameter: str, values: tuple[int, ...]) -> list[tuple[str, dict]]:
    """rows16 as gated, then each of `kernels` with `split` and `stride` (marching down too where
    forge/candidates.py `marching_down` offers it) at each of `values` of `parameter`, labelled
    `+PARAMETERVALUE` where it is not the first value (the kernel's own)."""
    chunk = default_chunk(case, 1)
    base = {"nv": 1, "chunk": chunk, "split": True, "stride": True}
    marches = [("", {})] + ([("+alternate", {"alternate": True})] if marching_down(case, chunk) else [])
    made = [("rows16", {"nv": 1, "chunk": chunk, "by": 8})]
    for (name, kernel), (march, down) in [(k, m) for m in marches for k in kernels]:
        for value in values:
            label = f"{name}{march}+lean{f'+{parameter}{value}' if value != values[0] else ''}"
            made.append((label, {**base, **kernel, **down, parameter: value}))
    return made


def rows_variants(case) -> list[tuple[str, dict]]:
    """Each `lean` kernel with 1, 2 and 4 rows a thread (session 32's `ry`)."""
    kernels = [("rows16", {"by": 8}), ("short4", {"by": 4})]
    return _lean_family(case, kernels + ([("rows8", {"by": 8, "vector_bytes": 8})] if rows8_fits(case) else []), "ry", (1, 2, 4))


def tall_variants(case) -> list[tuple[str, dict]]:
    """rows16's and rows8's lean kernels in blocks of 8, 16 and 32 rows: a taller block reads fewer halo
    rows from the L2 for its rows (session 32's ncu: star_2/512^3 f32 reads 1.86x its input from the L2),
    at one row a thread, so without the registers that several rows a thread cost."""
    return _lean_family(case, [("rows16", {})] + ([("rows8", {"vector_bytes": 8})] if rows8_fits(case) else []), "by", (8, 16, 32))


def _sweep_planes(backend, case_id: str, passes: int, launches: int, admitted, made: list[tuple[str, dict]]) -> tuple[dict, str]:
    """rows16 and `planes` as gated, then `made` ((label, forge/handwritten_planes.py `render` parameters)), then the
    case's admitted kernel."""
    from forge.handwritten_planes import render as render_planes

    case = parse_case(case_id)
    kernels = [("rows16", {"nv": 1, "chunk": default_chunk(case, 1), "by": 8}, render), ("planes", {}, render_planes)]
    kernels += [(label, parameters, render_planes) for label, parameters in made]
    row = sweep_case(backend, case_id, passes, launches, kernels + with_admitted([], admitted))
    return row, _best_line(row)


def sweep_bulk(backend, case_id: str, passes: int, launches: int, admitted=None) -> tuple[dict, str]:
    """`planes` with session 32's `bulk` (the ring filled by the copy engine on mbarriers, forge/handwritten_planes.py)
    at 3, 4 and 6 buffers, and with session 33's producer warp (15 computing warps and the producer: 512 threads,
    as planes' 16)."""
    made = [(f"bulk+nb{stages}", {"bulk": True, "stages": stages}) for stages in (3, 4, 6)]
    made += [(f"bulk+producer+nb{stages}", {"bulk": True, "producer": True, "height": 15, "stages": stages})
             for stages in (3, 4, 6)]
    return _sweep_planes(backend, case_id, passes, launches, admitted, made)


def sweep_producer(backend, case_id: str, passes: int, launches: int, admitted=None) -> tuple[dict, str]:
    """Session 33's producer warp at 3 and 4 buffers over 16 to 128 planes a block, and with one block an SM
    less (32 and 64 planes) so that nvcc need not spill: its first sweep took the chunk `default_chunk` gives
    15-row tiles (16 planes at star_1/512^3, where `planes`' 16-row tiles get 128)."""
    from forge.handwritten_planes import resident_blocks

    case = parse_case(case_id)
    producer = {"bulk": True, "producer": True, "height": 15}
    made = [(f"producer+nb{stages}+l{chunk}", {**producer, "stages": stages, "chunk": chunk})
            for stages in (3, 4) for chunk in (16, 32, 64, 128) if chunk < case.shape[0]]
    fewer = resident_blocks(case) - 1  # one block less an SM: the registers nvcc spilled under the bound (f32 star_2, star_4)
    made += [(f"producer+nb{stages}+l{chunk}+b{fewer}", {**producer, "stages": stages, "chunk": chunk, "resident": fewer})
             for stages in (3, 4) for chunk in (32, 64) if chunk < case.shape[0]]
    return _sweep_planes(backend, case_id, passes, launches, admitted, made)


def sweep_pull(backend, case_id: str, passes: int, launches: int, admitted=None) -> tuple[dict, str]:
    """Session 34's `pull` (each output summed whole from 2R + 1 planes of the ring, no queue: 40 registers for
    star_2 f32 under the launch bound where the producer warp spilled) at 2R + 2 and 2R + 3 buffers over 16 to 64
    planes a block, beside the producer warp as gated for star_2 f64 (3 buffers)."""
    case = parse_case(case_id)
    producer = {"bulk": True, "producer": True, "height": 15}
    made = [("producer+nb3", {**producer, "stages": 3})]
    least = 2 * case.stencil.radius + 2
    made += [(f"pull+nb{stages}+l{chunk}", {**producer, "pull": True, "stages": stages, "chunk": chunk})
             for stages in (least, least + 1) if stages <= 8 for chunk in (16, 32, 64) if chunk < case.shape[0]]
    return _sweep_planes(backend, case_id, passes, launches, admitted, made)


def unroll_variants(case) -> list[tuple[str, dict]]:
    """rows16 as gated, then each kernel marching up and down with its march unrolled 1, 2, 4 and 8 rows (planes) a
    step (session 34's `unroll`); in 2D at the default chunk and twice it (rows16, short4 and rows8 where offered), in
    3D the `lean` kernels at the default chunk (`marching_down` where offered)."""
    kernels = [("rows16", {"by": 8}), ("short4", {"by": 4})] + ([("rows8", {"by": 8, "vector_bytes": 8})] if rows8_fits(case) else [])
    if case.stencil.dims == 3:
        return _lean_family(case, kernels, "unroll", (2, 4, 8))
    chunk = default_chunk(case, 1)
    made = [("rows16", {"nv": 1, "chunk": chunk, "by": 8})]
    for name, kernel in kernels:
        for march, down in (("", {}), ("+alternate", {"alternate": True})):
            for length in (chunk, 2 * chunk):
                for unroll in (1, 2, 4, 8):
                    made.append((f"{name}{march}+u{unroll}+l{length}", {"nv": 1, "chunk": length, **kernel, **down, "unroll": unroll}))
    return made


def narrow_variants(case) -> list[tuple[str, dict]]:
    """rows16 as gated, short4 marching up and down, then one double a lane (8-byte "vectors" in f64, session 34: tuned
    Halide's shape, whose star2d_1 f64 kernel runs one point a thread down 64 rows) in 2-, 4- and 8-row blocks at the
    default chunk and twice it, marching up and down, each as is and lean (`split` and `stride`)."""
    chunk = default_chunk(case, 1)
    made = [("rows16", {"nv": 1, "chunk": chunk, "by": 8}), ("short4", {"nv": 1, "chunk": chunk, "by": 4}),
            ("short4+alternate", {"nv": 1, "chunk": chunk, "by": 4, "alternate": True})]
    for by in (2, 4, 8):
        for length in (chunk, 2 * chunk):
            for march, down in (("", {}), ("+alternate", {"alternate": True})):
                for lean, changes in (("", {}), ("+lean", {"split": True, "stride": True})):
                    made.append((f"one{by}{march}{lean}+l{length}",
                                 {"nv": 1, "chunk": length, "by": by, "vector_bytes": 8, **down, **changes}))
    return made


def burst_variants(case) -> list[tuple[str, dict]]:
    """rows16, short4 marching down, then `burst` (session 41) in 4, 8 and 16 rows, 1-, 2-, 4- and (session 45) 8-row blocks,
    8- and 16-byte vectors."""
    chunk = default_chunk(case, 1)
    made = [("rows16", {"nv": 1, "chunk": chunk, "by": 8}), ("short4+alternate", {"nv": 1, "chunk": chunk, "by": 4, "alternate": True})]
    return made + [(f"burst{vb}+by{by}+l{rows}", {"nv": 1, "chunk": rows, "by": by, "vector_bytes": vb, "split": True, "burst": True})
                   for vb in (8, 16) for by in (1, 2, 4, 8) for rows in (4, 8, 16)]


def sweep_beside_halide(backend, case_id: str, passes: int, launches: int, admitted=None, made=unroll_variants) -> tuple[dict, str]:
    """`made`'s variants (`unroll_variants`, or `narrow_variants` for `--family narrow`) beside the admitted kernel and
    every Halide schedule the carried AOT folder has for the case (the public bound: a retracted case such as star2d_1
    f64 has no admitted kernel to beat, only Halide)."""
    from measurement.backends.base import scheduled
    from measurement.backends.halide_cuda import schedule_family, unavailable

    case = parse_case(case_id)
    halide = [] if unavailable(case_id) else [scheduled("halide", name) for name in schedule_family(case)[1]]
    row = sweep_case(backend, case_id, passes, launches, with_admitted(made(case), admitted), baselines=tuple(halide))
    fastest = min((name for name in row["variants"] if name.startswith("halide[")), key=lambda n: row["variants"][n]["median_ms"],
                  default=None)
    versus = (f", {round(row['variants'][fastest]['median_ms'] / row['variants'][row['best']]['median_ms'], 3)}x {fastest}"
              if fastest and row["best"] else "")
    return row, _best_line(row) + versus


def sweep_changes(backend, case_id: str, passes: int, launches: int, march: bool = False, lean: bool = False,
                  stream: bool = False, rows: bool = False, tall: bool = False, admitted=None) -> tuple[dict, str]:
    case = parse_case(case_id)
    made = (tall_variants(case) if tall else rows_variants(case) if rows else stream_variants(case) if stream
            else lean_variants(case) if lean else change_variants(case, march))
    row = sweep_case(backend, case_id, passes, launches, with_admitted(made, admitted))
    return row, f"{_best_line(row)}, {row['variants'].get(row['best'], {}).get('x_straightforward')}x straightforward"


def main() -> int:
    return sweep_main(__doc__.splitlines()[0], "comma-separated case ids (T = 1 types)", sweep_rows16,
                      {"changes": sweep_changes, "march": lambda *a, **k: sweep_changes(*a, march=True, **k),
                       "lean": lambda *a, **k: sweep_changes(*a, lean=True, **k),
                       "stream": lambda *a, **k: sweep_changes(*a, stream=True, **k),
                       "rows": lambda *a, **k: sweep_changes(*a, rows=True, **k),
                       "tall": lambda *a, **k: sweep_changes(*a, tall=True, **k), "bulk": sweep_bulk,
                       "producer": sweep_producer, "unroll": sweep_beside_halide,
                       "narrow": lambda *a, **k: sweep_beside_halide(*a, made=narrow_variants, **k), "pull": sweep_pull,
                       "burst": lambda *a, **k: sweep_beside_halide(*a, made=burst_variants, **k)})


if __name__ == "__main__":
    raise SystemExit(main())
