"""The text of `planes` (forge/handwritten_planes.py) that fills its ring by the copy engine instead of every
thread's cp.async: `bulk` (session 32), thread 0 issuing the row copies on mbarriers, and `bulk` with
`producer` (session 33), a warp of its own issuing them; and the computing loop of `pull` (session 34), with the
output store both computing loops share. Kept apart so the planes module stays short; the H200 measurements
are in that module's docstring and docs/forge.md."""
from __future__ import annotations

def store_row(opening: str, plane: str, lanes: str) -> str:
    """The text that stores a thread's V output lanes `lanes` (acc_t) at output plane `plane` of its row, as whole
    vectors where aligned and inside, lane by lane otherwise; `opening`: the `if (...) {` line that guards it."""
    return f"""        {opening}
            const long o = (long){plane} * sk + (long)gy * nx + gx;
            if (vec && gx >= R && gx + V <= nx - R) {{
                *reinterpret_cast<vec_t*>(y + o) = from_lanes({lanes});
            }} else {{
#pragma unroll
                for (int l = 0; l < V; ++l)
                    if (gx + l >= R && gx + l < nx - R) y[o + l] = (elem_t){lanes}[l];
            }}
        }}
"""


# `bulk` (session 32): the ring filled by the copy engine, one bulk copy a tile row issued by thread 0, each
# buffer with an mbarrier that its copies complete (`full`) and one that every warp arrives at when done with
# it (`empty`), so no thread waits for the whole block at any plane.
BULK = {
    "HELPERS": """#ifndef EMULATED_BULK  /* tests/forge/cuda_emulation.py defines these with the same ordering rules */
typedef unsigned long long mbar_t;
__device__ __forceinline__ unsigned to_shared(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void bar_init(mbar_t* bar, unsigned count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(to_shared(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void bar_fence_init() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
/* One arrival that also expects `bytes` from the copy engine before the phase completes. */
__device__ __forceinline__ void bar_expect(mbar_t* bar, unsigned bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(to_shared(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void bar_arrive(mbar_t* bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(to_shared(bar)) : "memory");
}
/* Until the phase of parity `parity` has completed. */
__device__ __forceinline__ void bar_wait(mbar_t* bar, unsigned parity)
{
    asm volatile("{ .reg .pred done;\\n"
                 "WAIT: mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\\n"
                 "@!done bra WAIT; }" :: "r"(to_shared(bar)), "r"(parity) : "memory");
}
/* `bytes` (a multiple of 16, both ends 16-byte aligned) from global to shared memory by the copy engine. */
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, unsigned bytes, mbar_t* bar)
{
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 :: "r"(to_shared(dst)), "l"(src), "r"(bytes), "r"(to_shared(bar)) : "memory");
}
#endif
""",
    "BARRIERS": """    __shared__ mbar_t full[NB], empty[NB];  /* buffer b holds its plane; every warp is done with buffer b */
""",
    "COPY_PLANE": """    /* Plane `plane` into buffer `buffer`, once every warp is done with the plane it held (`reused`). On the
       vector path thread 0 copies each row of the tile in one bulk copy completing on full[buffer]; otherwise
       every thread copies its cells lane by lane and arrives there itself. */
    auto copy_plane = [&](int plane, int buffer, bool reused) {
        vec_t* tile = ring + buffer * CELLS;
        const elem_t* src = u + (long)plane * sk;
        if (vec && rank != 0) return;
        if (reused) bar_wait(&empty[buffer], ((plane - zb + R) / NB - 1) & 1);
        if (vec) {
            const int x0 = max(xb - NX * V, 0), x1 = min(xb + (TX + NX) * V, nx);  /* the tile's columns in the grid */
            const int y0 = max(yb - R, 0), y1 = min(yb + H + R, ny);  /* rows outside feed no stored output */
            const unsigned bytes = (unsigned)((x1 - x0) * sizeof(elem_t));
            bar_expect(&full[buffer], bytes * (unsigned)(y1 - y0));
            for (int gy = y0; gy < y1; ++gy)
                bulk_copy(tile + (gy - yb + R) * PITCH + (x0 - xb) / V + NX, src + (long)gy * nx + x0, bytes, &full[buffer]);
            return;
        }
#pragma unroll
        for (int m = 0; m < PER; ++m) {
            const int cell = rank + m * THREADS;
            const int gy = yb - R + cell / PITCH, gx = xb + (cell % PITCH - NX) * V;
            if (cell >= CELLS || gy < 0 || gy >= ny) continue;
            elem_t* lane = reinterpret_cast<elem_t*>(tile + cell);
#pragma unroll
            for (int i = 0; i < V; ++i) lane[i] = (gx + i >= 0 && gx + i < nx) ? src[(long)gy * nx + gx + i] : (elem_t)0;
        }
        bar_arrive(&full[buffer]);
    };

""",
    "PROLOGUE": """    if (rank == 0) {
        for (int b = 0; b < NB; ++b) { bar_init(&full[b], vec ? 1 : THREADS); bar_init(&empty[b], THREADS / 32); }
        bar_fence_init();
    }
    __syncthreads();  /* the barriers are set up before any thread arrives */
    for (int s = 0; s < NB - 1 && s < planes; ++s) copy_plane(zb - R + s, s, false);
""",
    "HEAD": """        if (i + NB - 1 < planes) copy_plane(zb - R + i + NB - 1, fill, i >= 1);
        bar_wait(&full[read], (i / NB) & 1);  /* plane p has landed */
""",
    "TAIL": """        __syncwarp();
        if ((rank & 31) == 0) bar_arrive(&empty[read]);  /* this warp is done with plane p's buffer */
""",
}

