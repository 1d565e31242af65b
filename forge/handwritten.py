"""Hand-written CUDA candidates for the H200 campaign (issue 7), submitted through `forge submit`.

The levers proposer composes kernels from `forge.kernelgen` plans one parameter at a time; these
are written by a person, per case, around one design that kernelgen does not have:

* **16-byte rows.** Each thread owns V consecutive x points (V = NV x 16 bytes: 4 float, 2 double
  or 8 half per vector) and reads each row of its footprint as whole 16-byte vectors, the halo
  in x as the two neighbouring aligned vectors (L1 hits: they are the neighbours' rows), so a
  warp issues a quarter (f32) to an eighth (f16) of the straightforward kernel's loads. The old
  scalar f16 straightforward kernel moved 2 bytes per load (4-38% of the copy bandwidth, column
  `straightforward_f16_scalar` of docs/benchmarks/baselines_h200.md); the fair one that bounds
  f16 cases now moves 8 bytes per load.
* **Plane sums into a register queue.** The thread marches L planes along z (rows along y in 2D).
  Each input plane is read once; its contribution to the 2R+1 output planes it touches is one
  in-plane weighted sum per plane distance m (the star: the in-plane cross for m = 0, the centre
  for m > 0; the box: a full (2R+1)^2 footprint), built from orbit sums of symmetric offsets so
  a class coefficient multiplies once (box_2: about 77 adds and 18 multiplies per point instead of
  125 multiply-adds). The queue
  holds the 2R+1 partial output planes; the oldest is complete when a plane is consumed and is
  stored (times a for varcoef) with one vector store.
* Odd shapes or unaligned arrays take the same code with per-lane scalar loads and stores, so
  the candidate is correct on every shape the checks use.

Coefficients stay run-time (the ABI), the shape stays run-time; R, V, L and the class structure
are compile-time. `render(case, nv, by, chunk, vector_bytes, shuffle, l2_prefetch, alternate, split, stride,
streaming, ry)` and
`render_temporal(case, by, chunk)` return (source, launch, hypothesis); forge/candidates.py lists what a campaign submits.
"""
from __future__ import annotations

import math

from measurement.harness.cases import Case
from measurement.harness.codegen import acc_type, composed_star1_polynomials, cuda_type

from .handwritten_bodies import QUEUE_SHIFT, QUEUE_ZERO, march_direction, plane_body, plane_plan, temporal_body
from .handwritten_loads import prefetch_ahead, prefetch_helper, vector_helpers
from .handwritten_pipelined import convert_helper, pipelined_march

VECTOR_BYTES = 16
THREADS_WANTED = 1 << 17  # about the H200's resident threads at ~64 registers (132 SMs x 1024)


def default_chunk(case: Case, nv: int) -> int:
    """Planes (3D) or rows (2D) per thread: long enough to amortise the 2R warm-up planes, short
    enough to leave THREADS_WANTED threads."""
    width = VECTOR_BYTES // case.dtype.itemsize * nv
    chunk = 1
    while chunk < 32 and case.points // (width * chunk * 2) >= THREADS_WANTED:
        chunk *= 2
    return chunk


