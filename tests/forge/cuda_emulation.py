"""Run a CUDA kernel on the CPU: the source is compiled as C++ with a
small prelude (dim3, the vector types, __half as _Float16) and a driver loops over every block
and thread. Threads that only read their inputs and write their own outputs are independent, so
the loop computes what the GPU would. A kernel with a barrier is allowed one pattern: threads
fill shared memory from the inputs, synchronise, then compute; the driver runs each block twice,
so the second pass finds the shared table complete and rewrites every output correctly (outputs
are written once per pass by one thread and never read). A kernel with dynamic shared memory
(`extern __shared__`, barriers inside its loops: the `pipe` pipeline, the `planes` ring) runs each block's threads
as fibers (ucontext; real threads until session 29, which spent most of these tests' time switching
hundreds of them on two cores) meeting at barriers (each warp in turn sitting out two rounds, and independently eight, so warps drift apart), the shared array
one buffer per block (all ones, NaN, until written, and 1 KiB past its end), and a thread that returns drops out of the barrier as it would on the GPU; cp.async copies (`planes`) land at
the wait that covers them, not before, and bulk copies (`planes` with `bulk`) when their mbarrier's
phase completes; a kernel with `__cluster_dims__` (`cpipe`) runs each cluster's blocks as fibers of one scheduler, each
block with its own barrier and shared memory, `cluster_sync` a barrier of all of them and `cluster_map` (the GPU's
`mapa`) a pointer into another block's shared memory (and `cluster_bar` to its mbarriers), and a grid that is no whole
number of clusters is refused; warp
shuffles (`pipe`'s `shuffle`) meet at a barrier of
the warp's threads, so a kernel whose lanes diverge around a shuffle deadlocks here (on the GPU it is
undefined), which the emulation reports as a failure; rows16's `shuffle` also votes with a
full-warp ballot before any lane returns. CI has no GPU, and a hand-written candidate must be known correct before device time
is spent on it."""
from __future__ import annotations

import ctypes
import re

import numpy as np

from measurement.harness import buildcache
from measurement.harness.cases import Case
from measurement.harness.codegen import cuda_launch_geometry

from .cuda_emulation_collectives import ASYNC_AND_COLLECTIVES

PRELUDE = r"""
#include <algorithm>
#include <cstdint>
#include <cstdlib>
using std::min; using std::max; using std::abs;
#define __constant__
#define __shared__ static
inline void __syncthreads() {}
struct dim3 { unsigned x, y, z; };
static dim3 blockIdx, threadIdx, blockDim, gridDim;
#define __global__
#define __launch_bounds__(...)
#define __device__
#define __forceinline__ inline
#define __restrict__ __restrict
struct float2 { float x, y; };
struct float4 { float x, y, z, w; };
struct double2 { double x, y; };
struct uint2 { unsigned x, y; };
struct uint4 { unsigned x, y, z, w; };
typedef _Float16 __half;
struct __half2 { __half x, y; };
inline float __half2float(__half h) { return (float)h; }
inline __half __float2half(float f) { return (__half)f; }
inline float2 __half22float2(__half2 h) { return float2{(float)h.x, (float)h.y}; }
inline __half2 __floats2half2_rn(float a, float b) { return __half2{(__half)a, (__half)b}; }
inline __half2 __halves2half2(__half a, __half b) { return __half2{a, b}; }
inline float __low2float(__half2 h) { return (float)h.x; }
inline unsigned short __half_as_ushort(__half h) { unsigned short s; __builtin_memcpy(&s, &h, 2); return s; }
inline float __high2float(__half2 h) { return (float)h.y; }
template <class T> inline T __ldg(const T* p) { return *p; }
/* An L2 prefetch (render's `ahead`) is a hint on the GPU; here it counts an address outside the input arrays. */
static const char* prefetch_spans[2][2];
static long stray_prefetches;
inline void emulated_prefetch(const void* p)
{
    const char* c = static_cast<const char*>(p);
    for (auto& span : prefetch_spans) if (span[0] && c >= span[0] && c < span[1]) return;
    ++stray_prefetches;
}
#define EMULATED_PREFETCH(p) emulated_prefetch(p)
extern "C" void emulated_spans(const void* u, const void* a, long bytes)
{
    prefetch_spans[0][0] = static_cast<const char*>(u); prefetch_spans[0][1] = prefetch_spans[0][0] + bytes;
    prefetch_spans[1][0] = static_cast<const char*>(a); prefetch_spans[1][1] = a ? prefetch_spans[1][0] + bytes : nullptr;
    stray_prefetches = 0;
}
extern "C" long emulated_strays() { return stray_prefetches; }
"""

