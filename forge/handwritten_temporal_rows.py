"""`pipe` with R rows a thread (`pipe_rows`): the 3.5-D pipeline of forge/handwritten_temporal.py
where each thread owns R consecutive rows of V = 4 points instead of one.

Why: Nsight Compute on the pipe of session 27 (docs/benchmarks/ncu/ncu_pipe_*_s27.txt) found it
bound by instruction issue (issue slots busy 72-77%, IPC 3.1-3.2 of 4), not by DRAM (25-30% at
T = 4) nor, once the x neighbours moved to warp shuffles, by shared-memory bank conflicts. Per
step and row a thread issues two 16-byte shared loads (the rows above and below), a 16-byte shared
store and the address arithmetic around them. With R rows a thread, the rows between its first
and last take their y neighbours from the thread's own registers: two shared loads a step for R
rows instead of 2R, and the row-independent work (barrier, step guards, plane addresses) shared
by R rows. What it costs: the register queue grows to 2 T R V floats (64 at T = 4, R = 2), so
fewer threads fit an SM; the R rows are independent chains the scheduler can interleave.

Everything else is the pipe's: the double-buffered shared plane per step (one barrier an
iteration), the x halo rounded to whole vectors, the tile's edge computed from garbage and never
stored, warps skipping the steps none of their rows needs (`skip`), x neighbours by shuffles where
a row is a power of two lanes (else from the shared row, as the gated pipe does).
"""
from __future__ import annotations

from measurement.harness.cases import Case

from .handwritten_temporal import V, check_parameters, shared_bytes, shuffles_fit, x_halo
from .handwritten_temporal_source import VECTOR_HELPERS


def render_pipe_rows(case: Case, width: int, height: int, chunk: int, rows: int = 2,
                     skip: bool = True) -> tuple[str, dict, str]:
    """(source, launch, hypothesis) of the pipeline with `rows` rows a thread, for diamond_tsT
    (T > 1) in f32."""
    check_parameters(case, width, height, chunk)
    t = case.stencil.time_steps
    if t < 2 or case.precision != "f32":
        raise ValueError(f"{case.id}: pipe_rows is for diamond_tsT with T > 1 in f32")
    if rows < 1 or height % rows:
        raise ValueError(f"tile {width}x{height}: the height must be a multiple of {rows} rows a thread")
    tx, ty = width // V, height // rows
    shuffle = shuffles_fit(tx, ty)
    source = _SOURCE.format(
        T=t, R=rows, TX=tx, TY=ty, L=chunk, THREADS=tx * ty, case=case.id, W=width, H=height,
        OX=width - 2 * x_halo(t), OY=height - 2 * t, VECTOR=VECTOR_HELPERS["f32"],
        LIVE="row_last >= s && row_first < H - s" if skip else "true",
        NEIGHBOURS=_SHUFFLED if shuffle else _SHARED)
    launch = {"block": [tx, ty, 1], "tile": [width - 2 * x_halo(t), height - 2 * t, chunk],
              "shared_bytes": shared_bytes(t, width, height)}
    hypothesis = (f"{case.id}: the {t} steps pipelined on chip along z with {rows} rows a thread ({width}x{height} "
                  f"tiles, {chunk} planes a block{', x neighbours by shuffles' if shuffle else ''}"
                  f"{', idle warps skip steps' if skip else ''}): the rows between a thread's first and last "
                  "take their y neighbours from registers, fewer instructions a point-step where Nsight Compute "
                  "found the pipe bound by instruction issue (docs/benchmarks/ncu/ncu_pipe_*_s27.txt).")
    return source, launch, hypothesis


_SHUFFLED = """                    const float west = __shfl_up_sync(0xffffffffu, c[V - 1], 1, TX);
                    const float east = __shfl_down_sync(0xffffffffu, c[0], 1, TX);
"""
_SHARED = """                    const float* row = reinterpret_cast<const float*>(src + (ly0 + r) * TX);
                    const float west = row[tx > 0 ? tx * V - 1 : 0];
                    const float east = row[tx < TX - 1 ? tx * V + V : W - 1];
"""

