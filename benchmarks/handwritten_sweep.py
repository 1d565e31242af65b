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
`--family burst` session 41's `burst` (a short chunk unrolled whole) beside every Halide schedule too;
`--family bounds` session 45's `min_blocks` (registers capped for more resident warps) on rows16's and short4's lean kernels;
`--family ahead` session 46's `ahead` (each step prefetches its row planes ahead into the L2) on every lean kernel;
`--family pipelined` session 47's `pipelined` (the next plane's vectors loaded a step ahead) on every lean kernel.
The variants of each family are built in benchmarks/sweep_variants.py.

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

from forge.handwritten import VECTOR_BYTES, default_chunk, render  # noqa: E402
from measurement.harness.cases import parse_case  # noqa: E402
from sweep_variants import (ahead_variants, bounds_variants, burst_variants, change_variants, lean_variants, narrow_variants,  # noqa: E402
                            pipelined_variants, rows_variants, stream_variants, tall_variants, unroll_variants, variants)

# Worse than this relative difference from the straightforward kernel: not timed (f16 is
# compared after both round to half, so it gets the half-precision spacing).
AGREEMENT = {"f16": 2e-3, "f32": 1e-5, "f64": 1e-12}


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


def sweep_changes(backend, case_id: str, passes: int, launches: int, made=change_variants, admitted=None) -> tuple[dict, str]:
    row = sweep_case(backend, case_id, passes, launches, with_admitted(made(parse_case(case_id)), admitted))
    return row, f"{_best_line(row)}, {row['variants'].get(row['best'], {}).get('x_straightforward')}x straightforward"


def main() -> int:
    return sweep_main(__doc__.splitlines()[0], "comma-separated case ids (T = 1 types)", sweep_rows16,
                      {"changes": sweep_changes,
                       "march": lambda *a, **k: sweep_changes(*a, made=lambda case: change_variants(case, march=True), **k),
                       "lean": lambda *a, **k: sweep_changes(*a, made=lean_variants, **k),
                       "stream": lambda *a, **k: sweep_changes(*a, made=stream_variants, **k),
                       "rows": lambda *a, **k: sweep_changes(*a, made=rows_variants, **k),
                       "tall": lambda *a, **k: sweep_changes(*a, made=tall_variants, **k),
                       "bounds": lambda *a, **k: sweep_changes(*a, made=bounds_variants, **k),
                       "ahead": lambda *a, **k: sweep_changes(*a, made=ahead_variants, **k), "bulk": sweep_bulk,
                       "pipelined": lambda *a, **k: sweep_changes(*a, made=pipelined_variants, **k),
                       "producer": sweep_producer, "unroll": sweep_beside_halide,
                       "narrow": lambda *a, **k: sweep_beside_halide(*a, made=narrow_variants, **k), "pull": sweep_pull,
                       "burst": lambda *a, **k: sweep_beside_halide(*a, made=burst_variants, **k)})


if __name__ == "__main__":
    raise SystemExit(main())