# The threaded mode's differences: one threadIdx per thread, the barrier, and what the pipeline uses.
THREADED = r"""
#include <cmath>
#include <cstdio>
#include <memory>
#include <type_traits>
#include <ucontext.h>
#include <vector>
/* Each GPU thread of a block is a fiber (ucontext): it runs until it waits at a barrier, then the
   next one runs; a barrier's phase ends when its last thread arrives. The same interleavings a
   barrier allows, at the cost of a function call per switch: real threads spent most of these
   tests' time in the kernel, scheduling hundreds of them on two cores at every barrier. */
static long progress;  /* arrivals, drops and ends: a scheduler round without any is a deadlock */
static void fiber_yield();
struct FiberBarrier {
    int expected, arrived = 0;
    long generation = 0;
    explicit FiberBarrier(int n) : expected(n) {}
    void arrive_and_wait()
    {
        const long phase = generation;
        ++progress;
        if (++arrived >= expected) { arrived = 0; ++generation; return; }
        while (generation == phase) fiber_yield();
    }
    void arrive_and_drop()  /* as std::barrier's: one fewer expected from this phase on */
    {
        ++progress;
        if (--expected <= arrived && arrived > 0) { arrived = 0; ++generation; }
    }
};
struct PendingCopy { void* dst; const void* src; std::size_t bytes; int group; };
struct Fiber {
    ucontext_t context;
    dim3 thread, block;
    int lane = 0;
    FiberBarrier* barrier = nullptr;  /* its block's */
    char* shared = nullptr;  /* its block's dynamic shared memory */
    FiberBarrier* warp = nullptr;
    double* slots = nullptr;
    unsigned long long* fragments = nullptr;  /* its warp's tensor-core deposits */
    std::vector<PendingCopy> pending;
    int committed = 0;
    bool done = false;
};
static Fiber* fiber;  /* the one running */
static ucontext_t scheduler;
static void fiber_yield() { swapcontext(&fiber->context, &scheduler); }
#define threadIdx (fiber->thread)
#define blockIdx (fiber->block)
#define dynamic_shared (fiber->shared)
#undef __syncthreads
#define __syncthreads() fiber->barrier->arrive_and_wait()
/* A thread-block cluster (`__cluster_dims__`): its blocks' threads are fibers of one scheduler, so a
   block may read another's shared memory (cluster_map, as `mapa`) between cluster barriers. */
#define EMULATED_CLUSTER
#define __cluster_dims__(...)
static FiberBarrier* cluster_barrier;
static std::vector<char*> cluster_shared;  /* each block's dynamic shared memory, by rank */
inline void cluster_sync() { cluster_barrier->arrive_and_wait(); }
template <class P> inline P* cluster_map(P* p, unsigned rank)
{
    return reinterpret_cast<P*>(cluster_shared.at(rank) + (reinterpret_cast<char*>(const_cast<std::remove_const_t<P>*>(p)) - fiber->shared));
}
/* Warp shuffles: a warp is 32 consecutive threads of the block (x fastest); every lane writes its
   value to the warp's slots, the warp meets, each reads its source lane (its own past the edge of
   its `width`-lane segment, as on the GPU), and the warp meets again before the slots are reused. */
#define warp_barrier (fiber->warp)
#define warp_slots (fiber->slots)  /* a float or a double, each exact in a double */
#define lane_of_thread (fiber->lane)
template <class T> inline T warp_exchange(T v, int source, int width)
{
    const int first = lane_of_thread / width * width;
    warp_slots[lane_of_thread] = v;
    warp_barrier->arrive_and_wait();
    const T got = (source >= first && source < first + width) ? (T)warp_slots[source] : v;
    warp_barrier->arrive_and_wait();
    return got;
}
template <class T> inline T __shfl_up_sync(unsigned, T v, int delta, int width = 32) { return warp_exchange(v, lane_of_thread - delta, width); }
template <class T> inline T __shfl_down_sync(unsigned, T v, int delta, int width = 32) { return warp_exchange(v, lane_of_thread + delta, width); }
/* Every lane's vote, as the GPU's full-mask ballot (all 32 lanes must reach it). */
inline unsigned __ballot_sync(unsigned, bool vote)
{
    const int first = lane_of_thread / 32 * 32;
    warp_slots[lane_of_thread] = vote ? 1.0 : 0.0;
    warp_barrier->arrive_and_wait();
    unsigned bits = 0;
    for (int l = 0; l < 32; ++l) if (warp_slots[first + l] != 0.0) bits |= 1u << l;
    warp_barrier->arrive_and_wait();
    return bits;
}
inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
""" + ASYNC_AND_COLLECTIVES