_SOURCE = """/* Hand-written H200 candidate for {case} (forge/handwritten_temporal_rows.py): the {T} steps of
 * star_1 pipelined along z on a {W}x{H} tile ({OX}x{OY} outputs), {R} rows of 4 points a thread,
 * {L} output planes a block. */
typedef float elem_t;
{VECTOR}
extern "C" __global__ void __launch_bounds__({THREADS})
stencil(const elem_t* __restrict__ u, const elem_t* __restrict__ a, elem_t* __restrict__ y,
        const double* __restrict__ coef, int nz, int ny, int nx)
{{
    constexpr int T = {T}, V = 4, R = {R}, TX = {TX}, TY = {TY}, H = TY * R, W = TX * V, L = {L};
    constexpr int HX = (T + V - 1) / V * V;  /* the x halo, whole vectors: every load stays aligned */
    constexpr int OX = W - 2 * HX, OY = H - 2 * T, PLANE = H * TX;
    extern __shared__ float4 planes[];  /* [step 0..T-1][parity][H][TX] */
    const float c0 = (float)coef[0], c1 = (float)coef[1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int xin = blockIdx.x * OX - HX, yin = blockIdx.y * OY;
    const int zb = T + blockIdx.z * L, ze = min(zb + L, nz - T);
    if (xin + HX >= nx - T || yin + T >= ny - T || zb >= ze) return;  /* the whole block: before any barrier */
    const int gx = xin + tx * V, ly0 = ty * R, gy0 = yin + ly0;
    const long sk = (long)nx * ny;
    const bool vec = (OX % V == 0) && (nx % V == 0) && ((((unsigned long long)u | (unsigned long long)y) & 15) == 0);
    const int lane0 = (ty * TX + tx) / 32 * 32;  /* the warp's tile rows: [row_first, row_last] */
    const int row_first = lane0 / TX * R, row_last = min(((lane0 + 31) / TX + 1) * R - 1, H - 1);

    float prev[T][R][V], cur[T][R][V], next[R][V];
#pragma unroll
    for (int s = 0; s < T; ++s)
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
            for (int i = 0; i < V; ++i) {{ prev[s][r][i] = 0.f; cur[s][r][i] = 0.f; }}

    auto load = [&](int k, float (*v)[V]) {{
#pragma unroll
        for (int r = 0; r < R; ++r) {{
            const int gy = gy0 + r;
            const long p = (long)k * sk + (long)gy * nx + gx;
            if (gy < ny && vec && gx >= 0 && gx < nx) {{
                load4(u + p, v[r]);
            }} else {{
#pragma unroll
                for (int i = 0; i < V; ++i) v[r][i] = (gy < ny && gx + i >= 0 && gx + i < nx) ? u[p + i] : 0.f;
            }}
        }}
    }};
    load(zb - T, next);

    for (int k = zb - T; k < ze + T; ++k) {{
        const int wb = k & 1, rb = wb ^ 1;
        float nw[R][V];
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
            for (int i = 0; i < V; ++i) nw[r][i] = next[r][i];
        if (k + 1 < ze + T) load(k + 1, next);
#pragma unroll
        for (int r = 0; r < R; ++r)
            planes[wb * PLANE + (ly0 + r) * TX + tx] = make_float4(nw[r][0], nw[r][1], nw[r][2], nw[r][3]);
#pragma unroll
        for (int s = 1; s <= T; ++s) {{
            /* step s, plane k - s, from step s-1: prev (k-s-1), cur (k-s), nw (k-s+1), shared (k-s) */
            float out[R][V];
#pragma unroll
            for (int r = 0; r < R; ++r)
#pragma unroll
                for (int i = 0; i < V; ++i) out[r][i] = 0.f;
            const bool live = {LIVE};  /* else no row of the warp is needed */
            if (live && k - (zb - T) >= 2 * s) {{  /* else plane k - s of step s lies in the chunk's unneeded z halo */
                const float4* src = planes + ((s - 1) * 2 + rb) * PLANE;
                const float4 up = src[(ly0 > 0 ? ly0 - 1 : ly0) * TX + tx];
                const float4 dn = src[(ly0 + R < H ? ly0 + R : ly0 + R - 1) * TX + tx];
                const float upv[V] = {{up.x, up.y, up.z, up.w}}, dnv[V] = {{dn.x, dn.y, dn.z, dn.w}};
#pragma unroll
                for (int r = 0; r < R; ++r) {{
                    const float* c = cur[s - 1][r];
{NEIGHBOURS}#pragma unroll
                    for (int i = 0; i < V; ++i) {{
                        const float above = r == 0 ? upv[i] : cur[s - 1][r - 1][i];
                        const float below = r == R - 1 ? dnv[i] : cur[s - 1][r + 1][i];
                        const float left = i == 0 ? west : c[i - 1];
                        const float right = i == V - 1 ? east : c[i + 1];
                        out[r][i] = fmaf(c1, prev[s - 1][r][i] + nw[r][i] + left + right + above + below, c0 * c[i]);
                    }}
                }}
            }}
#pragma unroll
            for (int r = 0; r < R; ++r)
#pragma unroll
                for (int i = 0; i < V; ++i) {{
                    prev[s - 1][r][i] = cur[s - 1][r][i]; cur[s - 1][r][i] = nw[r][i]; nw[r][i] = out[r][i];
                }}
            if (s < T && live)
#pragma unroll
                for (int r = 0; r < R; ++r)
                    planes[(s * 2 + wb) * PLANE + (ly0 + r) * TX + tx] = make_float4(nw[r][0], nw[r][1], nw[r][2], nw[r][3]);
        }}
        const int kz = k - T;  /* nw holds step T's plane kz */
        if (kz >= zb) {{
#pragma unroll
            for (int r = 0; r < R; ++r) {{
                const int ly = ly0 + r, gy = gy0 + r;
                if (ly < T || ly >= H - T || gy < T || gy >= ny - T) continue;
                const long o = (long)kz * sk + (long)gy * nx + gx;
                if (vec && tx * V >= HX && tx * V + V <= W - HX && gx >= T && gx + V <= nx - T) {{
                    store4(y + o, nw[r]);
                }} else {{
#pragma unroll
                    for (int i = 0; i < V; ++i) {{
                        const int lx = tx * V + i, x = gx + i;
                        if (lx >= HX && lx < W - HX && x >= T && x < nx - T) y[o + i] = nw[r][i];
                    }}
                }}
            }}
        }}
        __syncthreads();
    }}
}}
"""
