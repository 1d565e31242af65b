"""`tcq`: box_R, star_R, varcoef_star_1 and their 2-D kinds in f16 with each input plane's in-plane products on
the tensor cores (`mma.sync` m16n8k16, f16 inputs, f32 accumulation: the bound's precision class), the z direction
through a queue of partial output planes as in the plane-queue kernels (issue 16).

Why. Every f16 single-step kernel so far computes in f32 on the CUDA cores, converting each half
and multiplying it on its own, and star_4/512^3 f16 is issue-bound there: 51 instructions a point
(26 of them the plane queue's adds and multiply-adds, 11 conversions), 74% of issue slots busy and
37% of the copy bandwidth (docs/forge.md, sessions 29-32); box_2/512^3 f16, 125 products a point,
is compute-bound at 37%. An m16n8k16 does 2,048 multiply-adds in one instruction and reads halves as
they are, so a kernel whose in-plane products are matrix products issues a few instructions a point.

The design. A block of WX x WY warps owns an output tile of 16 WX x 16 WY points (x, y), a warp a
16 x 16 part of it, and marches along z over L output planes. Each input plane's tile, with a
halo of R rows and 4 columns (16-byte cp.async of 8 halves), goes into a ring of NB shared
buffers, NB - 1 planes ahead (as `planes`, forge/handwritten_planes.py). For one plane, the
products that output row y and column x takes from input row y + dy are a matrix product: the
16 rows y0 + dy .. y0 + dy + 15 by a window of 16 columns x - 4 .. x + 11 (an A fragment, one
`ldmatrix.x4`), times a 16 x 8 Toeplitz matrix B[j][i] = w(dz, dy, dx = j - 4 - i) for |dx| <= R,
zero elsewhere (the fragment of 8 outputs x .. x + 7; the same B for every group of 8, so its two
registers a lane are built once). Since a case's weight depends on (|dz|, |dy|, |dx|) only (its
coefficient classes), a plane needs one B a nonzero (|dz|, |dy|) pair: 4 for box_1, 9 for box_2,
R + 1 + R for star_R (the in-plane cross at dz = 0, the centre alone at |dz| > 0). For each dy the
plane's A is loaded once and multiplied by the B of every |dz| that has one; dz = 0 accumulates
straight into its queue slot (the MMA's C operand), each |dz| > 0 either straight into the slots of
outputs p - |dz| and p + |dz| too (`direct`: two MMAs) or into a scratch then added to both (one MMA and
16 adds a lane). The queue's slots keep their registers: the plane loop is unrolled by 2R + 1, so an
output's slot is fixed at compile time instead of shifted a plane. The slot of output p - R is then complete:
converted to halves and stored as pairs.

What it costs, a 256-point warp tile and plane: box_1 18 MMAs, box_2 30 (50 `direct`), star_4 34, star_1 10,
and 2 `ldmatrix` a dy. Counted in the SASS of the main loop with the aligned paths only (`nvcc -arch=sm_90`,
nvdisasm; the per-half fallbacks of edge tiles left out; docs/benchmarks/sass_designs_s37.json): 13.8 instructions
a point for box_1, 18.9 for box_2, 12.8 for star_1 and 17.6 for star_4, against 31 (box_1) and 51 (star_4) in the
admitted kernels' loops
(rows8+lean's vector loop, counted the same way: docs/benchmarks/sass_f16_next_s31.json). Where each copy and store
goes is worked out once a thread (a 32-bit shared address; 16-byte cp.async of whole cells: the tile starts 4
columns left of the block's first output on a 16-byte boundary, so block bx owns outputs from 16 WX bx - 4, and
the launch's tile is 4 columns narrower than the block's so that the grid reaches nx - R). At the copy rate
(1.07e12 f16 points/s on 132 SMs) box_2 needs about 0.5 m16n8k16 a clock an SM; the H200's dense f16 peak (989
TFLOP/s, reached by wgmma) is about 0.9, and `mma.sync` gets less of it, so box_2 may end up bound by the tensor cores.
Precision: the weights are rounded to halves (a relative 2^-11 each), which the products then carry
at f32; the output is rounded to a half once, as the bound's. The emulation's errors against the
straightforward kernel's (the gate's floor rule allows 5x) are in tests/forge/test_handwritten_tensor.py.

2-D cases (star2d_R, box2d_R) are the same kernel with one plane and no queue (z radius 0): a block loads its tile,
waits and computes it, and several blocks an SM overlap one another's loads.

Odd shapes and unaligned arrays take per-half loads into the same tile and per-half stores.
"""
from __future__ import annotations