DYNAMIC_SHARED = re.compile(r"extern __shared__ (\w+) (\w+)\[\];")
CLUSTER_DIMS = re.compile(r"__cluster_dims__\((\d+), (\d+), (\d+)\)")

THREADED_DRIVER = r"""
static const void* kernel_u; static const void* kernel_a; static void* kernel_y; static const double* kernel_coef;
static int kernel_nz, kernel_ny, kernel_nx;
static void fiber_main()
{
    stencil((const elem_t*)kernel_u, (const elem_t*)kernel_a, (elem_t*)kernel_y, kernel_coef, kernel_nz, kernel_ny, kernel_nx);
    fiber->barrier->arrive_and_drop();
    cluster_barrier->arrive_and_drop();
    fiber->warp->arrive_and_drop();
    fiber->done = true;
}  /* returns to the scheduler (uc_link) */
constexpr int SHARED_GUARD = 1024;
extern "C" int emulate(int gx, int gy, int gz, int bx, int by, int bz, const void* u, const void* a, void* y,
                       const double* coef, int nz, int ny, int nx, int shared_bytes, int cx, int cy, int cz)
{
    constexpr std::size_t STACK = 256 * 1024;
    blockDim = dim3{(unsigned)bx, (unsigned)by, (unsigned)bz};
    gridDim = dim3{(unsigned)gx, (unsigned)gy, (unsigned)gz};
    kernel_u = u; kernel_a = a; kernel_y = y; kernel_coef = coef; kernel_nz = nz; kernel_ny = ny; kernel_nx = nx;
    const int count = bx * by * bz, block_warps = (count + 31) / 32, blocks = cx * cy * cz;
    const int threads = count * blocks, warps = block_warps * blocks;
    /* All ones, NaN in every float type, as far as a guard past the end: a kernel that reads shared memory it never
       filled, or past its allocation, reads NaN here, where the heap behind the buffer made it differ from run to run */
    std::vector<std::vector<char>> shared(blocks, std::vector<char>(shared_bytes + SHARED_GUARD, (char)0xFF));
    std::unique_ptr<char[]> stacks(new char[STACK * threads]);
    for (int k = 0; k < gz; k += cz) for (int j = 0; j < gy; j += cy) for (int i = 0; i < gx; i += cx) {
        /* one cluster (one block where the kernel names no cluster): its blocks by rank, x fastest */
        FiberBarrier cluster(threads);
        cluster_barrier = &cluster;
        cluster_shared.clear();
        std::vector<std::unique_ptr<FiberBarrier>> block_barriers, warp_barriers;
        for (int b = 0; b < blocks; ++b) {
            block_barriers.emplace_back(new FiberBarrier(count));
            cluster_shared.push_back(shared[b].data());
            for (int w = 0; w < block_warps; ++w) warp_barriers.emplace_back(new FiberBarrier(std::min(32, count - 32 * w)));
        }
        std::vector<double> slots(32 * warps);
        std::vector<unsigned long long> fragments(32 * 8 * warps);
        std::vector<Fiber> fibers(threads);
        for (int b = 0; b < blocks; ++b)
        for (int tz = 0; tz < bz; ++tz) for (int ty = 0; ty < by; ++ty) for (int tx = 0; tx < bx; ++tx) {
            const int linear = (tz * by + ty) * bx + tx, index = b * count + linear;
            const int warp = b * block_warps + linear / 32;
            Fiber& f = fibers[index];
            f.thread = dim3{(unsigned)tx, (unsigned)ty, (unsigned)tz};
            f.block = dim3{(unsigned)(i + b % cx), (unsigned)(j + b / cx % cy), (unsigned)(k + b / (cx * cy))};
            f.barrier = block_barriers[b].get();
            f.shared = shared[b].data();
            f.lane = linear % 32;
            f.warp = warp_barriers[warp].get();
            f.slots = slots.data() + warp * 32;
            f.fragments = fragments.data() + warp * 32 * 8;
            getcontext(&f.context);
            f.context.uc_stack.ss_sp = stacks.get() + STACK * index;
            f.context.uc_stack.ss_size = STACK;
            f.context.uc_link = &scheduler;
            makecontext(&f.context, fiber_main, 0);
        }
        /* Each warp in turn sits out two rounds, and independently each in turn from the last one down eight,
           so warps drift apart as they may on the GPU: in index order alone warp 0 always ran first, and
           `bulk` refilling a buffer another warp still read passed; two rounds catch that, and eight a
           producer warp (the last) that refills without waiting: it runs a plane a round, so a computing
           warp's lag must exceed the ring's buffers, at most 8;
           a round without progress is run again with every warp before it counts as a deadlock. */
        bool everyone = false;
        for (int left = threads, round = 0; left > 0; ++round) {
            const long before = progress;
            const int held = everyone || warps < 2 ? -1 : round / 2 % warps;
            const int held_long = everyone || warps < 2 ? -1 : warps - 1 - round / 8 % warps;  /* from the last warp down */
            for (Fiber& f : fibers) {
                const int index = &f - fibers.data(), warp = index / count * block_warps + index % count / 32;
                if (f.done || warp == held || warp == held_long) continue;
                fiber = &f;
                swapcontext(&scheduler, &f.context);
                if (f.done) { --left; ++progress; }
            }
            if (left > 0 && progress == before) {
                if (!everyone) { everyone = true; continue; }
                /* every thread left waits at a barrier no other will reach */
                std::fprintf(stderr, "emulation: deadlock in block (%d, %d, %d): %d threads wait at barriers\n", i, j, k, left);
                return 1;
            }
            everyone = false;
        }
    }
    return 0;
}
"""