def render(case: Case, nv: int = 1, by: int = 8, chunk: int | None = None, vector_bytes: int = VECTOR_BYTES,
           shuffle: bool = False, l2_prefetch: bool = False, alternate: bool = False, split: bool = False,
           stride: bool = False, streaming: bool = False, ry: int = 1, unroll: int = 2,
           burst: bool = False, min_blocks: int = 0, ahead: int = 0, pipelined: bool = False,
           own_row: bool = False) -> tuple[str, dict, str]:
    """`shuffle`, `l2_prefetch` and `alternate` are the changes of session 28 (docs/forge.md), each
    off renders the gated sources byte for byte. `alternate`: odd chunks march down z (y in 2D), so
    two neighbouring chunks read the planes at their shared boundary at about the same time, both
    starting or both ending there, and the second read hits the L2 (ncu: rows16 read 1.10x the
    compulsory bytes from DRAM at 512^3 and 256^3 f32, 1.03-1.04x on the cases above 90% of copy;
    the chunks' halo planes are the suspect, not proven). The sweep's other two, refuted and kept
    so its evidence reproduces: the x halo from the neighbouring lanes' registers by warp shuffles,
    where a whole warp is in range (the lanes at the warp's ends load their halo scalars), instead
    of the neighbouring 16-byte vectors; and the input vectors loaded with the PTX hint `L2::256B`,
    so an L2 miss fetches 256 bytes from DRAM instead of 32-byte sectors.

    `split` and `stride` (session 30) cut the instructions a plane costs, for the f16 cases that are
    issue-bound (docs/forge.md). `split`: the vector and the per-lane paths in two loops, each with
    `vec` a compile-time constant. In one loop nvcc if-converts the two paths and issues both, the
    unused one predicated off: the SASS of rows16 on star_1 f16 (`benchmarks/sass_count.py`) has 411
    instructions in its two-plane loop, 308 with `split`, and 47 registers instead of 64. `stride`:
    the plane's address advanced by the plane stride each step instead of recomputed from k in 64
    bits (284 with both).

    `streaming` (session 32, refuted by the H200 sweep and kept so its evidence reproduces): the output
    vectors stored evict-first (`st.global.cs`), so that written lines leave the L2 before the input
    rows and planes the neighbouring blocks and chunks read again (ncu: rows16 read 1.10x the
    compulsory bytes from DRAM at star_1/512^3 and 256^3).

    `ry` (session 32, 3D): each thread computes `ry` consecutive rows, with a queue for each, and
    loads the ry + 2R rows of their footprint once, so the rows between its first and last take
    their y neighbours from its own registers and a block reads ry x by + 2R rows a plane for
    ry x by output rows. Against the L2 reads beyond one a point, which keep these kernels from the
    copy's DRAM rate with the L2 as busy as in the copy (ncu, scripts/rows_ncu.sh: box_1/512^3 f32
    1.71x -> 1.22x); paid for in registers (126 at 4 rows there), so it wins only where the queue is
    short (docs/forge.md).

    `unroll` (session 34): how many planes (rows in 2D) nvcc unrolls the march by, the pragma then on the loop
    (2 renders the gated sources; with `alternate` and neither `split` nor `stride` those have it before `dir`,
    where nvcc ignores it, warning 607, and unrolls by its own measure: the PTX of star2d_1 f64 short4+alternate
    has 19 global loads, against 9 at `unroll` 1 and 37 at 4). More planes a step let a thread have more row loads in flight: the 2D
    kernels stall below the copy's rate (star2d_1 f64 88% against tuned Halide's 90%, whose threads each have
    8 rows unrolled), and a longer chunk, which reads fewer halo rows, lost because it leaves fewer threads.

    `burst` (session 41): the chunk's march unrolled whole, every row read unconditionally (the grid's last chunk
    reads its last row again instead of leaving the loop) and the outputs held in registers until the loop's end, so
    no store stands between two rows' loads and nvcc may issue a short chunk's loads all at once, as
    tuned Halide's star2d_1 f64 kernel does (8 rows a thread, 64-thread blocks). Nsight Compute on the H100 put that
    kernel at the copy's DRAM rate (85.5%) and ours at 80%, marching down or not (docs/gpu.md, session 41); its
    threads issue each row's loads before any arithmetic, ours a row or two ahead.

    `min_blocks` (session 45): `__launch_bounds__(32 x by, min_blocks)`, so nvcc keeps the registers a thread to what
    min_blocks resident blocks an SM leave. Nsight Compute on star_1/512^3 f16 (session 44, H100) found the admitted
    kernel reading 1.06x the copy's DRAM bytes at 73% of DRAM's peak against the copy's 86%, with 45-48% of the
    warps resident (52 registers): too few loads in flight, not too many bytes. More resident warps at the same code
    would put more loads in flight. Refuted on the H100 and kept so its evidence reproduces: capped at 48 registers
    (40 warps an SM, 4 bytes of spills at most) nvcc spends 1-20% more instructions a plane (docs/benchmarks/sass_bounds_s45.json),
    and every lean kernel of the four f16 radius-1 cases ran at 0.92-1.00x of its uncapped speed, at 40 registers at
    0.52-0.99x (docs/benchmarks/handwritten_bounds_h100_s45.json).

    `ahead` (session 46): each step of the march first prefetches the thread's own row `ahead` planes (2D: rows) on
    into the L2 (PTX `prefetch.global.L2`): more DRAM requests in flight with no register held. Its loads go through
    `__ldg` (beside the inline PTX nvcc drops their read-only path); 10-30 more instructions a two-plane step on star_1
    f16 (docs/benchmarks/sass_ahead_s46.json). Refuted on the H100 and kept so its evidence reproduces: 0.79-1.06x of
    the same kernel without, and no prefetching kernel beat a case's fastest (docs/benchmarks/handwritten_ahead_h100_s46.json).

    `pipelined` (session 47, lean kernels only): the vector path loads plane n + 1's rows raw into registers before it
    converts, sums and stores plane n (forge/handwritten_pipelined.py says why); with `own_row` only the thread's own row."""
    stencil = case.stencil
    if pipelined and (not (split and stride) or burst or ry > 1 or ahead or l2_prefetch or streaming):
        raise ValueError("`pipelined` is a lean kernel's vector path (split and stride) with plain loads and stores, one row a thread")
    if own_row and not pipelined:
        raise ValueError("`own_row` is which rows `pipelined` loads ahead")
    if stencil.time_steps != 1:
        raise ValueError(f"{case.type}: the plane-queue design is for one application (T = 1), not {stencil.time_steps}"
                         " (render_temporal is for T > 1)")
    if ahead and (burst or ry > 1):
        raise ValueError("`ahead` prefetches the thread's one row a step of a rolled march: not with burst or ry")
    if burst and (alternate or stride or ry > 1):
        raise ValueError("a burst chunk is short and unrolled whole: it marches one way, one row a thread, k from kb")
    if ry > 1 and (stencil.dims != 3 or shuffle):
        raise ValueError("several rows a thread (ry) are for 3D stencils without the shuffled x halo")
    chunk = chunk or default_chunk(case, nv)
    vw = vector_bytes // case.dtype.itemsize
    v = vw * nv
    three = stencil.dims == 3
    comment = [
        f"/* Hand-written H200 candidate for {case.id} (forge/handwritten.py): {v} x-points per thread in",
        f" * {nv} x {vector_bytes}-byte vectors, {chunk} {'planes (z)' if three else 'rows (y)'} per thread through a register queue of",
        f" * {2 * stencil.radius + 1} partial outputs, one in-plane orbit-sum per plane distance. Any shape: odd extents or",
        " * unaligned arrays take per-lane scalar loads and stores. */",
    ]
    if ry > 1:  # session 32's first sources with ry said only "by-row blocks" and ran 32 x (by * ry) threads
        comment.append(f"/* Launched with {by}-row blocks (32 x {by} threads) of {ry} rows a thread, {by * ry} rows a block. */")
    elif by != 8:  # the launch is not in the source: say it, so the ledger (keyed by source) tells them apart
        comment.append(f"/* Launched with {by}-row blocks (32 x {by} threads). */")
    setup = [f"    const acc_t c{k} = (acc_t)coef[{k}];" for k in range(len(stencil.classes))]
    changes = [n for n, on in (("x halo by warp shuffles", shuffle), ("L2::256B loads", l2_prefetch),
                                ("odd chunks march down", alternate), ("vector and lane paths in two loops", split),
                                ("plane address advanced by the stride", stride),
                                ("evict-first output stores", streaming),
                                (f"{ry} rows a thread", ry > 1),
                                ("the chunk unrolled whole, every row read", burst),
                                (f"the march unrolled {unroll} {'planes' if three else 'rows'} a step", unroll != 2),
                                (f"registers capped for {min_blocks} resident blocks an SM", min_blocks > 0),
                                (f"the row {ahead} {'planes' if three else 'rows'} on prefetched to the L2", ahead > 0),
                                (f"the next {'plane' if three else 'row'}'s {'own-row ' if own_row else ''}vectors loaded a step ahead",
                                 pipelined)) if on]
    if changes:
        comment.append(f"/* Changes: {', '.join(changes)}. */")
    source = _marching_kernel(case, v, vw, chunk, comment, [], setup,
                              plane_body(case, plane_plan(case), v, vw, "        ", shuffle, ry),
                              shuffle=shuffle, l2_prefetch=l2_prefetch, alternate=alternate, split=split, stride=stride,
                              streaming=streaming, ry=ry, unroll=unroll, loop_pragma=unroll != 2, burst=burst,
                              bounds=(32 * by, min_blocks) if min_blocks else None, ahead=ahead,
                              pipelined=(plane_plan(case), vector_bytes, own_row) if pipelined else None)
    hypothesis = (
        f"{case.id}: {vector_bytes}-byte row loads ({v} x-points per thread) and a {2 * stencil.radius + 1}-deep register queue marching "
        f"{chunk} {'planes' if three else 'rows'} cut the load instructions per point and read each input plane once; "
        f"expected near the copy bandwidth if the bottleneck is load issue, not DRAM."
    )
    return source, _launch(case, v, by, chunk, ry), hypothesis


