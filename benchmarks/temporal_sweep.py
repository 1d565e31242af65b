#!/usr/bin/env python
"""Which tile and chunk of the 3.5-D pipeline (`pipe`, forge/handwritten_temporal.py) to submit for
a diamond_tsT case, and how it stands against the composed bound before any round is spent.

One process, interleaved passes, L2 flushed (benchmarks/handwritten_sweep.py's `sweep_case`):
the straightforward kernel, `octa` (the admitted octahedron design), every `pipe` variant, and
the composed bound's stand-in, T launches of `rows16` on star_1 of the same shape (the kernel
admitted for star_1 at 256^3 and 512^3 f32), timed on its own buffers in the same passes. A
variant whose output differs from the straightforward kernel's is reported, not timed; the gate
does the real checks. Beside the tiles and chunks it times the changes aimed at pipe's on-chip
work (warp shuffles for the x neighbours, warps skipping the steps none of their rows needs, three
blocks an SM, two rows a thread; session 27), alone and together. It also sweeps star_1 and varcoef_star_1 (T = 1, the f16 rounds that lost to
the fair f16 kernel), there beside the straightforward (fair) kernel, with 2 and 4 planes
prefetched at the default tile (docs/forge.md: one plane ahead lacked bytes in flight).

`--family cluster --admitted EXPORT` times session 36's cluster pipeline (`cpipe`, forge/handwritten_cluster.py)
instead, beside the case's admitted kernel and the composed bounds the gate would time from that export (T launches
of the admitted star_1 kernel; for T = 8 also two of the admitted diamond_ts4 kernel); `--family cluster_pull`
its first design (edge rows loaded from the other block), `--family cluster_signal` session 37's (edge rows pushed
into the other block's ring on mbarriers, no cluster barrier an iteration); `--family pair` the pipe variants as is
and marching two iterations a body (session 37), beside the same admitted kernels and composed bounds.

On the device machine (docs/gpu.md):

    source scripts/device_env.sh && python3 benchmarks/temporal_sweep.py \\
        --cases diamond_ts8/512x512x512/f32,diamond_ts4/256x256x256/f32 --out $OUT/temporal_sweep_h200.json
    ... --cases star_1/512x512x512/f16,varcoef_star_1/512x512x512/f16 --out $OUT/pipe_f16_sweep_h200.json
"""
from __future__ import annotations