DRIVER = r"""
extern "C" void emulate(int gx, int gy, int gz, int bx, int by, int bz, const void* u, const void* a, void* y,
                        const double* coef, int nz, int ny, int nx)
{
    blockDim = dim3{(unsigned)bx, (unsigned)by, (unsigned)bz};
    gridDim = dim3{(unsigned)gx, (unsigned)gy, (unsigned)gz};
    for (int k = 0; k < gz; ++k) for (int j = 0; j < gy; ++j) for (int i = 0; i < gx; ++i)
        for (int pass = 0; pass < PASSES; ++pass)
        for (int tz = 0; tz < bz; ++tz) for (int ty = 0; ty < by; ++ty) for (int tx = 0; tx < bx; ++tx) {
            blockIdx = dim3{(unsigned)i, (unsigned)j, (unsigned)k};
            threadIdx = dim3{(unsigned)tx, (unsigned)ty, (unsigned)tz};
            stencil((const elem_t*)u, (const elem_t*)a, (elem_t*)y, coef, nz, ny, nx);
        }
}
"""


# Through the project's build cache (measurement/harness/buildcache.py): compiling was 188 of these
# tests' 226 s on a 2-core machine (session 35), and most sources are the same from one run to the next,
# whatever the harness's own code (the text compiled holds the prelude and the driver).
RECIPE = buildcache.Recipe("cuda_emulation", ("g++", "-O1", "-std=c++20", "-pthread", "-shared", "-fPIC",
                                              "-Wno-unknown-pragmas"), ".cpp", harness_keyed=False)
_built: dict[str, ctypes.CDLL] = {}