# `bulk` with `producer` (session 33): one more warp, the producer, which only fills the ring (its 32 lanes
# issue the tile's row copies, waiting on a buffer's `empty` mbarrier for the H computing warps), so no
# computing thread issues a copy or waits for another warp; bulk's thread 0 did both, and lost to planes.
PRODUCER = {
    **BULK,
    "COPY_PLANE": """    /* Plane `plane` into buffer `buffer` by the producer warp, once every computing warp is done with the plane
       it held (`reused`). On the vector path its lanes issue the tile's row copies, completing on full[buffer];
       otherwise they copy its cells lane by lane and each arrives there itself. */
    auto copy_plane = [&](int plane, int buffer, bool reused) {
        vec_t* tile = ring + buffer * CELLS;
        const elem_t* src = u + (long)plane * sk;
        if (reused) bar_wait(&empty[buffer], ((plane - zb + R) / NB - 1) & 1);
        if (vec) {
            const int x0 = max(xb - NX * V, 0), x1 = min(xb + (TX + NX) * V, nx);  /* the tile's columns in the grid */
            const int y0 = max(yb - R, 0), y1 = min(yb + H + R, ny);  /* rows outside feed no stored output */
            const unsigned bytes = (unsigned)((x1 - x0) * sizeof(elem_t));
            if (tx == 0) bar_expect(&full[buffer], bytes * (unsigned)(y1 - y0));
            __syncwarp();  /* the bytes are expected before any copy completes */
            for (int gy = y0 + tx; gy < y1; gy += TX)
                bulk_copy(tile + (gy - yb + R) * PITCH + (x0 - xb) / V + NX, src + (long)gy * nx + x0, bytes, &full[buffer]);
            return;
        }
        for (int cell = tx; cell < CELLS; cell += TX) {
            const int gy = yb - R + cell / PITCH, gx = xb + (cell % PITCH - NX) * V;
            if (gy < 0 || gy >= ny) continue;
            elem_t* lane = reinterpret_cast<elem_t*>(tile + cell);
#pragma unroll
            for (int i = 0; i < V; ++i) lane[i] = (gx + i >= 0 && gx + i < nx) ? src[(long)gy * nx + gx + i] : (elem_t)0;
        }
        bar_arrive(&full[buffer]);
    };

""",
    "PROLOGUE": """    if (rank == 0) {
        for (int b = 0; b < NB; ++b) { bar_init(&full[b], vec ? 1 : TX); bar_init(&empty[b], H); }
        bar_fence_init();
    }
    __syncthreads();  /* the barriers are set up before any thread arrives */
    if (ty == H) {  /* the producer warp: every plane of the chunk, at most NB ahead of the slowest computing warp */
        for (int i = 0; i < planes; ++i) copy_plane(zb - R + i, i % NB, i >= NB);
        return;
    }
""",
    "HEAD": """        bar_wait(&full[read], (i / NB) & 1);  /* plane p has landed */
""",
}

# `pull` (session 34, with `producer`): the computing loop without the queue of 2R + 1 partial outputs. At plane p
# (i planes into the chunk) a thread sums output p - R whole, its in-plane arms from plane p - R's buffer and its z
# arms from the buffers of planes p - 2R .. p, then its warp releases plane p - 2R's buffer, which no later output
# reads. A thread holds one output's V lanes instead of (2R + 1) V; the ring needs 2R + 1 planes besides the ones in
# flight, so `stages` > 2R + 1.
PULL = """    const int gy = yb + ty, gx = xb + tx * V;
    const bool row_out = gy >= R && gy < ny - R && gx < nx - R && gx + V > R;
    const int own = (R + ty) * PITCH + NX + tx;
    for (int i = 0; i < planes; ++i) {
        bar_wait(&full[i % NB], (i / NB) & 1);  /* plane p = zb - R + i has landed */
        if (i < 2 * R) continue;  /* output p - R needs planes p - 2R .. p */
        const int o_plane = zb - 2 * R + i;  /* = p - R, an output plane of the chunk */
        const vec_t* tile = ring + ((i - R) % NB) * CELLS;
        acc_t out[V], row[V + 2 * NX * V];  /* row: lanes -NX V .. V + NX V - 1 of the thread's row */
#pragma unroll
        for (int n = 0; n < NX; ++n) {
            to_lanes(tile[own - NX + n], row + n * V);
            to_lanes(tile[own + 1 + n], row + (NX + 1 + n) * V);
        }
        to_lanes(tile[own], row + NX * V);
#pragma unroll
        for (int l = 0; l < V; ++l) out[l] = c[0] * row[NX * V + l];
#pragma unroll
        for (int d = 1; d <= R; ++d) {
            acc_t up[V], down[V], below[V], above[V];
            to_lanes(tile[own - d * PITCH], up);
            to_lanes(tile[own + d * PITCH], down);
            to_lanes(ring[((i - R - d) % NB) * CELLS + own], below);
            to_lanes(ring[((i - R + d) % NB) * CELLS + own], above);
#pragma unroll
            for (int l = 0; l < V; ++l)
                out[l] += c[d] * (((up[l] + down[l]) + (row[NX * V + l - d] + row[NX * V + l + d])) + (below[l] + above[l]));
        }
""" + store_row("if (row_out) {", "o_plane", "out") + """        __syncwarp();
        if (tx == 0) bar_arrive(&empty[(i - 2 * R) % NB]);  /* this warp is done with plane p - 2R's buffer */
    }
}
"""