import math
from string import Template

from measurement.harness.cases import Case

from .handwritten_planes import ASYNC_GROUPS, least_idle_chunk

HALO = 4  # tile columns each side of the output tile: a 16-column window around 8 outputs reaches 4 each way


def check_case(case: Case) -> None:
    stencil = case.stencil
    if (case.precision != "f16" or stencil.time_steps != 1 or stencil.family not in ("box", "star")
            or stencil.radius > (2 if stencil.family == "box" else HALO)):
        raise ValueError(f"{case.id}: tcq is for box_R and box2d_R (R <= 2), star_R and star2d_R (R <= {HALO}) and "
                         "varcoef_star_1 in f16")


def matrices(case: Case) -> dict[tuple[int, int], list[int]]:
    """(|dz|, |dy|) -> the class of each dx in -R..R (-1 where the stencil has no such offset), for every pair
    with an offset: the B matrices a plane multiplies by. ValueError if a weight depended on a sign."""
    r = case.stencil.radius
    found: dict[tuple[int, int], list[int]] = {}
    seen: dict[tuple[int, int, int], int] = {}
    for offset, k in zip(case.stencil.offsets, case.stencil.class_index):
        dz, dy, dx = (0, *offset) if len(offset) == 2 else offset  # a 2-D case: one plane, dz = 0
        key = (abs(dz), abs(dy), abs(dx))
        if seen.setdefault(key, k) != k:
            raise ValueError(f"{case.id}: offsets {key} differ in class by sign; tcq needs symmetric weights")
        found.setdefault((abs(dz), abs(dy)), [-1] * (2 * r + 1))[dx + r] = k
    return dict(sorted(found.items()))


def z_radius(case: Case) -> int:
    """The queue's reach along z: R in 3-D; 0 in 2-D, where a block's one plane is its own output."""
    return case.stencil.radius if case.stencil.dims == 3 else 0


def shared_bytes(case: Case, warps_x: int, warps_y: int, stages: int) -> int:
    return stages * (16 * warps_y + 2 * case.stencil.radius) * (16 * warps_x + 2 * HALO) * 2


def default_chunk(case: Case, warps_x: int, warps_y: int) -> int:
    """Output planes a block as `planes` chooses them (two blocks an SM assumed); 1 in 2-D."""
    if case.stencil.dims == 2:
        return 1
    nz, ny, nx = case.shape
    return least_idle_chunk(case, math.ceil(nx / (16 * warps_x)) * math.ceil(ny / (16 * warps_y)), 2)