def build(source: str) -> ctypes.CDLL:
    """The source compiled once (each kernel runs on both paths, and the same source renders for
    several cases), loaded through the build cache's verified copy."""
    if source in _built:
        return _built[source]
    body = source.replace("#include <cuda_fp16.h>", "/* cuda_fp16.h: the prelude defines __half */")
    if threaded(source):
        body = DYNAMIC_SHARED.sub(r"\1* \2 = reinterpret_cast<\1*>(dynamic_shared);", body)
        text = PRELUDE + THREADED + body + THREADED_DRIVER
    else:
        passes = 2 if "__syncthreads" in source else 1
        text = PRELUDE + body + f"#define PASSES {passes}\n" + DRIVER
    _built[source] = ctypes.CDLL(buildcache.loadable(buildcache.obtain(RECIPE, text)))
    return _built[source]


def threaded(source: str) -> bool:
    """Real threads: a kernel with dynamic shared memory (barriers inside its loops) or one whose
    lanes meet at warp shuffles or ballots."""
    return DYNAMIC_SHARED.search(source) is not None or "_sync(0x" in source


# y starts as a NaN of its own payload, so a cell the kernel wrote NaN into (from shared memory it never filled,
# which starts as all ones) counts as written and wrong, not as missed: arithmetic on NaN gives the all-ones
# operand's payload or the default NaN, never this one.
UNWRITTEN = {2: 0x7E5A, 4: 0x7FC05A5A, 8: 0x7FF8000000005A5A}


def emulate(case: Case, source: str, launch: dict, inputs: dict[str, np.ndarray], coefficients: np.ndarray,
            misalign: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(the output grid, a mask of elements the kernel wrote). Arrays sit 64 elements into NaN
    padding (y's the UNWRITTEN NaN) 16-byte aligned, or one element further with `misalign`, to take the scalar path."""
    pad = 64 + (1 if misalign else 0)
    arrays = {}
    for name in (*case.input_names, "y"):
        full = np.full(case.points + 2 * 64 + 2, np.nan, dtype=case.dtype)
        if name == "y":
            full.view(_bits(full)).fill(UNWRITTEN[full.itemsize])
        view = full[pad : pad + case.points].reshape(case.shape)
        if name != "y":
            view[...] = inputs[name]
        arrays[name] = (full, view)
    if not misalign:  # else the "vector path" run would quietly take the scalar one
        assert all(view.ctypes.data % 16 == 0 for _, view in arrays.values()), "numpy gave an array not 16-byte aligned"
    grid, block, _ = cuda_launch_geometry(case, launch)
    nz, ny, nx = (1, *case.shape) if len(case.shape) == 2 else case.shape
    coef = np.ascontiguousarray(coefficients, dtype=np.float64)
    pointer = lambda name: arrays[name][1].ctypes.data_as(ctypes.c_void_p) if name in arrays else None  # noqa: E731
    fibers = threaded(source)
    cluster = CLUSTER_DIMS.search(source)
    dims = tuple(int(v) for v in cluster.groups()) if cluster else (1, 1, 1)
    if any(g % c for g, c in zip(grid, dims)):
        raise AssertionError(f"grid {grid} is no whole number of clusters {dims}: the launch would fail on the GPU")
    library = build(source)
    library.emulated_spans(pointer("u"), pointer("a"), ctypes.c_long(case.points * case.dtype.itemsize))
    library.emulated_strays.restype = ctypes.c_long
    status = library.emulate(*[ctypes.c_int(v) for v in (*grid, *block)], pointer("u"), pointer("a"), pointer("y"),
                             coef.ctypes.data_as(ctypes.POINTER(ctypes.c_double)), ctypes.c_int(nz), ctypes.c_int(ny),
                             ctypes.c_int(nx), *([ctypes.c_int(launch.get("shared_bytes", 0)), *map(ctypes.c_int, dims)]
                                                 if fibers else []))
    if fibers and status != 0:
        raise AssertionError("the kernel's threads deadlocked at a barrier (the emulation says where)")
    if strays := library.emulated_strays():
        raise AssertionError(f"the kernel prefetched {strays} addresses outside its input arrays")

    full, view = arrays["y"]
    unwritten = full.view(_bits(full)) == UNWRITTEN[full.itemsize]
    if not (unwritten[:pad].all() and unwritten[pad + case.points :].all()):
        raise AssertionError("the kernel wrote into the padding around y")
    return view.copy(), ~unwritten[pad : pad + case.points].reshape(case.shape)


def _bits(array: np.ndarray) -> np.dtype:
    return np.dtype(f"u{array.itemsize}")