import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
for _path in (str(HERE), str(HERE.parent)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from handwritten_sweep import sweep_case, sweep_main  # noqa: E402
from forge.handwritten import render, render_temporal  # noqa: E402
from forge.handwritten_temporal import (REGISTER_FILE, check_parameters, default_parameters, registers_per_thread,  # noqa: E402
                                        render_pipe, shuffles_fit)
from forge.handwritten_cluster import check_cluster, render_cluster_pipe  # noqa: E402
from forge.handwritten_temporal_rows import render_pipe_rows  # noqa: E402
from measurement.harness.cases import parse_case  # noqa: E402

TILES = ((64, 32), (64, 24), (128, 24), (96, 32))  # 64x16 and 128x16 were the slowest in every sweep to session 27
ROW_TILES = ((64, 32), (128, 32), (96, 32), (128, 16))  # pipe_rows, 2 rows a thread, T <= 4 (registers)


def pipe_variants(case) -> list[tuple[str, dict, object]]:
    """For T = 1: 2 and 4 planes prefetched at the default tile. For T > 1, at the default tile
    and chunk: each of the changes aimed at the on-chip work (`shuffle`, `skip`, and for T <= 4
    `min_blocks`; forge/handwritten_temporal_source.py's `variant`) alone and together. Then tiles x
    chunks around the default, each as gated and with shuffles and skipped warps (skipped warps
    alone where a row is not a power of two lanes); up to T = 4, `pipe_rows` (two rows a thread,
    forge/handwritten_temporal_rows.py) at its tiles and the same chunks."""
    width, height, chunk = default_parameters(case)
    t = case.stencil.time_steps
    if t == 1:
        return [(f"pipe {width}x{height} L{chunk} P{p}", {"width": width, "height": height, "chunk": chunk, "prefetch": p},
                 render_pipe) for p in (2, 4)]
    base = {"width": width, "height": height, "chunk": chunk}
    changes = [("skip", {"skip": True})]
    if shuffles_fit(width // 4, height):
        changes += [("shuffle", {"shuffle": True}), ("shuffle+skip", {"shuffle": True, "skip": True})]
    if t <= 4 and 3 * (width // 4) * height <= 2048:
        changes.append(("shuffle+skip+3 blocks", {"shuffle": True, "skip": True, "min_blocks": 3}))
    made = [(f"pipe {width}x{height} L{chunk} {name}", {**base, **extra}, render_pipe) for name, extra in changes]
    for w, h in TILES:
        for c in sorted({chunk // 2, chunk, chunk * 2}):
            try:
                check_parameters(case, w, h, c)
            except ValueError:
                continue
            if w // 4 * h * registers_per_thread(t) > REGISTER_FILE:
                continue  # the block would spill (96x32 at T = 8: 80 registers a thread, 88 bytes spilled)
            made.append((f"pipe {w}x{h} L{c}", {"width": w, "height": h, "chunk": c}, render_pipe))
            if shuffles_fit(w // 4, h):
                made.append((f"pipe {w}x{h} L{c} shuffle+skip", {"width": w, "height": h, "chunk": c, "shuffle": True,
                                                                  "skip": True}, render_pipe))
            else:  # rows of 24 lanes: no shuffles within a row, but whole warps still skip
                made.append((f"pipe {w}x{h} L{c} skip", {"width": w, "height": h, "chunk": c, "skip": True}, render_pipe))
    if t <= 4:
        for w, h in ROW_TILES:
            for c in sorted({chunk // 2, chunk, chunk * 2}):
                made.append((f"pipe_rows {w}x{h} R2 L{c} skip", {"width": w, "height": h, "chunk": c, "rows": 2},
                             render_pipe_rows))
    return list({name: (name, params, render) for name, params, render in made}.values())  # the default tile recurs


def part_row(backend, part_id: str, name: str, kernel: tuple[str, dict], times: int) -> tuple:
    """A composed bound's row for `sweep_case`'s `extra`: `kernel` on `part_id` (a case with fewer steps),
    on its own buffers, its time counted `times` times."""
    from measurement.backends.base import Kernel, Variant
    from measurement.harness.oracle import make_inputs

    part = parse_case(part_id)
    prepared = backend.prepare(part, Variant(name, Kernel(*kernel), "candidate"))
    buffers = backend.allocate(part, make_inputs(part, 1))
    return name, prepared, buffers, backend.coefficients(part.coefficients()), times


def composed_row(backend, case) -> tuple:
    """rows16 on star_1 of the case's shape, its time counted T times."""
    single = f"star_1/{'x'.join(map(str, case.shape))}/{case.precision}"
    source, launch, _ = render(parse_case(single))
    t = case.stencil.time_steps
    return part_row(backend, single, f"composed(rows16 star_1 x{t})", (source, launch), t)


def cluster_variants(case, exchange: str = "push", pairs: tuple[bool, ...] = (False,),
                     planes: tuple[int, ...] = (64, 128, 256)) -> list[tuple[str, dict, object]]:
    """pipe as the campaigns offer it (64 x 32 with shuffles), then `cpipe` (forge/handwritten_cluster.py) in
    clusters of 2, 4 and 8 blocks at each of `planes` planes a cluster, the edge rows exchanged by `exchange`:
    pushed into the next block's halo rows (`--family cluster`, blocks of 64 x 16 and 64 x 32), pulled from the
    other block (`--family cluster_pull`, 64 x 16, 24 and 32: session 36's first sweep), or pushed into its ring on
    mbarriers under the block's own barrier (`--family cluster_signal`, also 128 x 16: 32 lanes a row, so an 8-block
    cluster repeats 1.31x the work its outputs need, where 64 wide never gets below 1.52x; each as is and with
    `pair`, at 128 and 256 planes)."""
    width, height, chunk = default_parameters(case)
    shuffle = shuffles_fit(width // 4, height)
    made = [(f"pipe {width}x{height} L{chunk}{' shuffle' if shuffle else ''}",
             {"width": width, "height": height, "chunk": chunk, "shuffle": shuffle}, render_pipe)]
    label = {"push": "cpipe push", "pull": "cpipe", "signal": "cpipe signal"}[exchange]
    tiles = {"push": [(64, 16), (64, 32)], "pull": [(64, 16), (64, 24), (64, 32)],
             "signal": [(64, 16), (64, 32), (128, 16)]}[exchange]
    for cols, rows in tiles:
        for cluster in (2, 4, 8):
            for chunk in planes:
                for pair in pairs:
                    params = {"width": cols, "height": rows, "cluster": cluster, "chunk": chunk, "exchange": exchange,
                              "pair": pair}
                    try:
                        check_cluster(case, cols, rows, cluster, chunk, exchange)
                    except ValueError:
                        continue
                    made.append((f"{label} {cols}x{rows} C{cluster} L{chunk}{' pair' if pair else ''}", params,
                                 render_cluster_pipe))
    return made


def pair_variants(case) -> list[tuple[str, dict, object]]:
    """`pipe_variants` for T > 1 but `pipe_rows` and the three-blocks change, each as is and with `pair` (the march two
    iterations a body, forge/handwritten_temporal_source.py `variant`)."""
    made = []
    for label, params, renderer in pipe_variants(case):
        if renderer is not render_pipe or params.get("min_blocks", 1) > 1:
            continue
        made += [(label, params, renderer), (f"{label} pair", {**params, "pair": True}, renderer)]
    return made


def sweep_bound(backend, case_id: str, passes: int, launches: int, admitted, made) -> tuple[dict, str]:
    """`made` beside the case's admitted kernel and the composed bounds the gate would time: T launches of the
    admitted star_1 kernel and, for T = 8, two of the admitted diamond_ts4 kernel."""
    case = parse_case(case_id)
    t, shape = case.stencil.time_steps, "x".join(map(str, case.shape))
    parts = [(f"star_1/{shape}/f32", t)] + ([(f"diamond_ts4/{shape}/f32", 2)] if t == 8 else [])
    # as the gate composes them: the admitted kernel of each part (from the export), on its own buffers
    extra = [part_row(backend, part, f"composed({part.split('/')[0]} admitted x{times})", admitted[part], times)
             for part, times in parts if part in admitted]
    own = admitted.get(case_id)
    made = made + ([("admitted", {}, lambda _c, **_: (own[0], own[1], ""))] if own else [])
    row = sweep_case(backend, case_id, passes, launches, made, extra)
    bound = min(statistics.median(row["variants"][name]["samples_ms"]) for name, *_ in extra) if extra else None
    for variant in row["variants"].values():
        variant["x_bound"] = round(bound / variant["median_ms"], 3) if bound else None
    best = row["variants"].get(row["best"], {})
    return row, (f"best {row['best']} {best.get('median_ms')} ms, {best.get('x_bound')}x the fastest composed bound, "
                 f"rejected {sorted(row['rejected'])}")


def sweep_cluster(backend, case_id: str, passes: int, launches: int, admitted=None) -> tuple[dict, str]:
    return sweep_bound(backend, case_id, passes, launches, admitted, cluster_variants(parse_case(case_id), "push"))


def sweep_cluster_pull(backend, case_id: str, passes: int, launches: int, admitted=None) -> tuple[dict, str]:
    return sweep_bound(backend, case_id, passes, launches, admitted, cluster_variants(parse_case(case_id), "pull"))


def sweep_cluster_signal(backend, case_id: str, passes: int, launches: int, admitted=None) -> tuple[dict, str]:
    return sweep_bound(backend, case_id, passes, launches, admitted,
                       cluster_variants(parse_case(case_id), "signal", (False, True), (128, 256)))


def sweep_pair(backend, case_id: str, passes: int, launches: int, admitted=None) -> tuple[dict, str]:
    return sweep_bound(backend, case_id, passes, launches, admitted, pair_variants(parse_case(case_id)))


for _family in (sweep_cluster, sweep_cluster_pull, sweep_cluster_signal, sweep_pair):
    _family.wants_every_admitted = True


def sweep_pipe(backend, case_id: str, passes: int, launches: int) -> tuple[dict, str]:
    case = parse_case(case_id)
    octa = [("octa", {}, lambda c, **_: render_temporal(c))] if case.stencil.time_steps > 1 else []
    extra = [composed_row(backend, case)]
    row = sweep_case(backend, case_id, passes, launches, octa + pipe_variants(case), extra)
    composed = statistics.median(row["variants"][extra[0][0]]["samples_ms"])
    for variant in row["variants"].values():
        variant["x_composed"] = round(composed / variant["median_ms"], 3)
    best = row["variants"].get(row["best"], {})
    return row, (f"best {row['best']} {best.get('median_ms')} ms, {best.get('x_composed')}x composed, "
                 f"rejected {sorted(row['rejected'])}")


def main() -> int:
    return sweep_main(__doc__.splitlines()[0], "comma-separated case ids: diamond_tsT f32, star_1 or varcoef_star_1 in "
                      "f16 or f32", sweep_pipe, {"cluster": sweep_cluster, "cluster_pull": sweep_cluster_pull,
                                                        "cluster_signal": sweep_cluster_signal, "pair": sweep_pair})


if __name__ == "__main__":
    raise SystemExit(main())
