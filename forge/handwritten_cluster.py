"""`cpipe`: the 3.5-D pipeline of `pipe` (forge/handwritten_temporal.py) with its y halo shared across
a thread-block cluster (Hopper's distributed shared memory) instead of recomputed by every block.

Why. At T = 8 the pipe's 64 x 32 tile keeps 48 x 16 outputs: with one block an SM (registers and
shared memory both limit it) every step is computed over the whole tile, 2048 points for 768 outputs,
2.67x the work the outputs need, where two 4-step passes repeat 1.45-1.71x each; that is why the 8-step
pipe lost to two launches of the admitted 4-step kernel (docs/forge.md, "Not yet"). A cluster of CY
blocks stacked in y shares one tile of W x (CY H) points, so the halo of T rows is paid once a cluster,
not once a block: CY = 2 blocks of 64 x 32 compute 64 x 64 points a step for 48 x 48 outputs (1.78x),
CY = 4 compute 64 x 128 for 48 x 112 (1.52x), on two or four SMs' registers and shared memory.

How a block's edge row gets its y neighbour from the next block (`exchange`): `push` (the default) stores
each edge row also into the next block's halo row (two more rows a shared plane, `mapa` + a generic store),
so every read is local; `pull` (session 36's first design) loads it from the other block's shared plane.
Both order the cluster's blocks by the one barrier an iteration (double-buffered planes by parity, as in
pipe): `barrier.cluster.arrive.release` + `wait.acquire` instead of `__syncthreads`. Measured on the H200
(session 36, docs/forge.md) that barrier is what lost: the cluster issued 21% fewer instructions than pipe
and had no eligible warp in 41% of its cycles (pipe 23%), and clusters of 4 or 8, with less halo, were no
faster than 2.

`signal` (session 37) keeps the block's own barrier and signals only what crosses: an edge row pushes its
value into a ring of three buffers a step in the neighbour's shared memory and arrives, releasing at
cluster scope, on that buffer's mbarrier there (`mbarrier.arrive.release.cluster.shared::cluster`); the
neighbour's edge row waits on it (acquire at cluster scope) before it reads, one iteration later, and no
other row of either block waits on the other SM. Every iteration each edge row pushes every step and waits
for every step but the first iteration's, so a block runs at most about one iteration ahead of its
neighbour; three buffers then suffice without an `empty` signal back: a buffer is written again two
iterations after the one that read it, and the writer gets there only through the reader's later pushes,
which follow that read (the barrier phases cannot alias for the same reason).

Blocks of a cluster start together (the hardware schedules a cluster whole) and one cluster barrier before
the march makes sure every block's shared memory (and, for `signal`, its mbarriers) exists before any is
touched; no block returns early unless its whole cluster does, and `signal` ends with a cluster barrier, so
no block writes to or reads from one that has exited.

The x halo stays as in pipe (overlapped tiles): the x neighbours at a thread's ends come by warp
shuffles within a row, which a cluster split in x would turn into divergent remote loads.
"""
from __future__ import annotations

from measurement.harness.cases import Case

from .handwritten_planes_bulk import BULK
from .handwritten_temporal import REGISTER_FILE, SHARED_LIMIT, V, registers_per_thread, shared_bytes, shuffles_fit, x_halo
from .handwritten_temporal_source import SOURCE, VECTOR_HELPERS, variant

CLUSTER_HELPERS = r"""#ifndef EMULATED_CLUSTER
/* One barrier for every thread of the cluster: the writes before it (shared memory of any block)
   are seen by the reads after it. */
__device__ __forceinline__ void cluster_sync()
{
    asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
/* The address of `p` (this block's shared memory) in the shared memory of the cluster's block `rank`. */
template <class P> __device__ __forceinline__ P* cluster_map(P* p, unsigned rank)
{
    unsigned long long mapped;
    asm volatile("mapa.u64 %0, %1, %2;" : "=l"(mapped) : "l"(p), "r"(rank));
    return reinterpret_cast<P*>(mapped);
}
#endif
"""


_PULL_DECLARATIONS = (
    "    const bool from_above = ty == 0 && ry > 0, from_below = ty == H - 1 && ry < CY - 1;\n"
    "    /* the block above or below in the cluster, for this thread's edge row (its own block otherwise) */\n"
    "    const float4* edge = cluster_map(planes, from_above ? ry - 1 : from_below ? ry + 1 : ry);")
