#!/usr/bin/env python
"""How fast a plain copy runs when it walks memory as the plane-queue kernels do: the ceiling of their access pattern.

Session 44's Nsight Compute put star_1/512^3 f16's admitted kernel at 73% of DRAM's peak against the copy's 86% while
it read only 1.06-1.07x the copy's bytes, and two ideas that add loads in flight (a register cap, session 45; an L2
prefetch planes ahead, session 46) made it slower. Its lean kernels and the straightforward one all end within 3% of
each other on the H100 (docs/benchmarks/handwritten_ahead_h100_s46.json). So this times copies (u to y, no stencil) in
the same ABI and passes as the case's kernels:

* `flat`: the harness's 16-byte grid-stride copy, as a kernel timed like the candidates (median of L2-flushed
  launches, where the copy ceiling each row is divided by is the fastest launch of it or cudaMemcpy);
* `march BXxBY lL`: each thread copies its 16 bytes of a row plane after plane along z (2D: row after row along y),
  L planes a block, blocks of BX x BY threads: rows16's walk (32 x 8, its default chunk) and its neighbours;
* `rows3 ...` and `rows3+halo ...` (3D): the same walk storing the row XORed with the rows above and below, and with
  the neighbouring 16 bytes left and right too: star_1's in-plane reads without its arithmetic or its queue;
* `chunk hH[+alternate] ...` (3D): rows16's walk reading each chunk's H planes beyond either end too, as the kernels'
  z arms do (h0 the same loop without them), odd chunks marching down with `+alternate`: what the chunks' halo planes
  cost (session 44's Nsight Compute: star_1/512^3 f16's admitted kernel read 1.07x the copy's DRAM bytes);
* `... N blocks an SM` (3D): rows16's walk, plain and with star_1's in-plane reads, with unused shared memory reserved
  so that only N blocks of 8 warps fit an SM: the copy at the kernels' occupancy (rows16 f16: 4, 50%).

If the marching copies reach the flat copy, the walk is not what holds the kernels back; if they stop where the
kernels do, a faster kernel needs another walk, and the fastest marching copy says which. The first H100 run
(docs/benchmarks/pattern_copies_h100_s46.json) put every marching copy at 91-97% of the copy ceiling, the kernels at
80-88%, so `rows3+halo` and the chunk walks were added; with them (pattern_chunks_h100_s46.json) star_1's reads alone
come to about 89-94% of copy and its admitted kernels run 2.5-9.2 points below that (docs/gpu.md, session 46).
Stencil kernels beside the copies: rows16 as first gated and the case's admitted kernel (`--admitted`).

    source scripts/device_env.sh && python3 benchmarks/pattern_copies.py --cases star_1/512x512x512/f16 \\
        --admitted /tmp/prev.jsonl --out $OUT/pattern_copies.json
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from forge.handwritten import VECTOR_BYTES, default_chunk  # noqa: E402
from handwritten_sweep import sweep_case, sweep_main, with_admitted  # noqa: E402
from measurement.harness.cases import Case, parse_case  # noqa: E402
from measurement.harness.codegen import cuda_type  # noqa: E402

HEADER = {"f16": ["#include <cuda_fp16.h>"], "f32": [], "f64": []}
# (blocks an SM, KiB of unused dynamic shared memory a block that leaves no room for more on an H100 or H200: 228 KiB
# an SM, 1 KiB reserved a block): 4 blocks of 8 warps, rows16's theoretical 50% on star_1 f16 (52 registers), and 3 (37.5%)
OCCUPANCY = ((4, 48), (3, 64))
FLAT_BLOCKS = 132 * 8  # eight 256-thread blocks an H100 or H200 SM
SIGNATURE = ('extern "C" __global__ void stencil(const elem_t* __restrict__ u, const elem_t* __restrict__ a, '
             'elem_t* __restrict__ y, const double* __restrict__ coef, int nz, int ny, int nx)')


def _kernel(case: Case, body: list[str]) -> str:
    """A copy kernel in the candidates' ABI: `body` between the signature's braces."""
    return "\n".join([*HEADER[case.precision], f"typedef {cuda_type(case.precision)} elem_t;", SIGNATURE, "{", *body,
                      "}", ""])


def flat_copy(case: Case) -> tuple[str, dict]:
    """The 16-byte grid-stride copy of the whole array (the harness's copy kernel, in the candidates' ABI): about
    FLAT_BLOCKS blocks of 256 threads or more, their grid laid over the case's rows."""
    source = _kernel(case, [
        f"    const long count = (long)nz * ny * nx * sizeof(elem_t) / {VECTOR_BYTES};",
        "    const long block = blockIdx.x + (long)gridDim.x * (blockIdx.y + (long)gridDim.y * blockIdx.z);",
        "    const long threads = (long)gridDim.x * gridDim.y * gridDim.z * blockDim.x;",
        "    const uint4* from = reinterpret_cast<const uint4*>(u);",
        "    uint4* to = reinterpret_cast<uint4*>(y);",
        "    for (long i = block * blockDim.x + threadIdx.x; i < count; i += threads)",
        "        to[i] = __ldg(from + i);"])
    # the first run took a plane a block: 64 blocks at 64x1024x1024 and 31.8% of copy there (s46's second JSON)
    nx, ny, rows = case.shape[-1], case.shape[-2], case.points // case.shape[-1]
    height = min(ny, max(1, rows // FLAT_BLOCKS))  # rows a block, then x split where there are too few rows
    split = -(-FLAT_BLOCKS // (-(-ny // height) * (rows // ny)))
    tile = [-(-nx // split), height, 1]
    return source, {"block": [256, 1, 1], "tile": tile}


def march_copy(case: Case, bx: int, by: int, chunk: int, reads: str = "own") -> tuple[str, dict]:
    """Each thread's 16 bytes of a row, plane after plane (2D: row after row), `chunk` of them a block. `reads` (3D):
    "own" copies the row; "rows3" stores it XORed with the rows above and below (clamped at the grid's edge), the
    in-plane reads of star_1 without its arithmetic; "rows3+halo" also with the neighbouring 16 bytes left and right,
    the whole of star_1's in-plane reads (its z arms come from registers)."""
    v = VECTOR_BYTES // case.dtype.itemsize
    three = case.stencil.dims == 3
    if reads != "own" and not three:
        raise ValueError("the neighbouring rows of a 2D march are its previous and next steps: 3D only")
    others = {"own": [], "rows3": ["up", "down"], "rows3+halo": ["up", "down", "left", "right"]}[reads]
    load = "__ldg(reinterpret_cast<const uint4*>(u + base{}))"
    body = [f"        uint4 s = {load.format('')};",
            *[f"        {{ const uint4 t = {load.format(' + ' + name)}; s.x ^= t.x; s.y ^= t.y; s.z ^= t.z; s.w ^= t.w; }}"
              for name in others],
            "        *reinterpret_cast<uint4*>(y + base) = s;"]
    source = _kernel(case, [
        f"    constexpr int V = {v}, L = {chunk};",
        "    const int x0 = (blockIdx.x * blockDim.x + threadIdx.x) * V;",
        *(["    const int j = blockIdx.y * blockDim.y + threadIdx.y;", "    const long sk = (long)nx * ny;",
           "    const int kb = blockIdx.z * L, ke = min(kb + L, nz);", "    if (x0 >= nx || j >= ny) return;",
           "    long base = (long)kb * sk + (long)j * nx + x0;"] if three else
          ["    const long sk = nx;",
           "    const int kb = (blockIdx.y * blockDim.y + threadIdx.y) * L, ke = min(kb + L, ny);",
           "    if (x0 >= nx) return;", "    long base = (long)kb * sk + x0;"]),
        *(["    const long up = j > 0 ? -(long)nx : 0, down = j + 1 < ny ? (long)nx : 0;",
           "    const long left = x0 >= V ? -V : 0, right = x0 + V < nx ? V : 0;"] if others else []),
        "#pragma unroll 2",
        "    for (int k = kb; k < ke; ++k, base += sk) {",
        *body,
        "    }"])
    tile = [bx * v, by, chunk] if three else [bx * v, by * chunk, 1]
    return source, {"block": [bx, by, 1], "tile": tile}


def chunk_walk(case: Case, chunk: int, halo: int, alternate: bool) -> tuple[str, dict]:
    """rows16's walk (32 x 8 threads, 3D) reading each chunk's `halo` planes beyond either end as the kernels do (their
    z arms), and with `alternate` marching odd chunks down (the kernels' `alternate`); only the chunk's own planes are
    stored. The halo planes are XORed into a sink stored only if all its bits are set, which the inputs (no NaN, and
    the copies' test) never make, so that the compiler keeps their loads."""
    v = VECTOR_BYTES // case.dtype.itemsize
    source = _kernel(case, [
        f"    constexpr int V = {v}, L = {chunk}, H = {halo};",
        "    const int x0 = (blockIdx.x * blockDim.x + threadIdx.x) * V;",
        "    const int j = blockIdx.y * blockDim.y + threadIdx.y;",
        "    if (x0 >= nx || j >= ny) return;",
        "    const long sk = (long)nx * ny, row = (long)j * nx + x0;",
        "    const int kb = blockIdx.z * L, ke = min(kb + L, nz);",
        f"    const int dir = {'(blockIdx.z & 1) ? -1 : 1' if alternate else '1'};",
        "    const int first = dir > 0 ? kb - H : ke + H - 1;",
        "    uint4 sink = {0u, 0u, 0u, 0u};",
        "#pragma unroll 2",
        "    for (int n = 0; n < ke - kb + 2 * H; ++n) {",
        "        const int k = first + dir * n;",
        "        if (k < 0 || k >= nz) continue;",
        "        const long base = (long)k * sk + row;",
        "        const uint4 s = __ldg(reinterpret_cast<const uint4*>(u + base));",
        "        if (k >= kb && k < ke) *reinterpret_cast<uint4*>(y + base) = s;",
        "        else { sink.x ^= s.x; sink.y ^= s.y; sink.z ^= s.z; sink.w ^= s.w; }",
        "    }",
        "    if ((sink.x & sink.y & sink.z & sink.w) == 0xFFFFFFFFu) *reinterpret_cast<uint4*>(y + row) = sink;"])
    return source, {"block": [32, 8, 1], "tile": [32 * v, 8, chunk]}


def copies(case: Case) -> list[tuple[str, tuple[str, dict]]]:
    """`flat`, then the marching copies: rows16's walk (32 x 8 threads, its default chunk), 4-row blocks, blocks as wide
    as a row where one fits (64 x 4, 128 x 2), each at the default chunk and twice it; in 3D then star_1's in-plane
    reads, the chunk walks and rows16's walk at the kernels' occupancy."""
    chunk = default_chunk(case, 1)
    row_threads = case.shape[-1] * case.dtype.itemsize // VECTOR_BYTES
    shapes = [(32, 8), (32, 4)] + [(bx, 256 // bx) for bx in (64, 128) if bx <= row_threads]
    made = [("flat", flat_copy(case))]
    for bx, by in shapes:
        for length in (chunk, 2 * chunk):
            made.append((f"march {bx}x{by} l{length}", march_copy(case, bx, by, length)))
    if case.stencil.dims == 3:  # star_1's in-plane reads on rows16's and short4's walks, then the chunks' z halo
        made += [(f"{reads} {bx}x{by} l{chunk}", march_copy(case, bx, by, chunk, reads))
                 for reads in ("rows3", "rows3+halo") for bx, by in ((32, 8), (32, 4))]
        made += [(f"chunk h{halo}{'+alternate' if down else ''} 32x8 l{chunk}", chunk_walk(case, chunk, halo, down))
                 for halo, down in ((0, False), (1, False), (1, True), (2, True))]
        for reads in ("own", "rows3+halo"):  # at the kernels' occupancy: 4 blocks of 8 warps an SM is rows16 f16's 50%
            source, launch = march_copy(case, 32, 8, chunk, reads)
            made += [(f"{'march' if reads == 'own' else reads} 32x8 l{chunk} {blocks} blocks an SM",
                      (source, {**launch, "shared_bytes": kib * 1024})) for blocks, kib in OCCUPANCY]
    return made


def sweep_pattern(backend, case_id: str, passes: int, launches: int, admitted=None) -> tuple[dict, str]:
    """rows16 (as first gated) and the admitted kernel, checked against the straightforward kernel, and the copies on
    their own buffers (a copy is not a stencil: no check), all timed in the same interleaved passes."""
    from measurement.backends.base import Kernel, Variant
    from measurement.harness.oracle import make_inputs

    case = parse_case(case_id)
    buffers = backend.allocate(case, make_inputs(case, 2))
    coef = backend.coefficients(case.coefficients())
    extra = [(name, backend.prepare(case, Variant(name, Kernel(source, launch), "candidate")), buffers, coef, 1)
             for name, (source, launch) in copies(case)]
    rows16 = [("rows16", {"nv": 1, "chunk": default_chunk(case, 1), "by": 8})]
    row = sweep_case(backend, case_id, passes, launches, with_admitted(rows16, admitted), extra=extra)
    shown = [name for name in (row["best"], "flat", _fastest(row, "march"), _fastest(row, "rows3+halo")) if name]
    summary = ", ".join(f"{name} {row['variants'][name]['percent_of_copy']}%" for name in shown) + " of copy"
    return row, summary


def _fastest(row: dict, prefix: str) -> str:
    """The fastest of a sweep row's variants named `prefix ...`, or "" where there is none (2D: no rows3+halo)."""
    named = [name for name in row["variants"] if name.startswith(prefix + " ")]
    return min(named, key=lambda name: row["variants"][name]["median_ms"], default="")


if __name__ == "__main__":
    raise SystemExit(sweep_main(__doc__.splitlines()[0], "comma-separated case ids (T = 1 types)", sweep_pattern,
                                {"pattern": sweep_pattern}))