def render(case: Case, warps_x: int = 4, warps_y: int = 2, chunk: int | None = None, stages: int = 4,
           direct: bool | None = None, cache: str = "cg") -> tuple[str, dict, str]:
    """(source, launch, hypothesis) of `tcq` for a box_R or star_R f16 case: blocks of `warps_x` x `warps_y`
    warps (a 16 x 16 output tile each), `chunk` output planes a block, a ring of `stages` input planes.
    `direct`: each |dz| > 0 product accumulates straight into both its outputs' queue slots (two MMAs where
    one and 16 adds a lane would do); by default where that adds few MMAs (star_R: the centre alone at
    |dz| > 0; R = 1), not for box_2 (20 more on 30). `cache`: the copies' cache operator, `cg` (L2 only) or `ca`
    (through L1, whose coalescing may hand the L2 whole lines: `planes`' 16-byte `cg` copies read 2.75x its input from
    the L2 for a 1.41x tile, session 33, a cause not measured)."""
    check_case(case)
    if cache not in ("cg", "ca"):
        raise ValueError(f"cache {cache!r}: cg or ca")
    if not 2 <= stages <= 8 or warps_x < 1 or warps_y < 1 or 32 * warps_x * warps_y > 1024:
        raise ValueError(f"stages {stages}, {warps_x} x {warps_y} warps: 2 to 8 buffers, at most 32 warps a block")
    if shared_bytes(case, warps_x, warps_y, stages) > 227 * 1024:
        raise ValueError(f"{shared_bytes(case, warps_x, warps_y, stages)} bytes of shared memory: at most 227 KiB")
    r, rz = case.stencil.radius, z_radius(case)
    chunk = chunk or default_chunk(case, warps_x, warps_y)
    if rz == 0 and chunk != 1:
        raise ValueError(f"{case.id}: a 2-D case has one plane: chunk 1")
    if direct is None:
        direct = case.stencil.family == "star" or r == 1
    found = matrices(case)
    index = {key: m for m, key in enumerate(found)}
    products, mmas = [], 0
    for dy in range(-r, r + 1):
        lines = [f"        {{  /* input rows y + {dy}: columns x - 4 .. x + 11 of both groups of 8 outputs */",
                 "            unsigned a[2][4];",
                 f"            ldsm_x4(a[0], tile + a_at + ({dy}) * PITCH);",
                 f"            ldsm_x4(a[1], tile + a_at + ({dy}) * PITCH + 8);"]
        for kz in range(rz + 1):
            m = index.get((kz, abs(dy)))
            if m is None:
                continue
            slots = (["(ph + RZ) % N"] if kz == 0 else [f"(ph + RZ - {kz}) % N", f"(ph + RZ + {kz}) % N"] if direct else [])
            targets = [f"qz[{slot}]" for slot in slots] or [f"acc[{kz - 1}]"]
            for into in targets:
                lines.append(f"            mma16816({into}[0], a[0], b[{m}]); mma16816({into}[1], a[1], b[{m}]);"
                             f"  /* |dz| = {kz}, |dy| = {abs(dy)} */")
                mmas += 2
        products.append("\n".join(lines + ["        }"]))
    scratch = rz > 0 and not direct
    classes = ", ".join("{" + ", ".join(map(str, row)) + "}" for row in found.values())
    source = _SOURCE.substitute(
        case=case.id, R=r, RZ=rz, WX=warps_x, WY=warps_y, L=chunk, NB=stages, THREADS=32 * warps_x * warps_y,
        M=len(found), MIN_BLOCKS=max(1, 16 // (warps_x * warps_y)),  # 16 warps an SM at least: at most 128 registers
        HELPERS=_HELPERS.replace("CACHE", cache), CLASSES=classes, PRODUCTS="\n".join(products),
        ACC=_ACC if scratch else "", ZERO=_ZERO if scratch else "", SPREAD=_SPREAD if scratch else "",
        **(_VARIABLE if case.stencil.variable_coefficient else _CONSTANT))
    # The tile's x origin is 4 columns left of a 16-byte boundary so that its copies are whole 16-byte cells: block bx
    # owns outputs 16 WX bx - 4 .., so the grid needs a block more than nx / (16 WX) where that does not reach nx - R.
    launch = {"block": [32 * warps_x * warps_y, 1, 1], "tile": [16 * warps_x - HALO, 16 * warps_y, chunk],
              "shared_bytes": shared_bytes(case, warps_x, warps_y, stages)}
    reads = ((16 * warps_y + 2 * r) / (16 * warps_y) * (16 * warps_x + 2 * HALO) / (16 * warps_x)
             * (chunk + 2 * rz) / chunk)
    z = f" and the z arms through a queue of {2 * rz + 1} partial planes; " if rz else ", one tile a block; "
    hypothesis = (f"{case.id}: the in-plane products on the tensor cores ({mmas} m16n8k16 a 16 x 16 warp tile and "
                  f"plane, f16 weights, f32 accumulation){z}{16 * warps_x} x {16 * warps_y} tiles, {chunk} "
                  f"plane{'s' if chunk > 1 else ''} a block, {stages} shared planes by 16-byte cp.async ({reads:.2f}x "
                  "the input read from L2): a few instructions a point where the f32 plane queue issues 30-50 "
                  "(issue-bound, docs/forge.md); expected over the fair f16 kernel and the admitted one.")
    return source, launch, hypothesis


_HELPERS = r"""#ifndef EMULATED_CP_ASYNC  /* tests/forge/cuda_emulation.py defines these with the same ordering rules */
/* A place in shared memory as cp.async takes it: a 32-bit shared address, worked out once (from a generic pointer
   the compiler would fetch the shared window's base again at every copy). */
typedef unsigned shared_at;
__device__ __forceinline__ shared_at shared_address(vec_t* p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ shared_at cells_on(shared_at at, int cells) { return at + cells * (unsigned)sizeof(vec_t); }
/* 16 bytes from global to shared memory without passing through a register. */
__device__ __forceinline__ void copy_async(shared_at dst, const vec_t* src)
{
    asm volatile("cp.async.CACHE.shared.global [%0], [%1], 16;" :: "r"(dst), "l"(src) : "memory");
}
""" + ASYNC_GROUPS + r"""#else
typedef vec_t* shared_at;
inline shared_at shared_address(vec_t* p) { return p; }
inline shared_at cells_on(shared_at at, int cells) { return at + cells; }
#endif
#ifndef EMULATED_MMA  /* tests/forge/cuda_emulation.py defines these as warp-collective operations */
/* Four 8 x 8 matrices of halves from shared memory, lanes 0-7 giving the rows of the first, 8-15 of the second,
   ...: a lane gets row lane / 4, columns 2 (lane % 4) and + 1 of each, as an m16n8k16 A fragment wants. */
__device__ __forceinline__ void ldsm_x4(unsigned* r, const __half* row)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"((unsigned)__cvta_generic_to_shared(row)) : "memory");
}
/* d (16 x 8, f32) += a (16 x 16, f16, row-major) b (16 x 8, f16, column-major). */
__device__ __forceinline__ void mma16816(float* d, const unsigned* a, const unsigned* b)
{
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
#endif
/* Two halves in one register, the first in the low 16 bits (NVRTC declares no memcpy to pun with). */
__device__ __forceinline__ unsigned half_pair(float low, float high)
{
    return (unsigned)__half_as_ushort(__float2half(low)) | (unsigned)__half_as_ushort(__float2half(high)) << 16;
}
"""
# varcoef_star_1: the sum times the point's own coefficient a, in f32, before the one rounding to a half (as the bound)
_VARIABLE = {"WEIGH_PAIR": ("                        const float2 w = "
                           "__half22float2(*reinterpret_cast<const __half2*>(a + (at - y)));\n"),
             "BY_LOW": " * w.x", "BY_HIGH": " * w.y", "BY_FIRST": " * __half2float(a[at - y])",
             "BY_SECOND": " * __half2float(a[at - y + 1])"}
_CONSTANT = dict.fromkeys(_VARIABLE, "")
_ACC = "    float acc[RZ][2][4];  /* |dz| = 1 .. RZ: this plane's products, added to outputs p -+ |dz| */\n"
_ZERO = """#pragma unroll
        for (int d = 0; d < RZ; ++d)
#pragma unroll
            for (int c = 0; c < 2; ++c)
#pragma unroll
                for (int e = 0; e < 4; ++e) acc[d][c][e] = 0.f;
"""
_SPREAD = """#pragma unroll
        for (int d = 1; d <= RZ; ++d)
#pragma unroll
            for (int c = 0; c < 2; ++c)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    qz[(ph + RZ - d) % N][c][e] += acc[d - 1][c][e];
                    qz[(ph + RZ + d) % N][c][e] += acc[d - 1][c][e];
                }
"""

_SOURCE = Template("""/* Hand-written H200 candidate for $case (forge/handwritten_tensor.py): the in-plane products of each input
 * plane on the tensor cores (m16n8k16, f16 x f16 -> f32), $WX x $WY warps of 16 x 16 outputs, $L planes a block,
 * a ring of $NB shared planes, the z arms through a queue of partial planes. */
#include <cuda_fp16.h>
typedef __half elem_t;
typedef uint4 vec_t;  /* eight halves: one cp.async */
$HELPERS
extern "C" __global__ void __launch_bounds__($THREADS, $MIN_BLOCKS)
stencil(const elem_t* __restrict__ u, const elem_t* __restrict__ a, elem_t* __restrict__ y,
        const double* __restrict__ coef, int nz, int ny, int nx)
{
    constexpr int R = $R, RZ = $RZ, WX = $WX, WY = $WY, L = $L, NB = $NB, M = $M, THREADS = $THREADS, N = 2 * RZ + 1;
    /* R: the in-plane radius; RZ: the z radius (0 for a 2-D case: one plane, its own output) */
    constexpr int TXO = 16 * WX, TYO = 16 * WY, PITCH = TXO + 8, ROWS = TYO + 2 * R;  /* tile column 0: x0 - 4 */
    constexpr int CELLS = ROWS * PITCH / 8, PER = (CELLS + THREADS - 1) / THREADS;  /* cells of eight halves */
    constexpr int CLS[M][2 * R + 1] = {$CLASSES};  /* each B matrix's class a dx, -1: no offset */
    extern __shared__ vec_t ring[];  /* [NB][ROWS][PITCH / 8]: input planes p .. p + NB - 1 */
    const int rank = threadIdx.x, lane = rank % 32, warp = rank / 32, wx = warp % WX, wy = warp / WX;
    const int x0 = blockIdx.x * TXO - 4, y0 = blockIdx.y * TYO;  /* outputs x0 .. x0 + TXO - 1: x0 - 4 is 16-byte aligned */
    const int zb = RZ + blockIdx.z * L, ze = min(zb + L, nz - RZ);
    if (x0 >= nx - R || y0 >= ny - R || zb >= ze) return;  /* the whole block, before any barrier */
    const long sk = (long)nx * ny;
    const bool vec = nx % 8 == 0 && (unsigned long long)u % 16 == 0;
    const bool pairs = nx % 2 == 0 && ((unsigned long long)y | (unsigned long long)a) % 4 == 0;

    /* B fragments: lane (g, q) holds B[2q, 2q + 1][g] and B[2q + 8, 2q + 9][g], B[j][i] the weight of dx = j - 4 - i */
    const int g = lane / 4, q = lane % 4;
    auto weight = [&](int m, int dx) -> float {
        const int k = dx < -R || dx > R ? -1 : CLS[m][dx + R];
        return k < 0 ? 0.f : (float)coef[k];
    };
    unsigned b[M][2];
#pragma unroll
    for (int m = 0; m < M; ++m) {
        b[m][0] = half_pair(weight(m, 2 * q - 4 - g), weight(m, 2 * q - 3 - g));
        b[m][1] = half_pair(weight(m, 2 * q + 4 - g), weight(m, 2 * q + 5 - g));
    }

    /* The tile's cells this thread copies, cells rank, rank + THREADS, ...: the same every plane, so where each comes
       from in a plane is worked out once. A cell wholly inside the grid (and aligned) is one cp.async; any other is
       copied half by half, zeros outside the grid. */
    const vec_t* from[PER];  /* in plane 0 */
    bool whole[PER];
#pragma unroll
    for (int m = 0; m < PER; ++m) {
        const int cell = rank + m * THREADS, gy = y0 - R + cell / (PITCH / 8), gx = x0 - 4 + cell % (PITCH / 8) * 8;
        whole[m] = cell < CELLS && vec && gy >= 0 && gy < ny && gx >= 0 && gx + 8 <= nx;
        from[m] = reinterpret_cast<const vec_t*>(u + (whole[m] ? (long)gy * nx + gx : 0));
    }
    const shared_at to = shared_address(ring + rank);
    auto copy_plane = [&](int plane, int buffer) {
        const long offset = (long)plane * sk / 8;  /* plane's cells: sk is a multiple of 8 wherever a cell is whole */
#pragma unroll
        for (int m = 0; m < PER; ++m) {
            const int cell = rank + m * THREADS;
            if (whole[m]) {
                copy_async(cells_on(to, buffer * CELLS + m * THREADS), from[m] + offset);
            } else if (cell < CELLS) {
                const int gy = y0 - R + cell / (PITCH / 8), gx = x0 - 4 + cell % (PITCH / 8) * 8;
                const elem_t* src = u + (long)plane * sk + (long)gy * nx + gx;
                elem_t* halves = reinterpret_cast<elem_t*>(ring + buffer * CELLS + cell);
#pragma unroll
                for (int i = 0; i < 8; ++i)
                    halves[i] = gy >= 0 && gy < ny && gx + i >= 0 && gx + i < nx ? src[i] : __float2half(0.f);
            }
        }
    };
    const int planes = ze - zb + 2 * RZ;  /* input planes zb - RZ .. ze + RZ - 1 */
#pragma unroll
    for (int s = 0; s < NB - 1; ++s) {
        if (s < planes) copy_plane(zb - RZ + s, s);
        commit_async();  /* one group a plane, empty or not, so the wait below counts planes */
    }

    float qz[N][2][4];  /* partial output planes, two groups of 8 columns each in the C layout */
#pragma unroll
    for (int s = 0; s < N; ++s)
#pragma unroll
        for (int c = 0; c < 2; ++c)
#pragma unroll
            for (int e = 0; e < 4; ++e) qz[s][c][e] = 0.f;
$ACC    /* this lane's outputs: rows g and g + 8 of the warp's tile, columns 2q, 2q + 1 of each group of 8; `inside`: all
       of them in the written region, stored as pairs */
    const int first_y = y0 + 16 * wy + g, first_x = x0 + 16 * wx + 2 * q;
    elem_t* const rows[2] = {y + (long)first_y * nx + first_x, y + (long)(first_y + 8) * nx + first_x};  /* in plane 0 */
    const bool inside = pairs && first_y >= R && first_y + 8 < ny - R && first_x >= R && first_x + 10 <= nx - R;
    /* this lane's ldmatrix row: lanes 0-7 rows 0-7 and 8-15 rows 8-15 of the warp's tile, columns x - 4 ..; lanes
       16-31 the same rows 8 columns on */
    const int a_at = (16 * wy + R + (lane >> 3 & 1) * 8 + (lane & 7)) * PITCH + 16 * wx + (lane >> 4) * 8;
    int read = 0, fill = NB - 1;  /* buffers of plane p and of plane p + NB - 1 */
    /* The queue's slot of output p - RZ + s is qz[(ph + s) % N] at phase ph of N planes unrolled: a slot keeps its
       registers while the outputs move through it (no shifting). */
    for (int i0 = 0; i0 < planes; i0 += N) {
#pragma unroll
    for (int ph = 0; ph < N; ++ph) {
    const int i = i0 + ph;
    if (i < planes) {  /* the same for the whole block: the barrier below is reached by all or none */
        wait_async<NB - 2>();  /* this thread's copies of plane p have landed */
        __syncthreads();       /* everyone's have, and everyone is done with plane p - 1's buffer */
        if (i + NB - 1 < planes) copy_plane(zb - RZ + i + NB - 1, fill);
        commit_async();
        const int p = zb - RZ + i;
        const elem_t* tile = reinterpret_cast<const elem_t*>(ring + read * CELLS);
$ZERO$PRODUCTS
$SPREAD        float (&done)[2][4] = qz[ph % N];  /* output p - RZ: all its terms are in */
        if (p - RZ >= zb) {  /* rows g and g + 8, columns 2q, 2q + 1 of each group of 8 */
            const long plane = (long)(p - RZ) * sk;
#pragma unroll
            for (int c = 0; c < 2; ++c)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    elem_t* at = rows[h] + plane + 8 * c;
                    const float low = done[c][2 * h], high = done[c][2 * h + 1];
                    if (inside) {
$WEIGH_PAIR                        *reinterpret_cast<__half2*>(at) = __floats2half2_rn(low$BY_LOW, high$BY_HIGH);
                    } else {
                        const int gy = first_y + 8 * h, gx = first_x + 8 * c;
                        if (gy < R || gy >= ny - R) continue;
                        if (gx >= R && gx < nx - R) at[0] = __float2half(low$BY_FIRST);
                        if (gx + 1 >= R && gx + 1 < nx - R) at[1] = __float2half(high$BY_SECOND);
                    }
                }
        }
#pragma unroll
        for (int c = 0; c < 2; ++c)
#pragma unroll
            for (int e = 0; e < 4; ++e) done[c][e] = 0.f;  /* now the slot of output p + RZ + 1 */
        read = read + 1 == NB ? 0 : read + 1;
        fill = fill + 1 == NB ? 0 : fill + 1;
    }
    }
    }
}
""")