_PULL_EDITS = [
    ("                const float4 up = src[(ty > 0 ? ty - 1 : ty) * TX + tx];\n"
     "                const float4 dn = src[(ty < H - 1 ? ty + 1 : ty) * TX + tx];\n",
     "                const int base = ((s - 1) * 2 + rb) * PLANE;\n"
     "                const float4 up = from_above ? edge[base + (H - 1) * TX + tx] : src[(ty > 0 ? ty - 1 : ty) * TX + tx];\n"
     "                const float4 dn = from_below ? edge[base + tx] : src[(ty < H - 1 ? ty + 1 : ty) * TX + tx];\n"),
]
# Shared planes of H + 2 rows: row 0 the halo row above (the last row of the block above, pushed by it), rows
# 1..H the block's own, row H + 1 the halo row below. At the cluster's edges the halo rows are never written
# and the edge row reads itself, as pipe's lone block does.
_PUSH_DECLARATIONS = (
    "    const bool push_up = ty == 0 && ry > 0, push_down = ty == H - 1 && ry < CY - 1;\n"
    "    /* where this thread's value also goes: the halo row below in the block above, or above in the block below */\n"
    "    float4* const far = cluster_map(planes, push_up ? ry - 1 : push_down ? ry + 1 : ry) + (push_up ? (H + 1) * TX : 0) + tx;\n"
    "    auto put = [&](int at, const float* v) {{\n"
    "        const float4 f = make_float4(v[0], v[1], v[2], v[3]);\n"
    "        planes[at + (ty + 1) * TX + tx] = f;\n"
    "        if (push_up || push_down) far[at] = f;\n"
    "    }};")
_PUSH_EDITS = [
    ("        planes[(0 * 2 + wb) * PLANE + ty * TX + tx] = make_float4(nw[0], nw[1], nw[2], nw[3]);\n",
     "        put((0 * 2 + wb) * PLANE, nw);\n"),
    ("            if (s < T) planes[(s * 2 + wb) * PLANE + ty * TX + tx] = make_float4(nw[0], nw[1], nw[2], nw[3]);\n",
     "            if (s < T) put((s * 2 + wb) * PLANE, nw);\n"),
    ("                const float4 up = src[(ty > 0 ? ty - 1 : ty) * TX + tx];\n"
     "                const float4 dn = src[(ty < H - 1 ? ty + 1 : ty) * TX + tx];\n",
     "                const float4 up = src[(ty > 0 || ry > 0 ? ty : ty + 1) * TX + tx];\n"
     "                const float4 dn = src[(ty < H - 1 || ry < CY - 1 ? ty + 2 : ty + 1) * TX + tx];\n"),
]
_PUSH_ROW = ("                const float* row = reinterpret_cast<const float*>(src + ty * TX);\n",
             "                const float* row = reinterpret_cast<const float*>(src + (ty + 1) * TX);\n")


