"""The CUDA text of `pipe` (forge/handwritten_temporal.py) and the edits that make its variants: the template as
gated, its changes aimed at the on-chip work of T > 1 (`variant`) and planes loaded further ahead (`prefetched`).
Each change off renders the gated sources byte for byte; `cpipe` (forge/handwritten_cluster.py) edits the same
text. Kept apart from the parameters and launch so each module stays short."""
from __future__ import annotations


def variant(template: str, shuffle: bool, skip: bool, min_blocks: int, pair: bool = False) -> str:
    """The template with the changes aimed at pipe's on-chip work for T > 1 (each off: the template
    as gated, byte for byte). Per step and 4 points a thread moves a 16-byte shared store, two
    16-byte shared loads and two scalar ones, and every thread computes every step over the
    whole tile although step s is needed only s rows inside it:

    * `shuffle`: the x neighbours at the thread's ends from the neighbouring lanes' registers
      (__shfl_up/down_sync within the row's lanes), not from shared memory: two of the five
      shared accesses a step;
    * `skip`: a warp none of whose rows lies in [s, H - s) skips step s and its shared store
      (warp-uniform, so no lane diverges): 17% of the steps at 64 x 24 for T = 4, 25% at 64 x 32
      for T = 8. Those rows are read only by points that are themselves not needed;
    * `min_blocks` > 1: __launch_bounds__'s second argument, so the compiler keeps the registers a
      thread at what lets that many blocks share an SM (T = 4: 64 registers give 2 blocks of 384
      threads, 56 give 3), more warps to hide the barrier each plane;
    * `pair` (session 37): the march in pairs of iterations, each a call of one body with its phase a compile-time
      constant, so the shared planes' parity is fixed in every address and each step's two queued planes swap roles
      instead of moving (the older is overwritten by the incoming plane), and past the pipeline's first 2T
      iterations a body with no per-step test of whether its plane is in the chunk: in the SASS of the main loop (`nvcc
      -arch=sm_90`, nvdisasm) 25.0 instructions a point and step at T = 4 (96 x 32) and 18.8 at T = 8 (64 x 32) as
      gated, of which 7 are the step's adds and multiplies, the rest moves, addresses and predicates; paired, the
      steady loop takes 22.5 and 12.6 (docs/benchmarks/sass_designs_s37.json)."""
    edits = []
    if shuffle:
        edits.append(("""                const float* row = reinterpret_cast<const float*>(src + ty * TX);
                const float west = row[tx > 0 ? tx * V - 1 : 0];
                const float east = row[tx < TX - 1 ? tx * V + V : W - 1];
""", """                const float west = __shfl_up_sync(0xffffffffu, cur[s - 1][V - 1], 1, TX);  /* lane 0: its own, in the halo */
                const float east = __shfl_down_sync(0xffffffffu, cur[s - 1][0], 1, TX);
"""))
    if skip:
        edits += [
            ("    auto load = [&](int k, float* v) {{\n",
             "    const int lane0 = (ty * TX + tx) / 32 * 32;  /* the warp's rows: [lane0 / TX, (lane0 + 31) / TX] */\n"
             "    const int row_first = lane0 / TX, row_last = min((lane0 + 31) / TX, H - 1);\n"
             "    auto load = [&](int k, float* v) {{\n"),
            ("            if (k - (zb - T) >= 2 * s) {{",
             "            const bool live = row_last >= s && row_first < H - s;  /* else no row of the warp is needed */\n"
             "            if (live && k - (zb - T) >= 2 * s) {{"),
            ("            if (s < T) planes[", "            if (s < T && live) planes["),
        ]
    if min_blocks > 1:
        edits.append(("__launch_bounds__({THREADS})", "__launch_bounds__({THREADS}, %d)" % min_blocks))
    if pair:
        edits += [
            ("    float prev[T][V], cur[T][V], next[V];\n#pragma unroll\n    for (int s = 0; s < T; ++s)\n#pragma unroll\n"
             "        for (int i = 0; i < V; ++i) {{ prev[s][i] = 0.f; cur[s][i] = 0.f; }}\n",
             "    float q[2][T][V], next[V];  /* step s's last two planes: at phase ph q[ph][s] the older, q[ph ^ 1][s] the newer */\n"
             "#pragma unroll\n    for (int s = 0; s < T; ++s)\n#pragma unroll\n"
             "        for (int i = 0; i < V; ++i) {{ q[0][s][i] = 0.f; q[1][s][i] = 0.f; }}\n"),
            ("    for (int k = zb - T; k < ze + T; ++k) {{\n        const int wb = k & 1, rb = wb ^ 1;\n",
             "    auto iteration = [&](const int k, auto phase, auto primed) {{  /* the parity in the march; past the fill */\n"
             "        constexpr int wb = decltype(phase)::value, rb = wb ^ 1;\n"
             "        constexpr bool steady = decltype(primed)::value;  /* every step's plane lies in the chunk */\n"),
            ("k - (zb - T) >= 2 * s", "(steady || k - (zb - T) >= 2 * s)"),
            ("prev[s - 1]", "q[wb][s - 1]"),
            ("cur[s - 1]", "q[rb][s - 1]"),
            ("{{ q[wb][s - 1][i] = q[rb][s - 1][i]; q[rb][s - 1][i] = nw[i]; nw[i] = out[i]; }}",
             "{{ q[wb][s - 1][i] = nw[i]; nw[i] = out[i]; }}  /* the older plane's registers take the incoming one */"),
            ("        __syncthreads();\n    }}\n}}\n",
             "        __syncthreads();\n    }};\n"
             "    int k = zb - T;\n"
             "    for (; k < zb + T; k += 2) {{  /* the first 2T iterations fill the pipeline (ze + T > zb + T) */\n"
             "        iteration(k, phase_t<0>{{}}, phase_t<0>{{}});\n        iteration(k + 1, phase_t<1>{{}}, phase_t<0>{{}});\n    }}\n"
             "    for (; k < ze + T; k += 2) {{\n"
             "        iteration(k, phase_t<0>{{}}, phase_t<1>{{}});\n"
             "        if (k + 1 < ze + T) iteration(k + 1, phase_t<1>{{}}, phase_t<1>{{}});\n    }}\n}}\n"),
            ('extern "C" __global__', 'template <int P> struct phase_t {{ static constexpr int value = P; }};\nextern "C" __global__'),
        ]
    for old, new in edits:
        assert old in template, old
        template = template.replace(old, new)
    return template