def render_temporal(case: Case, by: int = 4, chunk: int | None = None) -> tuple[str, dict, str]:
    """diamond_tsT (T > 1) as one radius-T octahedron with the composed weights of
    measurement.harness.codegen (a polynomial in c0, c1 per class of sorted |offset|, evaluated
    once per block into shared memory), through the same plane queue: each input plane's rows
    are taken in +-a pairs, summed, folded in x into pair sums p_b = r[x-b] + r[x+b], and
    s_m += w(m, a, b) p_b for every m + a + b <= T, so a point costs C(T+3, 3) multiply-adds
    (165 for T = 8) instead of the octahedron's 833 loads and multiply-adds (the levers'
    `composed` kernel, 0.08-0.11x of pystencils on the H200)."""
    stencil = case.stencil
    if stencil.time_steps < 2 or stencil.dims != 3:
        raise ValueError(f"{case.type}: render_temporal is for diamond_tsT with T > 1")
    t = stencil.time_steps
    polys = composed_star1_polynomials(t)
    classes = sorted(polys)
    vw = VECTOR_BYTES // case.dtype.itemsize
    chunk = chunk or default_chunk(case, 1)
    comment = [
        f"/* Hand-written H200 candidate for {case.id} (forge/handwritten.py): {t} applications of star_1 as one",
        f" * radius-{t} octahedron with composed weights, {vw} x-points per thread (16-byte vectors), {chunk} planes per",
        f" * thread through a register queue of {2 * t + 1} partial outputs; +-dy rows and +-dx lanes are summed before",
        " * their shared weight multiplies. Any shape: odd extents or unaligned arrays take per-lane scalar loads. */",
    ]
    table = [
        f"/* POLY[class][m]: the weight of class (sorted |dz|,|dy|,|dx|) is sum_m POLY * c0^({t}-m) * c1^m (codegen). */",
        f"__constant__ double POLY[{len(classes)}][{t + 1}] = {{",
        *["    {" + ", ".join(repr(float(dict(polys[c]).get(m, 0))) for m in range(t + 1)) + f"}},  /* {c} */" for c in classes],
        "};",
    ]
    setup = [
        f"    __shared__ acc_t w[{len(classes)}];",
        "    {",
        f"        double p0[{t + 1}], p1[{t + 1}];",
        "        p0[0] = 1.0; p1[0] = 1.0;",
        f"        for (int m = 1; m <= {t}; ++m) {{ p0[m] = p0[m - 1] * coef[0]; p1[m] = p1[m - 1] * coef[1]; }}",
        "        const int rank = threadIdx.y * blockDim.x + threadIdx.x;",
        f"        for (int e = rank; e < {len(classes)}; e += blockDim.x * blockDim.y) {{",
        "            double sum = 0.0;",
        f"            for (int m = 0; m <= {t}; ++m) sum += POLY[e][m] * p0[{t} - m] * p1[m];",
        "            w[e] = (acc_t)sum;",
        "        }",
        "    }",
        "    __syncthreads();",
    ]
    index = {c: k for k, c in enumerate(classes)}
    # the plane loop is not unrolled: unrolled twice, the T = 8 body spills registers (nvcc -arch=sm_90 -Xptxas -v)
    source = _marching_kernel(case, vw, vw, chunk, comment, table, setup, temporal_body(case, index, vw, "        "),
                              unroll=1)
    hypothesis = (f"{case.id}: the {t} steps as one octahedron whose ±dy rows and ±dx lanes are summed before their "
                  f"shared weight multiplies, through a plane queue: about {math.comb(t + 3, 3)} multiply-adds per point "
                  "from registers instead of the composed kernel's octahedron of loads; compute-bound, expected well "
                  f"under the {t} memory-bound sweeps of pystencils.")
    return source, _launch(case, vw, by, chunk), hypothesis