# `signal`'s cross-block mbarriers, beside BULK's (mbar_t, bar_init, bar_fence_init); the emulation defines the
# same names (a remote barrier there is a pointer into the other block's shared memory).
SIGNAL_HELPERS = r"""#ifndef EMULATED_CLUSTER
typedef unsigned remote_bar_t;  /* the shared::cluster address of an mbarrier array in another block */
__device__ __forceinline__ remote_bar_t cluster_bar(mbar_t* bars, unsigned rank)
{
    unsigned mapped;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(mapped) : "r"(to_shared(bars)), "r"(rank));
    return mapped;
}
/* One arrival on mbarrier `index` of `bars`, after this thread's stores to that block's shared memory (release,
   cluster scope). */
__device__ __forceinline__ void bar_arrive_remote(remote_bar_t bars, int index)
{
    asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" :: "r"(bars + 8u * index) : "memory");
}
/* Until the phase of parity `parity` has completed, seeing what the remote arrivals released. */
__device__ __forceinline__ void bar_wait_cluster(mbar_t* bar, unsigned parity)
{
    asm volatile("{ .reg .pred done;\n"
                 "WAIT: mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 done, [%0], %1;\n"
                 "@!done bra WAIT; }" :: "r"(to_shared(bar)), "r"(parity) : "memory");
}
#endif
"""
# After the pipe's planes (H rows, no halo rows): a ring [step 0..T-1][iteration % 3][0: the row above, 1: the
# row below][TX] that the neighbouring blocks' edge rows push into, and an mbarrier a (step, buffer) that their
# TX threads a neighbour arrive on.
_SIGNAL_DECLARATIONS = (
    "    const bool from_above = ty == 0 && ry > 0, from_below = ty == H - 1 && ry < CY - 1;  /* an edge row next to a block */\n"
    "    float4* const ring = planes + T * 2 * PLANE;\n"
    "    mbar_t* const full = reinterpret_cast<mbar_t*>(ring + T * 3 * 2 * TX);  /* [step][iteration % 3] */\n"
    "    const unsigned peer = from_above ? ry - 1 : from_below ? ry + 1 : ry;\n"
    "    /* where this edge row goes: the ring of the block above keeps it as its row below (side 1) */\n"
    "    float4* const far = cluster_map(ring, peer) + (from_above ? TX : 0) + tx;\n"
    "    const remote_bar_t far_full = cluster_bar(full, peer);\n"
    "    if (tx == 0 && ty == 0) {{\n"
    "        for (int b = 0; b < T * 3; ++b) bar_init(full + b, TX * ((ry > 0) + (ry < CY - 1)));\n"
    "        bar_fence_init();\n"
    "    }}\n"
    "    auto put = [&](int s, int at, int b, const float* v) {{  /* step s's plane (at) and, from an edge row, ring buffer b */\n"
    "        const float4 f = make_float4(v[0], v[1], v[2], v[3]);\n"
    "        planes[at + ty * TX + tx] = f;\n"
    "        if (from_above || from_below) {{ far[(s * 3 + b) * 2 * TX] = f; bar_arrive_remote(far_full, s * 3 + b); }}\n"
    "    }};")
_PHASE_LINE = "        const int wb = k & 1, rb = wb ^ 1;\n"  # pipe's; with `pair` the body's last constant instead
_PAIRED_PHASE_LINE = "        constexpr bool steady = decltype(primed)::value;  /* every step's plane lies in the chunk */\n"
_SIGNAL_EDITS = [
    (_PHASE_LINE,
     _PHASE_LINE +
     "        const int it = k - (zb - T), bw = it % 3, bp = (it + 2) % 3;  /* the ring buffer pushed now, and last iteration's */\n"
     "        const unsigned seen = (unsigned)((it - 1) / 3) & 1u;  /* the parity of bp's phase that last iteration completes */\n"),
    ("        planes[(0 * 2 + wb) * PLANE + ty * TX + tx] = make_float4(nw[0], nw[1], nw[2], nw[3]);\n",
     "        put(0, (0 * 2 + wb) * PLANE, bw, nw);\n"),
    ("            float out[V] = {{0.f, 0.f, 0.f, 0.f}};\n",
     "            float out[V] = {{0.f, 0.f, 0.f, 0.f}};\n"
     "            if ((from_above || from_below) && it > 0) bar_wait_cluster(full + (s - 1) * 3 + bp, seen);\n"),
    # one shared load a neighbour, its index chosen (selecting between two loads would issue both in every thread)
    ("                const float4 up = src[(ty > 0 ? ty - 1 : ty) * TX + tx];\n"
     "                const float4 dn = src[(ty < H - 1 ? ty + 1 : ty) * TX + tx];\n",
     "                const int own = ((s - 1) * 2 + rb) * PLANE + tx, edge = T * 2 * PLANE + ((s - 1) * 3 + bp) * 2 * TX + tx;\n"
     "                const float4 up = planes[from_above ? edge : own + (ty > 0 ? ty - 1 : ty) * TX];\n"
     "                const float4 dn = planes[from_below ? edge + TX : own + (ty < H - 1 ? ty + 1 : ty) * TX];\n"),
    ("            if (s < T) planes[(s * 2 + wb) * PLANE + ty * TX + tx] = make_float4(nw[0], nw[1], nw[2], nw[3]);\n",
     "            if (s < T) put(s, (s * 2 + wb) * PLANE, bw, nw);\n"),
    ("\n    }}\n}}\n", "\n    }}\n    cluster_sync();  /* no block leaves while a neighbour may still push into it */\n}}\n"),
]
EXCHANGES = ("push", "pull", "signal")