def prefetched(template: str, planes: int) -> str:
    """The template with `planes` input planes loaded ahead (1: the template as it is, so the
    sources gated with one plane ahead render byte for byte)."""
    if planes == 1:
        return template
    edits = [
        ("float prev[T][V], cur[T][V], next[V];", f"float prev[T][V], cur[T][V], ahead[{planes}][V];"),
        ("    load(zb - T, next);\n",
         f"#pragma unroll\n    for (int d = 0; d < {planes}; ++d)\n        if (zb - T + d < ze + T) load(zb - T + d, ahead[d]);\n"),
        ("        for (int i = 0; i < V; ++i) nw[i] = next[i];\n        if (k + 1 < ze + T) load(k + 1, next);\n",
         "        for (int i = 0; i < V; ++i) nw[i] = ahead[0][i];\n"
         "#pragma unroll\n"
         f"        for (int d = 0; d < {planes - 1}; ++d)\n"
         "#pragma unroll\n"
         "            for (int i = 0; i < V; ++i) ahead[d][i] = ahead[d + 1][i];\n"
         f"        if (k + {planes} < ze + T) load(k + {planes}, ahead[{planes - 1}]);\n"),
    ]
    for old, new in edits:
        assert old in template, old
        template = template.replace(old, new)
    return template


VECTOR_HELPERS = {
    "f32": """__device__ __forceinline__ void load4(const float* p, float* v)
{
    const float4 f = __ldg(reinterpret_cast<const float4*>(p));
    v[0] = f.x; v[1] = f.y; v[2] = f.z; v[3] = f.w;
}
__device__ __forceinline__ void store4(float* p, const float* v)
{
    *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
}
""",
    "f16": """__device__ __forceinline__ void load4(const __half* p, float* v)
{
    const uint2 w = __ldg(reinterpret_cast<const uint2*>(p));
    const __half2* h = reinterpret_cast<const __half2*>(&w);
    v[0] = __low2float(h[0]); v[1] = __high2float(h[0]); v[2] = __low2float(h[1]); v[3] = __high2float(h[1]);
}
__device__ __forceinline__ void store4(__half* p, const float* v)
{
    uint2 w;
    __half2* h = reinterpret_cast<__half2*>(&w);
    h[0] = __floats2half2_rn(v[0], v[1]); h[1] = __floats2half2_rn(v[2], v[3]);
    *reinterpret_cast<uint2*>(p) = w;
}
""",
}