def _launch(case: Case, v: int, by: int, chunk: int, ry: int = 1) -> dict:
    if case.stencil.dims == 3:
        return {"block": [32, by, 1], "tile": [32 * v, by * ry, chunk]}
    return {"block": [32, by, 1], "tile": [32 * v, by * chunk, 1]}


def _marching_kernel(case: Case, v: int, vw: int, chunk: int, comment: list[str], file_scope: list[str],
                     setup: list[str], body: list[str], unroll: int = 2, shuffle: bool = False,
                     l2_prefetch: bool = False, alternate: bool = False, split: bool = False,
                     stride: bool = False, streaming: bool = False, ry: int = 1, loop_pragma: bool = False,
                     burst: bool = False, bounds: tuple[int, int] | None = None, ahead: int = 0,
                     pipelined: tuple[dict, int, bool] | None = None) -> str:
    """The skeleton both designs share: thread -> (V x-points, row, chunk of planes), the
    register queue of 2H+1 partial output planes (H = the halo), its store and shift; `setup`
    runs before any thread returns (it may synchronise), `body` adds plane k into the queue.
    With `split`, `stride` or `loop_pragma` the unroll pragma stands on the loop; without them it stays where the
    gated marching-down sources have it, before `dir` (where nvcc ignores it and unrolls their loop by its own measure)."""
    stencil = case.stencil
    three = stencil.dims == 3
    lines = [
        *comment,
        "#include <cuda_fp16.h>" if case.precision == "f16" else None,
        f"typedef {cuda_type(case.precision)} elem_t;",
        f"typedef {acc_type(case.precision)} acc_t;",
        *vector_helpers(case.precision, vw, vw * case.dtype.itemsize, l2_prefetch, streaming, ldg=bool(ahead)),
        *(prefetch_helper() if ahead else []),
        *(convert_helper(case.precision, vw, pipelined[1]) if pipelined else []),
        *file_scope,
        'extern "C" __global__ void ' + (f"__launch_bounds__({bounds[0]}, {bounds[1]}) " if bounds else "")
        + 'stencil(const elem_t* __restrict__ u, const elem_t* __restrict__ a,',
        "                                   elem_t* __restrict__ y, const double* __restrict__ coef,",
        "                                   int nz, int ny, int nx)",
        "{",
        f"    constexpr int R = {stencil.halo}, V = {v}, VW = {vw}, L = {chunk};",
        f"    constexpr int RY = {ry};  /* rows a thread */" if ry > 1 else None,
        *setup,
        "    const int x0 = (blockIdx.x * blockDim.x + threadIdx.x) * V;",
        *(["    const bool in_x = !(x0 >= nx - R || x0 + V <= R);",
           "    /* the x halo by shuffles only where all 32 lanes stay (a warp is one row: blockDim.x = 32) */",
           "    const bool whole_warp = __ballot_sync(0xffffffffu, in_x) == 0xffffffffu;",
           "    const int lane = threadIdx.x & 31;",
           "    if (!in_x) return;"] if shuffle else
          ["    if (x0 >= nx - R || x0 + V <= R) return;"]),
    ]
    if three:
        lines += [
            "    const int j = blockIdx.y * blockDim.y + threadIdx.y;",
            "    if (j < R || j >= ny - R) return;",
        ] if ry == 1 else [
            "    const int j = (blockIdx.y * blockDim.y + threadIdx.y) * RY;  /* the first of the thread's rows */",
            "    if (j + RY <= R || j >= ny - R) return;",
        ]
        lines += [
            "    const int kb = R + blockIdx.z * L;",
            "    const int ke = min(kb + L, nz - R);",
            "    const long sk = (long)nx * ny;  /* plane stride */",
            "    const long rowbase = (long)j * nx + x0;",
        ]
    else:
        lines += [
            "    const int kb = R + (blockIdx.y * blockDim.y + threadIdx.y) * L;",
            "    const int ke = min(kb + L, ny - R);",
            "    const long sk = nx;  /* row stride: 2D marches along y */",
            "    const long rowbase = x0;",
        ]
    aligned = ("(nx % V == 0) && ((((unsigned long long)u | (unsigned long long)y"
               + (" | (unsigned long long)a" if stencil.variable_coefficient else "") + f") & {vw * case.dtype.itemsize - 1}) == 0);")
    lines += ["    if (kb >= ke) return;", f"    const bool {'vec_ok' if split else 'vec'} = {aligned}"]
    march = _march(case, v, vw, unroll, prefetch_ahead(case, ahead, alternate) + body, alternate,
                   pragma_on_loop=split or stride or loop_pragma, stride=stride, ry=ry, burst=burst)
    if split:  # each loop sees `vec` as a constant, so nvcc emits only its own path
        fast = pipelined_march(case, pipelined[0], v, vw, pipelined[1], unroll, alternate,
                               _store(case, v, vw, "            "), pipelined[2], shuffle) if pipelined else march
        lines += ["    if (vec_ok) {", "        constexpr bool vec = true;", *_nested(fast),
                  "    } else {", "        constexpr bool vec = false;", *_nested(march), "    }"]
    else:
        lines += march
    lines.append("}")
    return "\n".join(line for line in lines if line is not None) + "\n"