def cluster_shared_bytes(t: int, width: int, height: int, exchange: str) -> int:
    """pipe's planes; `push` adds two halo rows a plane, `signal` the ring of three buffers of two rows a step
    and its mbarriers."""
    if exchange == "signal":
        return shared_bytes(t, width, height) + t * 3 * 2 * width * 4 + t * 3 * 8
    return shared_bytes(t, width, height + (2 if exchange == "push" else 0))


def output_rows(case: Case, height: int, cluster: int) -> int:
    return cluster * height - 2 * case.stencil.time_steps


def cluster_tile_y(case: Case, height: int, cluster: int) -> int:
    """The launch's tile height: the ABI's grid, ceil(ny / tile), must be a whole number of clusters and
    at least enough of them for the ny - 2T output rows (`output_rows` a cluster); a cluster beyond
    them returns at once."""
    ny = case.shape[1]
    want = -(-(ny - 2 * case.stencil.time_steps) // output_rows(case, height, cluster)) * cluster
    for tile in range(ny, 0, -1):
        blocks = -(-ny // tile)
        if blocks >= want and blocks % cluster == 0:
            return tile
    raise ValueError(f"{case.id}: no tile height gives a whole number of clusters of {cluster} for {ny} rows")


def check_cluster(case: Case, width: int, height: int, cluster: int, chunk: int, exchange: str = "push") -> None:
    """pipe's limits (check_parameters) with the cluster's tile in place of the block's: the y halo is the
    cluster's, so a block may be shorter than 2T rows; every block needs two rows (one above, one below)."""
    stencil, t = case.stencil, case.stencil.time_steps
    if stencil.dims != 3 or stencil.family != "star" or stencil.radius != 1 or t < 2 or case.precision != "f32":
        raise ValueError(f"{case.id}: cpipe is for diamond_tsT (T > 1) in f32")
    if not 2 <= cluster <= 8:
        raise ValueError(f"cluster {cluster}: 2 to 8 blocks (the portable cluster size)")
    if width % V or height < 2 or width // V * height > 1024:
        raise ValueError(f"tile {width}x{height}: the width a multiple of {V}, two rows or more, at most 1024 threads a block")
    if width <= 2 * x_halo(t) or cluster * height <= 2 * t or chunk < 1:
        raise ValueError(f"tile {width}x{height} in clusters of {cluster} with chunk {chunk}: no output points for T = {t}")
    if width // V * height * registers_per_thread(t) > REGISTER_FILE:
        raise ValueError(f"tile {width}x{height}: more registers than an SM has at T = {t}")
    if exchange not in EXCHANGES:
        raise ValueError(f"exchange {exchange!r}: one of {', '.join(EXCHANGES)}")
    if cluster_shared_bytes(t, width, height, exchange) > SHARED_LIMIT:
        raise ValueError(f"tile {width}x{height}: {cluster_shared_bytes(t, width, height, exchange)} bytes of shared memory "
                         f"for T = {t}")
    cluster_tile_y(case, height, cluster)


def render_cluster_pipe(case: Case, width: int = 64, height: int = 32, cluster: int = 4, chunk: int = 128,
                        shuffle: bool = True, exchange: str = "push", pair: bool = False) -> tuple[str, dict, str]:
    """(source, launch, hypothesis): pipe's kernel (with its x shuffles where a row fits a warp) in clusters
    of `cluster` blocks stacked in y, the edge rows exchanged by `exchange` (the module's docstring): `push`
    stores them also into the next block's halo rows, `pull` loads them from the other block's shared memory
    (a remote load a step that the compiler cannot hoist above the step's shared stores), both under a
    cluster barrier an iteration; `signal` pushes them into the next block's ring on its mbarriers, under
    the block's own barrier. `pair`: pipe's march two iterations a body (forge/handwritten_temporal_source.py `variant`)."""
    check_cluster(case, width, height, cluster, chunk, exchange)
    if shuffle and not shuffles_fit(width // V, height):
        raise ValueError(f"tile {width}x{height}: shuffles need a power-of-two row of at most 32 threads and whole warps")
    t = case.stencil.time_steps
    template = variant(SOURCE, shuffle, False, 1, pair)
    helpers = CLUSTER_HELPERS + (BULK["HELPERS"] + SIGNAL_HELPERS if exchange == "signal" else "")
    declarations = {"push": _PUSH_DECLARATIONS, "pull": _PULL_DECLARATIONS, "signal": _SIGNAL_DECLARATIONS}[exchange]
    edits = [
        ("extern \"C\" __global__ void __launch_bounds__({THREADS})",
         helpers.replace("{", "{{").replace("}", "}}")
         + "extern \"C\" __global__ void __cluster_dims__(1, {CY}, 1) __launch_bounds__({THREADS})"),
        ("    constexpr int OX = W - 2 * HX, OY = H - 2 * T, PLANE = H * TX;",
         "    constexpr int CY = {CY}, OX = W - 2 * HX, OY = CY * H - 2 * T, PLANE = (H + %d) * TX;"
         "  /* OY: the cluster's output rows */" % (2 if exchange == "push" else 0)),
        ("    const int xin = blockIdx.x * OX - HX, yin = blockIdx.y * OY;",
         "    const int ry = blockIdx.y % CY;  /* this block's place in its cluster (its rank: cluster dims 1 x CY) */\n"
         "    const int ycl = blockIdx.y / CY * OY;  /* the cluster's first input row */\n"
         "    const int xin = blockIdx.x * OX - HX, yin = ycl + ry * H;"),
        ("    if (xin + HX >= nx - T || yin + T >= ny - T || zb >= ze) return;  /* the whole block: before any barrier */",
         "    if (xin + HX >= nx - T || ycl + T >= ny - T || zb >= ze) return;  /* the whole cluster: before any barrier */"),
        ("    const bool store_row = ty >= T && ty < H - T && gy >= T && gy < ny - T;",
         "    const int cy = ry * H + ty;  /* the row in the cluster's tile */\n"
         "    const bool store_row = cy >= T && cy < CY * H - T && gy >= T && gy < ny - T;\n" + declarations),
        ("    load(zb - T, next);\n", "    load(zb - T, next);\n    cluster_sync();  /* every block of the cluster has started */\n"),
    ]
    if exchange == "signal":
        edits += [(_PAIRED_PHASE_LINE, new.replace(_PHASE_LINE, _PAIRED_PHASE_LINE, 1)) if pair and old == _PHASE_LINE
                  else (old, new) for old, new in _SIGNAL_EDITS]
    else:
        edits += (_PUSH_EDITS if exchange == "push" else _PULL_EDITS) + [
            ("        __syncthreads();\n    }}", "        cluster_sync();\n    }}")]
        if exchange == "push" and not shuffle:
            edits.append(_PUSH_ROW)
    for old, new in edits:
        assert old in template, old
        template = template.replace(old, new)
    tx = width // V
    out_x, out_y = width - 2 * x_halo(t), output_rows(case, height, cluster)
    source = template.format(
        T=t, TX=tx, H=height, L=chunk, THREADS=tx * height, case=case.id, W=width, OX=out_x, OY=out_y, CY=cluster,
        INCLUDE="", ELEM="float", VECTOR=VECTOR_HELPERS["f32"], ALIGN=V * case.dtype.itemsize - 1, AMASK="", VARCOEF_VEC="",
        VARCOEF_SCALAR="")
    source = source.replace(f"(forge/handwritten_temporal.py): the {t} step(s)",
                            f"(forge/handwritten_cluster.py): the {t} step(s)", 1)
    launch = {"block": [tx, height, 1], "tile": [out_x, cluster_tile_y(case, height, cluster), chunk],
              "shared_bytes": cluster_shared_bytes(t, width, height, exchange)}
    rows = cluster * height
    redundancy = rows * width / (out_x * out_y)
    how = ("the edge rows pushed into the neighbour's ring on its mbarriers, the block's own barrier an iteration, so "
           "only the edge rows wait on another SM" if exchange == "signal" else
           "one cluster barrier an iteration instead of __syncthreads")
    hypothesis = (f"{case.id}: the {t} steps pipelined on chip along z as in pipe, in clusters of {cluster} blocks of "
                  f"{width}x{height} stacked in y ({width}x{rows} tiles, {out_x}x{out_y} outputs, {chunk} planes a cluster): "
                  f"the y halo paid once a cluster through distributed shared memory, {redundancy:.2f}x the work the "
                  f"outputs need instead of a lone block's; {how}; expected over two launches of the admitted 4-step "
                  "kernel where the lone 8-step block lost to them.")
    return source, launch, hypothesis