SOURCE = """/* Hand-written H200 candidate for {case} (forge/handwritten_temporal.py): the {T} step(s) of star_1
 * pipelined along z on a {W}x{H} tile ({OX}x{OY} outputs), {L} output planes a block; step s keeps
 * its last two planes in registers and its current plane in a double-buffered shared plane. */
{INCLUDE}typedef {ELEM} elem_t;
{VECTOR}
extern "C" __global__ void __launch_bounds__({THREADS})
stencil(const elem_t* __restrict__ u, const elem_t* __restrict__ a, elem_t* __restrict__ y,
        const double* __restrict__ coef, int nz, int ny, int nx)
{{
    constexpr int T = {T}, V = 4, TX = {TX}, H = {H}, W = TX * V, L = {L};
    constexpr int HX = (T + V - 1) / V * V;  /* the x halo, whole vectors: every load stays aligned */
    constexpr int OX = W - 2 * HX, OY = H - 2 * T, PLANE = H * TX;
    extern __shared__ float4 planes[];  /* [step 0..T-1][parity][H][TX] */
    const float c0 = (float)coef[0], c1 = (float)coef[1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int xin = blockIdx.x * OX - HX, yin = blockIdx.y * OY;  /* outputs x in [bx OX, bx OX + OX) */
    const int zb = T + blockIdx.z * L, ze = min(zb + L, nz - T);
    if (xin + HX >= nx - T || yin + T >= ny - T || zb >= ze) return;  /* the whole block: before any barrier */
    const int gx = xin + tx * V, gy = yin + ty;
    const long sk = (long)nx * ny;
    const bool vec = (OX % V == 0) && (nx % V == 0) && ((((unsigned long long)u | (unsigned long long)y{AMASK}) & {ALIGN}) == 0);
    const bool row_in = gy < ny;
    const bool store_row = ty >= T && ty < H - T && gy >= T && gy < ny - T;

    float prev[T][V], cur[T][V], next[V];
#pragma unroll
    for (int s = 0; s < T; ++s)
#pragma unroll
        for (int i = 0; i < V; ++i) {{ prev[s][i] = 0.f; cur[s][i] = 0.f; }}

    auto load = [&](int k, float* v) {{
        const long p = (long)k * sk + (long)gy * nx + gx;
        if (row_in && vec && gx >= 0 && gx < nx) {{
            load4(u + p, v);
        }} else {{
#pragma unroll
            for (int i = 0; i < V; ++i) v[i] = (row_in && gx + i >= 0 && gx + i < nx) ? (float)u[p + i] : 0.f;
        }}
    }};
    load(zb - T, next);

    for (int k = zb - T; k < ze + T; ++k) {{
        const int wb = k & 1, rb = wb ^ 1;
        float nw[V];
#pragma unroll
        for (int i = 0; i < V; ++i) nw[i] = next[i];
        if (k + 1 < ze + T) load(k + 1, next);
        planes[(0 * 2 + wb) * PLANE + ty * TX + tx] = make_float4(nw[0], nw[1], nw[2], nw[3]);
#pragma unroll
        for (int s = 1; s <= T; ++s) {{
            /* step s, plane k - s, from step s-1: prev (k-s-1), cur (k-s), nw (k-s+1), shared (k-s) */
            float out[V] = {{0.f, 0.f, 0.f, 0.f}};
            if (k - (zb - T) >= 2 * s) {{  /* else plane k - s of step s lies in the chunk's unneeded z halo */
                const float4* src = planes + ((s - 1) * 2 + rb) * PLANE;
                const float4 up = src[(ty > 0 ? ty - 1 : ty) * TX + tx];
                const float4 dn = src[(ty < H - 1 ? ty + 1 : ty) * TX + tx];
                const float* row = reinterpret_cast<const float*>(src + ty * TX);
                const float west = row[tx > 0 ? tx * V - 1 : 0];
                const float east = row[tx < TX - 1 ? tx * V + V : W - 1];
                const float ud[V] = {{up.x + dn.x, up.y + dn.y, up.z + dn.z, up.w + dn.w}};
#pragma unroll
                for (int i = 0; i < V; ++i) {{
                    const float left = i == 0 ? west : cur[s - 1][i - 1];
                    const float right = i == V - 1 ? east : cur[s - 1][i + 1];
                    out[i] = fmaf(c1, prev[s - 1][i] + nw[i] + left + right + ud[i], c0 * cur[s - 1][i]);
                }}
            }}
#pragma unroll
            for (int i = 0; i < V; ++i) {{ prev[s - 1][i] = cur[s - 1][i]; cur[s - 1][i] = nw[i]; nw[i] = out[i]; }}
            if (s < T) planes[(s * 2 + wb) * PLANE + ty * TX + tx] = make_float4(nw[0], nw[1], nw[2], nw[3]);
        }}
        const int kz = k - T;  /* nw holds step T's plane kz */
        if (kz >= zb && store_row) {{
            const long o = (long)kz * sk + (long)gy * nx + gx;
            const bool all = vec && tx * V >= HX && tx * V + V <= W - HX && gx >= T && gx + V <= nx - T;
            if (all) {{
{VARCOEF_VEC}                store4(y + o, nw);
            }} else {{
#pragma unroll
                for (int i = 0; i < V; ++i) {{
                    const int lx = tx * V + i, x = gx + i;
                    if (lx >= HX && lx < W - HX && x >= T && x < nx - T) y[o + i] = (elem_t)(nw[i]{VARCOEF_SCALAR});
                }}
            }}
        }}
        __syncthreads();
    }}
}}
"""
