"""The part of tests/forge/cuda_emulation.py's fiber prelude that emulates Hopper's asynchronous copies and
warp- and cluster-wide collectives: cp.async groups, mbarriers (their phases, bulk copies, arrivals from another
block of the cluster) and the tensor cores' ldmatrix and mma.sync. Kept apart so the driver module stays short; it
is C++ text appended to that prelude, after the fibers, barriers, clusters and shuffles it uses."""

ASYNC_AND_COLLECTIVES = r"""/* cp.async as kernels spell it (copy_async, commit_async, wait_async<N>), with the GPU's ordering:
   a copy lands only at the wait that covers its group, so a kernel that reads a buffer before
   waiting for it, or refills one another thread may still read, reads stale values here too. */
#define EMULATED_CP_ASYNC
#include <cstring>
#include <map>
#define pending_copies (fiber->pending)
#define committed_groups (fiber->committed)
template <class T> inline void copy_async(T* dst, const T* src) { pending_copies.push_back({dst, src, sizeof(T), committed_groups}); }
inline void commit_async() { ++committed_groups; }
template <int N> inline void wait_async()
{
    std::vector<PendingCopy> later;
    for (const PendingCopy& c : pending_copies)
        if (c.group < committed_groups - N) std::memcpy(c.dst, c.src, c.bytes); else later.push_back(c);
    pending_copies.swap(later);
}
/* mbarriers and the copy engine's bulk copies (`planes` with `bulk`): a phase completes when its arrivals
   and the bytes it expects are all in, and the bulk copies it covers land only then; a waiter for a
   parity waits while the barrier's phase still has it. A kernel that reads a buffer before its phase
   completes, or refills one a warp still reads, reads stale or overwritten values here too. */
#define EMULATED_BULK
struct EmuMbarrierState { int expected = 0, arrived = 0; long pending = 0; unsigned phase = 0; std::vector<PendingCopy> copies; };
/* Eight bytes, as the GPU's, so a kernel may lay its mbarriers out in dynamic shared memory (`cpipe` with `signal`):
   the state lives in emu_barriers, by address. */
struct EmuMbarrier { unsigned long long slot; };
static_assert(sizeof(EmuMbarrier) == 8);
typedef EmuMbarrier mbar_t;
static std::map<const void*, EmuMbarrierState> emu_barriers;
inline EmuMbarrierState& bar_state(const mbar_t* b) { return emu_barriers[b]; }
inline void bar_complete(mbar_t* bar)
{
    EmuMbarrierState* b = &bar_state(bar);
    if (b->arrived < b->expected || b->pending != 0) return;
    for (const PendingCopy& c : b->copies) std::memcpy(c.dst, c.src, c.bytes);
    b->copies.clear();
    b->arrived = 0;
    b->phase ^= 1u;
}
inline void bar_init(mbar_t* b, unsigned count) { bar_state(b) = EmuMbarrierState{(int)count}; }
inline void bar_fence_init() {}
inline void bar_expect(mbar_t* b, unsigned bytes) { ++progress; bar_state(b).pending += bytes; ++bar_state(b).arrived; bar_complete(b); }
inline void bar_arrive(mbar_t* b) { ++progress; ++bar_state(b).arrived; bar_complete(b); }
inline void bar_wait(mbar_t* b, unsigned parity) { while (bar_state(b).phase == parity) fiber_yield(); }
inline void bulk_copy(void* dst, const void* src, unsigned bytes, mbar_t* b)
{
    ++progress;
    bar_state(b).copies.push_back({dst, src, bytes, 0});
    bar_state(b).pending -= bytes;
    bar_complete(b);
}
inline void __syncwarp(unsigned = 0xffffffffu) { warp_barrier->arrive_and_wait(); }
/* Tensor-core fragments (`tcq`, forge/handwritten_tensor.py): ldmatrix and mma.sync m16n8k16 (f16 x f16 + f32) as
   warp-collective operations with the PTX ISA's fragment layouts: each lane deposits its row address or its
   registers, the warp meets, each lane assembles its own results (products summed in double, rounded to f32 once),
   and the warp meets again before the deposits are reused. */
#define EMULATED_MMA
#define warp_fragments (fiber->fragments)  /* 8 words a lane */
inline unsigned half_bits(__half h) { return __half_as_ushort(h); }
inline double half_value(unsigned bits) { const unsigned short s = (unsigned short)bits; __half h; std::memcpy(&h, &s, 2); return (double)h; }
template <int MATRICES> inline void load_matrices(unsigned* r, const __half* row)
{
    warp_fragments[lane_of_thread * 8] = reinterpret_cast<unsigned long long>(row);
    warp_barrier->arrive_and_wait();
    for (int m = 0; m < MATRICES; ++m) {  /* row lane / 4 of matrix m, whose rows lanes 8m .. 8m + 7 gave */
        const __half* at = reinterpret_cast<const __half*>(warp_fragments[(m * 8 + lane_of_thread / 4) * 8]) + 2 * (lane_of_thread % 4);
        r[m] = half_bits(at[0]) | half_bits(at[1]) << 16;
    }
    warp_barrier->arrive_and_wait();
}
inline void ldsm_x4(unsigned* r, const __half* row) { load_matrices<4>(r, row); }
inline void ldsm_x2(unsigned* r, const __half* row) { load_matrices<2>(r, row); }
inline void mma16816(float* d, const unsigned* a, const unsigned* b)
{
    unsigned long long* mine = warp_fragments + lane_of_thread * 8;
    for (int i = 0; i < 4; ++i) mine[i] = a[i];
    mine[4] = b[0];
    mine[5] = b[1];
    warp_barrier->arrive_and_wait();
    auto A = [](int row, int k) {  /* lane (row % 8, k % 8 / 2), register (row >= 8) + 2 (k >= 8), half k % 2 */
        const unsigned reg = (unsigned)warp_fragments[((row % 8) * 4 + k % 8 / 2) * 8 + (row >= 8) + 2 * (k >= 8)];
        return half_value(k % 2 ? reg >> 16 : reg);
    };
    auto B = [](int k, int n) {  /* lane (n, k % 8 / 2), register 4 + (k >= 8), half k % 2 */
        const unsigned reg = (unsigned)warp_fragments[(n * 4 + k % 8 / 2) * 8 + 4 + (k >= 8)];
        return half_value(k % 2 ? reg >> 16 : reg);
    };
    const int g = lane_of_thread / 4, q = lane_of_thread % 4;
    float out[4];
    for (int e = 0; e < 4; ++e) {  /* d[e]: row g + 8 (e / 2), column 2q + e % 2 */
        double sum = d[e];
        for (int k = 0; k < 16; ++k) sum += A(g + 8 * (e / 2), k) * B(k, 2 * q + e % 2);
        out[e] = (float)sum;
    }
    warp_barrier->arrive_and_wait();
    for (int e = 0; e < 4; ++e) d[e] = out[e];
}
/* Another block's mbarriers (`cpipe` with `signal`): an arrival lands on that block's barrier itself, and a
   wait at cluster scope is a wait. */
typedef mbar_t* remote_bar_t;
inline remote_bar_t cluster_bar(mbar_t* bars, unsigned rank) { return cluster_map(bars, rank); }
inline void bar_arrive_remote(remote_bar_t bars, int index) { bar_arrive(bars + index); }
inline void bar_wait_cluster(mbar_t* b, unsigned parity) { bar_wait(b, parity); }
"""