def _march(case: Case, v: int, vw: int, unroll: int, body: list[str], alternate: bool, pragma_on_loop: bool,
           stride: bool, ry: int = 1, burst: bool = False) -> list[str]:
    """The queue and the loop over the chunk's planes (with `stride`, `base` advances by the plane
    stride instead of being k * sk + rowbase; with `ry` > 1, a queue for each of the thread's rows)."""
    three = case.stencil.dims == 3
    pragma = f"#pragma unroll {unroll}"
    if alternate:
        head = ["    /* odd chunks march down: neighbouring chunks meet at their shared halo planes (the queue is",
                "       symmetric in z, so only which plane is complete changes: k + R going down) */",
                march_direction(three)]
        if stride:
            head += ["    long base = (long)(dir > 0 ? kb - R : ke + R - 1) * sk + rowbase;", "    const long step = dir * sk;",
                     pragma, "    for (int n = 0; n < ke - kb + 2 * R; ++n, base += step) {"]
            out = "base - R * step"
        else:
            head += [pragma] if pragma_on_loop else []
            head += ["    for (int n = 0; n < ke - kb + 2 * R; ++n) {",
                     "        const int k = dir > 0 ? kb - R + n : ke + R - 1 - n;",
                     "        const long base = (long)k * sk + rowbase;"]
            out = "(long)(k - R * dir) * sk + rowbase"
        if not pragma_on_loop:
            head.insert(0, pragma)
        complete = "n >= 2 * R"
    elif burst:
        head = ["#pragma unroll", "    for (int n = 0; n < L + 2 * R; ++n) {",
                "        const int k = min(kb - R + n, ke + R - 1);  /* past the grid's last row: that row again, not stored */",
                "        const long base = (long)k * sk + rowbase;"]
        complete = "n >= 2 * R && kb - R + n < ke + R"
    else:
        if stride:
            head = ["    long base = (long)(kb - R) * sk + rowbase;", pragma, "    for (int k = kb - R; k < ke + R; ++k, base += sk) {"]
            out = "base - R * sk"
        else:
            head = [pragma, "    for (int k = kb - R; k < ke + R; ++k) {", "        const long base = (long)k * sk + rowbase;"]
            out = "(long)(k - R) * sk + rowbase"
        complete = "k - R >= kb"
    if burst:  # the outputs held in registers and stored after the loop: no store between two rows' loads
        hold = ["#pragma unroll", "            for (int i = 0; i < V; ++i) held[n - 2 * R][i] = q[0][i];"]
        store = ["#pragma unroll", "    for (int j = 0; j < L; ++j) {", "        if (kb + j >= ke) break;",
                 "        const long out = (long)(kb + j) * sk + rowbase;", *_store(case, v, vw, "        ", queue="held[j]"), "    }"]
        return ["    acc_t q[2 * R + 1][V], held[L][V];", *QUEUE_ZERO, *head, *body, f"        if ({complete}) {{", *hold, "        }",
                *QUEUE_SHIFT, "    }", *store]
    if ry == 1:
        store = _store(case, v, vw, "            ")
        return ["    acc_t q[2 * R + 1][V];", *QUEUE_ZERO, *head, *body, f"        if ({complete}) {{",
                f"            const long out = {out};", *store, "        }", *QUEUE_SHIFT, "    }"]
    store = ["#pragma unroll", "            for (int t = 0; t < RY; ++t) {", "                const long out_t = out + t * (long)nx;",
             "                if (j + t >= R && j + t < ny - R) {",
             *_store(case, v, vw, "                    ", queue="q[t][0]", out="out_t"), "                }", "            }"]
    return ["    acc_t q[RY][2 * R + 1][V];", *_each_row(QUEUE_ZERO, "    ", braces=False), *head, *body,
            f"        if ({complete}) {{", f"            const long out = {out};", *store, "        }",
            *_each_row(QUEUE_SHIFT, "        ", braces=True), "    }"]


