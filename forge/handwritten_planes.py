"""`planes`: star_R with the in-plane arms from a shared-memory ring of input planes filled by
cp.async, and only the z arms in a register queue (issue 16).

What it replaces. rows16 (forge/handwritten.py) reads each input plane's footprint rows into
registers (for star_4 f32: a 12-lane centre row and eight 4-lane rows) beside a queue of 2R+1
partial outputs; nvcc gives it 94 registers a thread for star_4 in f32 and 168 in f16, and Nsight
Compute on the H200 put star_4/512^3 f32 at 25% theoretical occupancy and 29% of the DRAM
bandwidth (docs/benchmarks/ncu/). The rows are what costs: they are read once and summed, so they
need not live in registers at all.

The design. A block of 32 x H threads owns an output tile of 32V x H points (V lanes a thread: one
16-byte vector in f32 and f64, one 8-byte vector of four halves in f16) and marches along z over
a chunk of L output planes. Each input plane of the chunk (L + 2R of them) is copied as a tile of
(32 + 2 NX) x (H + 2R) vectors (NX = ceil(R/V) vectors of x halo) into one of NB shared buffers by
cp.async, NB - 1 planes ahead, so the bytes in flight sit in shared memory, not in registers. At
plane p a thread reads from the tile its own vector (the centre), the 2R vectors above and below
it and the NX vectors either side, adds the in-plane arms and c0 times the centre into output p's
slot of a queue of 2R+1 partial outputs, and c_d times the centre into the slots of outputs p -+ d;
output p - R is then complete and stored. One barrier a plane: the wait for plane p's copies, then
__syncthreads, after which every thread has finished plane p - 1, so its buffer is refilled with
plane p + NB - 1.

Registers (nvcc 13.0 -arch=sm_90 -Xptxas -v, 512-thread blocks, H = 16, NB = 4, 0 bytes spilled),
under __launch_bounds__(512, resident_blocks): star_2 f32 40, f16 40 (3 blocks an SM: 75%
theoretical occupancy; without the bound nvcc takes 47 and 48); star_4 f32 64, f16 63, star_2 f64
62, star_4 f64 64 (2 blocks: 50%; without the bound 76, 106, 56, 94). rows16 (short4 is the same
source) takes 94 (f32) and 168 (f16) for star_4 (25% and 12.5% in its 256-thread blocks), 56 for
star_2 f32, 95 for f16 and 52 for f64 (56% in short4's 128-thread blocks: planes has less
occupancy for star_2 f64, and gains there only if the L1 traffic below is what limits rows16). Shared memory: NB x (H + 2R) x (32 + 2 NX) vectors, 52 KiB a
block for star_4 f32, 43 KiB for star_2 f32, so the resident blocks take at most 130 of 228 KiB.

Bytes a point. DRAM: one read and one write (8 bytes in f32), as for rows16, provided the
neighbouring tiles' halo rows hit the L2 (blocks next to each other in y march the same planes at
about the same time). L2 to SM: the tile repeats (H + 2R)/H x (32 + 2 NX)/32 x (L + 2R)/L of the
reads, 1.50 x 1.06 x 1.06 = 1.69 for star_4/512^3 (L = 128), 1.25 x 1.06 x 1.06 = 1.41 for
star_2/512^3 f32 (L = 64); rows16 loads 2R+1 rows of vectors a plane through L1 (11 vectors for 4
points in star_4 f32). Shared memory: the cp.async writes plus 1 + 2 NX + 2R vector reads a thread
and plane: 44 + 7 bytes a point for star_4 f32, 28 + 6 for star_2 f32, 22 + 3 for star_4 f16,
56 + 11 for star_2 f64. At the copy rate (4.3 TB/s: 537 G points/s in f32, 1075 in f16, 269 in
f64) against the H200's 128 bytes a clock an SM (about 33 TB/s at 1.98 GHz) that is 82% of the
shared bandwidth for star_4 in f32 and f16 and 54% for star_2 in f32 and f64: star_4 may end up
limited by shared memory rather than DRAM, star_2 should not.
Expected: star_4 from 40% (f32) and 20% (f16) of the copy bandwidth towards 70-80%, star_2 from
63-75% towards 80-90%. Measured on the H200 (session 25, docs/forge.md): star_4/512^3 66% (f32,
admitted at 1.92x over tuned Halide) and 34% (f16, 1.14x); star_2 5-17% slower than short4.

star_1 (offered since session 24) for another bottleneck: rows16 keeps star_1/512^3 f32 in 32
registers at 95% achieved occupancy, yet at 76% of the DRAM bandwidth with the L2 at 88% of its
throughput (ncu, docs/benchmarks/ncu/): it loads 3 rows of vectors a plane through L1, the rows above
and below from the L2 where L1 misses them. planes reads a point into the SM (H + 2)/H x (32 + 2)/32 x
(L + 2)/L times, 1.21 for 512^3 (L = 128), once from the L2 by cp.async; its shared-memory traffic
(20 + 5 bytes a point in f32) is about 41% of that unit's bandwidth at the copy rate. Under __launch_bounds__(512, 4) nvcc 13.0
gives it 32 registers in f32, f16 and f64 (0 bytes spilled; 36, 38 and 56 under (512, 3)), four
39 KiB blocks an SM (153 of 228 KiB): 100% theoretical occupancy. Expected: the star_1 f32 cases from
73-91% of the copy bandwidth (issue 16's figures of 2026-12-01) towards 90%, if the L2 is what limits
rows16 there. Measured on the H200 (session 25): 15-25% slower than rows8/short4 on star_1 256^3 and
512^3 f32 (65-66% of copy against 75-82%), so the L2 was not what limited them.

Odd shapes and unaligned arrays (nx not a multiple of V, or an array off the vector boundary) take
per-lane scalar loads into the same shared tile and per-lane stores, in the same kernel.

`bulk` (session 32): the ring filled by the copy engine instead of cp.async, thread 0 issuing one bulk
copy a tile row that completes on the buffer's `full` mbarrier, every warp arriving at its `empty`
mbarrier when done, so no block-wide barrier a plane (what `planes` lost star_1 and star_2 to) while the
L2 reads a point stay 1.21x at star_1/512^3. Measured on the H200 (session 33): slower than `planes`
itself in f32 (star_1/512^3 61.6% of copy against 65.8%, star_4 50% against 66%): thread 0 computes too,
so its warp lags while it waits for `empty` and issues the copies, and every warp waits on it.
`producer` (session 33): one more warp that only fills the ring, its lanes issuing the row copies; 15
computing warps that only wait for `full`. 81% on star_1/512^3 f32 (still below the admitted 85%) and
78.7% on star_2/512^3 f64, ahead of its admitted 75.7%, where it was gated and admitted (docs/forge.md).
`pull` (session 34, text in forge/handwritten_planes_bulk.py): the producer warp's computing loop without the queue,
each output summed whole from the 2R + 1 planes of the ring around it: 40 registers for star_2 f32 under (512, 3)
with no spills (the queued producer spilled there), 32 for star_1 f32, at 2R + 2 or more buffers (62 KiB a block
for star_2 at 6). Emulated correct; not yet measured on the H200.
"""
from __future__ import annotations