def _nested(lines: list[str]) -> list[str]:
    """`lines` one level deeper (the pragmas stay at the line's start)."""
    return [f"    {line}" if line.strip() and not line.startswith("#") else line for line in lines]


def _each_row(lines: list[str], indent: str, braces: bool) -> list[str]:
    """`lines` on one queue, as a loop over the queues of the thread's RY rows."""
    inner = [line if line.startswith("#") else "    " + line.replace("q[", "q[t][") for line in lines]
    return ["#pragma unroll", f"{indent}for (int t = 0; t < RY; ++t){' {' if braces else ''}", *inner,
            *([f"{indent}}}"] if braces else [])]


def _store(case: Case, v: int, vw: int, indent: str, queue: str = "q[0]", out: str = "out") -> list[str]:
    """Store the completed output plane `queue` (times a for varcoef) at offset `out`."""
    lines = []
    if case.stencil.variable_coefficient:
        lines += [f"{indent}acc_t w[V];", f"{indent}if (vec) {{",
                  *[f"{indent}    load_vector(a + {out} + {s}, &w[{s}]);" for s in range(0, v, vw)],
                  f"{indent}}} else {{", "#pragma unroll",
                  f"{indent}    for (int i = 0; i < V; ++i) w[i] = (x0 + i < nx) ? LOAD(a, {out} + i) : (acc_t)0;",
                  f"{indent}}}", "#pragma unroll", f"{indent}for (int i = 0; i < V; ++i) {queue}[i] *= w[i];"]
    lines += [f"{indent}if (vec && x0 >= R && x0 + V <= nx - R) {{",
              *[f"{indent}    store_vector(y + {out} + {s}, &{queue}[{s}]);" for s in range(0, v, vw)],
              f"{indent}}} else {{", "#pragma unroll",
              f"{indent}    for (int i = 0; i < V; ++i)",
              f"{indent}        if (x0 + i >= R && x0 + i < nx - R) y[{out} + i] = STORE({queue}[i]);",
              f"{indent}}}"]
    return lines