import math
from string import Template

from measurement.harness.cases import Case
from measurement.harness.codegen import acc_type, cuda_type

from .handwritten_planes_bulk import BULK, PRODUCER, PULL, store_row

TX = 32  # threads of a block in x: a warp reads one row of the tile
STAGES = 4  # shared buffers: NB - 1 planes in flight while one is read
VECTOR = {"f32": ("float4", 16, "cg"), "f64": ("double2", 16, "cg"), "f16": ("uint2", 8, "ca")}  # cp.async.cg is 16-byte only


def lanes(case: Case) -> int:
    return VECTOR[case.precision][1] // case.dtype.itemsize


def check_case(case: Case) -> None:
    stencil = case.stencil
    if stencil.family != "star" or stencil.dims != 3 or stencil.time_steps != 1 or stencil.variable_coefficient:
        raise ValueError(f"{case.id}: planes is for the 3D constant-coefficient star stencils (star_R)")


def shared_bytes(case: Case, height: int, stages: int = STAGES) -> int:
    r, v = case.stencil.radius, lanes(case)
    return stages * (height + 2 * r) * (TX + 2 * -(-r // v)) * VECTOR[case.precision][1]


def resident_blocks(case: Case) -> int:
    """512-thread blocks an SM is to hold, passed to __launch_bounds__: as many as nvcc fits star_R
    in without spilling: 4 for R = 1 (32 registers, 100% occupancy), 3 for R = 2 in f32 and f16 (at
    most 40 registers, 75%), else 2 (64 registers, 50%)."""
    if case.stencil.radius == 1:
        return 4
    return 3 if case.stencil.radius <= 2 and case.precision != "f64" else 2


def default_chunk(case: Case, height: int) -> int:
    """Output planes a block: the z halo's refill, (L + 2R) / L, against the last wave's idle SMs
    (resident_blocks an SM, 132 SMs)."""
    nz, ny, nx = case.shape
    return least_idle_chunk(case, math.ceil(nx / (TX * lanes(case))) * math.ceil(ny / height), resident_blocks(case))


def least_idle_chunk(case: Case, tiles: int, resident: int) -> int:
    """Of 8 .. 128 planes a block (shorter than the grid), the chunk whose z halo refill, (L + 2R) / L, times the
    last wave's idle share, ceil(waves) / waves, is least, for `tiles` (x, y) tiles and `resident` blocks an SM on
    132 SMs; the longer chunk of a tie. (`tcq`, forge/handwritten_tensor.py, chooses its chunk the same way.)"""
    nz = case.shape[0]
    r = case.stencil.radius

    def cost(chunk: int) -> float:
        waves = tiles * math.ceil((nz - 2 * r) / chunk) / (resident * 132)
        return (chunk + 2 * r) / chunk * math.ceil(waves) / waves

    chunks = [c for c in (8, 16, 32, 64, 128) if c < nz] or [8]
    return min(chunks, key=lambda c: (cost(c), -c))


def render(case: Case, height: int = 16, chunk: int | None = None, stages: int = STAGES,
           bulk: bool = False, producer: bool = False, resident: int | None = None, pull: bool = False) -> tuple[str, dict, str]:
    """(source, launch, hypothesis) of the planes kernel for a star_R case; with `bulk` the ring is
    filled by the copy engine on mbarriers (f32 and f64: its copies are whole 16-byte multiples), with
    `producer` too by a warp of its own beside the `height` computing ones. `resident`: the blocks an SM is
    to hold, for __launch_bounds__ (default `resident_blocks`; fewer leave nvcc more registers a thread).
    `pull` (session 34, with `producer`): no queue of partial outputs; each output is summed whole from the 2R + 1
    planes of the ring around it (the z arms too read from shared memory), so a computing thread holds one output's
    lanes instead of 2R + 1 (the producer spilled star_2 f32 under its launch bound), and a buffer is released once
    the output R planes above its plane is stored: `stages` must exceed 2R + 1."""
    check_case(case)
    if producer and not bulk:
        raise ValueError("a producer warp issues bulk copies: producer needs bulk")
    if pull and (not producer or stages < 2 * case.stencil.radius + 2):
        raise ValueError(f"pull reads 2R + 1 = {2 * case.stencil.radius + 1} planes of the ring at once while the producer fills "
                         f"another: it needs producer and at least {2 * case.stencil.radius + 2} stages")
    if bulk and VECTOR[case.precision][1] != 16:
        raise ValueError(f"{case.id}: bulk copies move whole 16-byte units; planes' {case.precision} vectors are narrower")
    warps = height + producer
    if not 2 <= stages <= 8 or height < 1 or TX * warps > 1024:
        raise ValueError(f"stages {stages}, height {height}: 2 to 8 buffers, at most 1024 threads a block")
    r, v = case.stencil.radius, lanes(case)
    chunk = chunk or default_chunk(case, height)
    vtype, vbytes, cache = VECTOR[case.precision]
    source = (_PULL_SOURCE if pull else _SOURCE).substitute(
        case=case.id, R=r, V=v, H=height, MIN_BLOCKS=resident or resident_blocks(case), L=chunk, NB=stages, THREADS=TX * warps, WARPS=warps, VB=vbytes, CACHE=cache,
        INCLUDE="#include <cuda_fp16.h>\n" if case.precision == "f16" else "", ELEM=cuda_type(case.precision),
        ACC=acc_type(case.precision), VEC=vtype, LANES=_LANES[case.precision],
        HOW=("row copies by the copy engine on mbarriers" + (", issued by a producer warp" if producer else "")
             + (", each output pulled whole from 2R+1 of them" if pull else "")
             if bulk else f"{vbytes}-byte cp.async copies"),
        ZARMS="the z arms from the ring too, no queue" if pull else "the z arms in a register queue of 2R+1 partial outputs",
        **(PRODUCER if producer else BULK if bulk else {**_PLANES, "HELPERS": Template(_PLANES["HELPERS"]).substitute(CACHE=cache, VB=vbytes)}))
    launch = {"block": [TX, warps, 1], "tile": [TX * v, height, chunk], "shared_bytes": shared_bytes(case, height, stages)}
    nx_halo = -(-r // v)
    reads = (height + 2 * r) / height * (TX + 2 * nx_halo) / TX * (chunk + 2 * r) / chunk
    occupancy = (resident or resident_blocks(case)) * TX * warps / 2048
    hypothesis = (f"{case.id}: the in-plane arms from a shared ring of {stages} input planes filled by cp.async "
                  f"({TX * v}x{height} tiles, {chunk} planes a block: each input point read {reads:.2f}x into the SM, "
                  f"where rows16 reads {2 * r + 1} rows a plane through L1), only the z arms in a {2 * r + 1}-deep register "
                  f"queue ({occupancy:.0%} theoretical occupancy by __launch_bounds__, no spills); expected nearer the copy "
                  "bandwidth where rows16's registers or its L1 traffic limited it.")
    return source, launch, hypothesis


def candidate(case: Case) -> tuple[str, dict, str, str]:
    """The `planes` candidate campaigns submit (forge.candidates.matrix_candidates)."""
    source, launch, hypothesis = render(case)
    return (f"planes: shared cp.async plane ring, z arms in registers, {launch['tile'][0]}x{launch['tile'][1]} tiles, "
            f"{launch['tile'][2]} planes a block", launch, hypothesis, source)


def producer_candidate(case: Case) -> tuple[str, dict, str, str]:
    """`planes` with the ring filled by bulk copies from a producer warp (session 33), at the 3 buffers and
    15 computing warps the H200 sweep measured best (docs/benchmarks/handwritten_producer_h200_s33.json)."""
    source, launch, _ = render(case, height=15, stages=3, bulk=True, producer=True)
    hypothesis = (f"{case.id}: one change from planes: a producer warp fills the ring of 3 planes by bulk copies on "
                  "mbarriers, so no computing warp issues a copy or waits at a block barrier a plane; gains where "
                  "planes' barrier a plane, not its L2 reads, kept it from the copy bandwidth (the sweep: star_2/512^3 "
                  "f64 78.7% of copy against planes' 72.0% and the admitted kernel's 75.7%).")
    return (f"planes+bulk+producer: shared plane ring filled by a producer warp's bulk copies, z arms in registers, "
            f"{launch['tile'][0]}x{launch['tile'][1]} tiles, {launch['tile'][2]} planes a block", launch, hypothesis, source)


# to_lanes: a vector of V elements into acc_t lanes; from_lanes: back, rounded to the element type.
_LANES = {
    "f32": """__device__ __forceinline__ void to_lanes(const vec_t w, acc_t* v) { v[0] = w.x; v[1] = w.y; v[2] = w.z; v[3] = w.w; }
__device__ __forceinline__ vec_t from_lanes(const acc_t* v) { vec_t w; w.x = v[0]; w.y = v[1]; w.z = v[2]; w.w = v[3]; return w; }""",
    "f64": """__device__ __forceinline__ void to_lanes(const vec_t w, acc_t* v) { v[0] = w.x; v[1] = w.y; }
__device__ __forceinline__ vec_t from_lanes(const acc_t* v) { vec_t w; w.x = v[0]; w.y = v[1]; return w; }""",
    "f16": """__device__ __forceinline__ void to_lanes(const vec_t w, acc_t* v)
{
    const __half2* h = reinterpret_cast<const __half2*>(&w);
    v[0] = __low2float(h[0]); v[1] = __high2float(h[0]); v[2] = __low2float(h[1]); v[3] = __high2float(h[1]);
}
__device__ __forceinline__ vec_t from_lanes(const acc_t* v)
{
    vec_t w;
    __half2* h = reinterpret_cast<__half2*>(&w);
    h[0] = __floats2half2_rn(v[0], v[1]); h[1] = __floats2half2_rn(v[2], v[3]);
    return w;
}""",
}

# cp.async's groups, as every ring of cp.async copies commits and waits for them (`planes`, `tcq`).
ASYNC_GROUPS = """__device__ __forceinline__ void commit_async() { asm volatile("cp.async.commit_group;" ::: "memory"); }
/* Until at most N of the most recently committed groups are still in flight. */
template <int N> __device__ __forceinline__ void wait_async() { asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory"); }
"""

# The text the bulk variant replaces, as the gated planes sources have it.
_PLANES = {
    "BARRIERS": "", "TAIL": "",
    "HELPERS": """#ifndef EMULATED_CP_ASYNC  /* tests/forge/cuda_emulation.py defines these with the same ordering rules */
/* One vector from global to shared memory without passing through a register (sm_80 and later). */
__device__ __forceinline__ void copy_async(vec_t* dst, const vec_t* src)
{
    asm volatile("{ .reg .u64 s; cvta.to.shared.u64 s, %0; cp.async.$CACHE.shared.global [s], [%1], $VB; }"
                 :: "l"(dst), "l"(src) : "memory");
}
""" + ASYNC_GROUPS + """#endif
""",
    "COPY_PLANE": """    /* Plane `plane` into buffer `buffer`: the cells rank, rank + THREADS, ... of the tile. */
    auto copy_plane = [&](int plane, int buffer) {
        vec_t* tile = ring + buffer * CELLS;
        const elem_t* src = u + (long)plane * sk;
#pragma unroll
        for (int m = 0; m < PER; ++m) {
            const int cell = rank + m * THREADS;
            const int gy = yb - R + cell / PITCH, gx = xb + (cell % PITCH - NX) * V;
            if (cell >= CELLS || gy < 0 || gy >= ny) continue;  /* rows outside feed no stored output */
            if (vec) {
                if (gx >= 0 && gx < nx) copy_async(tile + cell, reinterpret_cast<const vec_t*>(src + (long)gy * nx + gx));
            } else {
                elem_t* lane = reinterpret_cast<elem_t*>(tile + cell);
#pragma unroll
                for (int i = 0; i < V; ++i) lane[i] = (gx + i >= 0 && gx + i < nx) ? src[(long)gy * nx + gx + i] : (elem_t)0;
            }
        }
    };

""",
    "PROLOGUE": """#pragma unroll
    for (int s = 0; s < NB - 1; ++s) {
        if (s < planes) copy_plane(zb - R + s, s);
        commit_async();  /* one group a plane, empty or not, so the wait below counts planes */
    }
""",
    "HEAD": """        wait_async<NB - 2>();  /* this thread's copies of plane p have landed */
        __syncthreads();       /* everyone's have, and everyone is done with plane p - 1's buffer */
        if (i + NB - 1 < planes) copy_plane(zb - R + i + NB - 1, fill);
        commit_async();
""",
}

_HEAD = """/* Hand-written H200 candidate for $case (forge/handwritten_planes.py): star_$R with the in-plane
 * arms from a ring of $NB shared input planes ($HOW, $V x-points a thread, 32 x $WARPS threads,
 * $L planes a block) and $ZARMS. Any shape: odd
 * extents or unaligned arrays take per-lane scalar loads into the same tile. */
${INCLUDE}typedef $ELEM elem_t;
typedef $ACC acc_t;
typedef $VEC vec_t;
$LANES
$HELPERS
extern "C" __global__ void __launch_bounds__($THREADS, $MIN_BLOCKS)
stencil(const elem_t* __restrict__ u, const elem_t* __restrict__ a, elem_t* __restrict__ y,
        const double* __restrict__ coef, int nz, int ny, int nx)
{
    constexpr int R = $R, V = $V, TX = 32, H = $H, L = $L, NB = $NB;
    constexpr int NX = (R + V - 1) / V;  /* the x halo in whole vectors, so every copy stays aligned */
    constexpr int PITCH = TX + 2 * NX, CELLS = PITCH * (H + 2 * R), THREADS = TX * H;
    constexpr int PER = (CELLS + THREADS - 1) / THREADS;  /* tile cells a thread copies a plane */
    extern __shared__ vec_t ring[];  /* [NB][H + 2R][PITCH] vectors: input planes p .. p + NB - 1 */
$BARRIERS    const int tx = threadIdx.x, ty = threadIdx.y, rank = ty * TX + tx;
    const int xb = blockIdx.x * TX * V, yb = blockIdx.y * H;  /* the block's first output column, row */
    const int zb = R + blockIdx.z * L, ze = min(zb + L, nz - R);
    if (xb >= nx - R || yb >= ny - R || zb >= ze) return;  /* the whole block, before any barrier */
    const long sk = (long)nx * ny;
    const bool vec = nx % V == 0 && (((unsigned long long)u | (unsigned long long)y) % sizeof(vec_t)) == 0;
    acc_t c[R + 1];
#pragma unroll
    for (int d = 0; d <= R; ++d) c[d] = (acc_t)coef[d];

$COPY_PLANE    const int planes = ze - zb + 2 * R;  /* input planes zb - R .. ze + R - 1 */
$PROLOGUE"""

_QUEUE = """    acc_t q[2 * R + 1][V];  /* q[R + d]: partial output of plane p + d */
#pragma unroll
    for (int s = 0; s < 2 * R + 1; ++s)
#pragma unroll
        for (int i = 0; i < V; ++i) q[s][i] = 0;
    const int gy = yb + ty, gx = xb + tx * V;
    const bool row_out = gy >= R && gy < ny - R && gx < nx - R && gx + V > R;
    const int own = (R + ty) * PITCH + NX + tx;
    int read = 0, fill = NB - 1;  /* buffers of plane p and of plane p + NB - 1 */
    for (int i = 0; i < planes; ++i) {
$HEAD        const vec_t* tile = ring + read * CELLS;
        const int p = zb - R + i;
        acc_t mid[V];
        to_lanes(tile[own], mid);
        if (p >= zb && p < ze) {  /* output p's in-plane arms */
            acc_t row[V + 2 * NX * V];  /* lanes -NX V .. V + NX V - 1 of the thread's row */
#pragma unroll
            for (int n = 0; n < NX; ++n) {
                to_lanes(tile[own - NX + n], row + n * V);
                to_lanes(tile[own + 1 + n], row + (NX + 1 + n) * V);
            }
#pragma unroll
            for (int l = 0; l < V; ++l) row[NX * V + l] = mid[l];
#pragma unroll
            for (int d = 1; d <= R; ++d) {
                acc_t up[V], down[V];
                to_lanes(tile[own - d * PITCH], up);
                to_lanes(tile[own + d * PITCH], down);
#pragma unroll
                for (int l = 0; l < V; ++l)
                    q[R][l] += c[d] * ((up[l] + down[l]) + (row[NX * V + l - d] + row[NX * V + l + d]));
            }
        }
#pragma unroll
        for (int l = 0; l < V; ++l) {
            q[R][l] += c[0] * mid[l];
#pragma unroll
            for (int d = 1; d <= R; ++d) { const acc_t t = c[d] * mid[l]; q[R - d][l] += t; q[R + d][l] += t; }
        }
""" + store_row("if (p - R >= zb && row_out) {  /* output p - R has all its terms */", "(p - R)", "q[0]") + """#pragma unroll
        for (int s = 0; s < 2 * R; ++s)
#pragma unroll
            for (int l = 0; l < V; ++l) q[s][l] = q[s + 1][l];
#pragma unroll
        for (int l = 0; l < V; ++l) q[2 * R][l] = 0;
$TAIL        read = read + 1 == NB ? 0 : read + 1;
        fill = fill + 1 == NB ? 0 : fill + 1;
    }
}
"""

_SOURCE = Template(_HEAD + _QUEUE)
_PULL_SOURCE = Template(_HEAD + PULL)
