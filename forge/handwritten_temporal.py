"""`pipe`: diamond_tsT (T applications of star_1, f32) as a 3.5-D pipeline: the T steps run one
after the other on a block's tile while the block marches along z, every intermediate step kept
on chip, so the grid is read once and written once for all T steps.

Why not the octahedron (`octa`, forge/handwritten.py): it evaluates the composed radius-T stencil,
C(T+3, 3) multiply-adds a point (165 for T = 8) through a queue of 2T+1 partial planes, and on
the H200 it lost to T launches of the admitted star_1 kernel for T = 8 (0.77-0.87x, the issue-15
re-gate). A step of star_1 is 7 loads and 7 flops; T of them cost 7T flops a point (56 for T = 8),
and what limits them on chip is moving the in-plane neighbours, not arithmetic.

The design. A block owns an input tile of W x H points (x, y) with a halo of T on every side, so
its output tile is (W - 2T) x (H - 2T); each thread owns V = 4 consecutive x points of one row of
it, for every step. The block marches along z over its chunk of L output planes; at iteration k
it loads input plane k, and step s (1..T) computes its plane k - s from step s-1's planes
k-s-1, k-s and k-s+1:

* the z neighbours are the thread's own registers: step s-1's plane k-s+1 was computed by the same
  thread a moment before in this iteration, k-s and k-s-1 in the two previous iterations (a queue
  of two planes a step: 2 x T x V registers);
* the in-plane neighbours of plane k-s come from shared memory, where every thread wrote its
  values of that plane in the previous iteration; each step's plane is double-buffered by the
  parity of k, so one __syncthreads per iteration orders all T steps (no step waits for another
  inside an iteration).

Step s is valid s points inside the tile's edge, so the tile's edge values are computed from
garbage and never reach the output tile. The first 2T iterations of a chunk fill the pipeline
(the input planes of the z halo); L trades that refill against the number of blocks.

Cost a point and step: one 16-byte shared store a thread, the rows above and below as 16-byte
shared loads, the x neighbours at the thread's ends as two scalar shared loads. W x H sets the
redundancy: step s computes (W - 2s)(H - 2s) points for (W - 2T)(H - 2T) outputs.
"""
from __future__ import annotations

import math

from measurement.harness.cases import Case
from measurement.harness.codegen import cuda_type

from .handwritten_temporal_source import SOURCE, VECTOR_HELPERS, prefetched, variant

V = 4  # x points a thread owns: one float4 of the row


REGISTER_FILE = 65536  # 32-bit registers an SM (and a block) has on the H200
SHARED_LIMIT = 227 * 1024  # bytes of shared memory a block may opt in to on the H200


def registers_per_thread(t: int) -> int:
    """About 12T + 26 (nvcc -arch=sm_90 -Xptxas -v: 64 for T = 4, 122 for T = 8)."""
    return 12 * t + 26


def x_halo(t: int) -> int:
    """The halo in x rounded up to whole vectors, so every tile starts on a vector boundary."""
    return -(-t // V) * V


def shared_bytes(t: int, width: int, height: int) -> int:
    """Steps 0..T-1, each plane double-buffered, one float a point."""
    return t * 2 * width * height * 4


def check_parameters(case: Case, width: int, height: int, chunk: int) -> None:
    stencil = case.stencil
    if stencil.dims != 3 or stencil.family != "star" or stencil.radius != 1 or case.precision not in VECTOR_HELPERS:
        raise ValueError(f"{case.id}: pipe is for star_1, varcoef_star_1 and diamond_tsT in f32 or f16")
    t = stencil.time_steps
    if width % V or width // V * height > 1024:
        raise ValueError(f"tile {width}x{height}: the width must be a multiple of {V}, at most 1024 threads a block")
    if width <= 2 * x_halo(t) or height <= 2 * t or chunk < 1:
        raise ValueError(f"tile {width}x{height} with chunk {chunk}: no output points for T = {t}")
    if shared_bytes(t, width, height) > SHARED_LIMIT:
        raise ValueError(f"tile {width}x{height}: {shared_bytes(t, width, height)} bytes of shared memory for T = {t}")


def render_pipe(case: Case, width: int = 64, height: int = 32, chunk: int = 128, prefetch: int = 1,
                shuffle: bool = False, skip: bool = False, min_blocks: int = 1, pair: bool = False) -> tuple[str, dict, str]:
    """(source, launch, hypothesis) of the pipeline for a star_1-family case (T = 1 for star_1 and
    varcoef_star_1: the z march with shared in-plane neighbours, one global read a point).
    `prefetch`: input planes loaded ahead into registers. One plane ahead and a barrier a plane
    left the f16 T = 1 rounds short of bytes in flight (docs/forge.md); more planes ahead raise
    them at V registers a plane. The changes aimed at the on-chip work of T > 1 (`variant`, forge/handwritten_temporal_source.py):
    `shuffle` (x neighbours by warp shuffles), `skip` (a warp whose rows step s no longer needs
    skips it), `min_blocks` (registers capped so that many blocks share an SM) and `pair` (the
    march two iterations a body, their phases constants: no queue moves, fixed plane addresses)."""
    check_parameters(case, width, height, chunk)
    if not 1 <= prefetch <= 8:
        raise ValueError(f"prefetch {prefetch}: 1 to 8 planes ahead")
    if shuffle and not shuffles_fit(width // V, height):
        raise ValueError(f"tile {width}x{height}: shuffles need a power-of-two row of at most 32 threads and whole warps")
    if not 1 <= min_blocks <= 8:
        raise ValueError(f"min_blocks {min_blocks}: 1 to 8 blocks an SM")
    t = case.stencil.time_steps
    tx = width // V
    threads = tx * height
    out_x, out_y = width - 2 * x_halo(t), height - 2 * t
    redundancy = sum((width - 2 * s) * (height - 2 * s) for s in range(1, t + 1)) / (t * out_x * out_y)
    varcoef = case.stencil.variable_coefficient
    if pair and prefetch > 1:
        raise ValueError("pair keeps one plane ahead: prefetch 1")
    source = variant(prefetched(SOURCE, prefetch), shuffle, skip, min_blocks, pair).format(
        T=t, TX=tx, H=height, L=chunk, THREADS=threads, case=case.id, W=width, OX=out_x, OY=out_y,
        INCLUDE="#include <cuda_fp16.h>\n" if case.precision == "f16" else "", ELEM=cuda_type(case.precision),
        VECTOR=VECTOR_HELPERS[case.precision], ALIGN=V * case.dtype.itemsize - 1,
        AMASK=" | (unsigned long long)a" if varcoef else "",
        VARCOEF_VEC=("                float w[V];\n                load4(a + o, w);\n"
                     "#pragma unroll\n                for (int i = 0; i < V; ++i) nw[i] *= w[i];\n") if varcoef else "",
        VARCOEF_SCALAR=" * (float)a[o + i]" if varcoef else "")
    launch = {"block": [tx, height, 1], "tile": [out_x, out_y, chunk], "shared_bytes": shared_bytes(t, width, height)}
    if t == 1:
        hypothesis = (f"{case.id}: the z march with the in-plane neighbours from a shared plane ({width}x{height} "
                      f"tiles, {chunk} planes a block): every input point read from DRAM once plus a "
                      f"{width * height / (out_x * out_y) - 1:.0%} halo, {V * case.dtype.itemsize}-byte {case.precision} loads, the y and x "
                      "neighbours out of shared memory instead of L1/L2; expected over the fair straightforward "
                      "kernel, which reads 7 neighbours through the caches.")
        return source, launch, hypothesis
    hypothesis = (f"{case.id}: the {t} steps pipelined on chip along z ({width}x{height} tiles, {out_x}x{out_y} "
                  f"outputs, {chunk} planes a block): the grid read and written once instead of {t} times, "
                  f"{7 * t} flops a point at {redundancy:.2f}x redundant halo work, the in-plane neighbours through "
                  "double-buffered shared planes with one barrier an iteration; expected well over the composed "
                  f"bound ({t} memory-bound launches), limited by shared-memory traffic.")
    return source, launch, hypothesis


def candidate(case: Case) -> tuple[str, dict, str, str]:
    """The `pipe` candidate campaigns submit (forge.candidates.matrix_candidates), with the
    tile and chunk of `default_parameters`. For T > 1 with the changes the session-27 sweeps
    (docs/benchmarks/temporal_sweep_h200_s27.json, temporal_sweep_ts4_h200_s27.json: every
    variant beside the composed bound in the same passes) measured fastest: shuffles wherever a
    row is a power of two lanes (diamond_ts8/512^3 0.940x -> 1.207x of 8 launches; the 24-lane
    rows of 96 x 32 have none), and skipped warps up to T = 4 only (with shuffles diamond_ts4/512^3
    1.453x -> 1.619x; at T = 8 they cost 1.207x -> 1.074x: with one block an SM, the per-step
    branch keeps the compiler from overlapping the steps' shared loads)."""
    width, height, chunk = default_parameters(case)
    t = case.stencil.time_steps
    shuffle, skip = t > 1 and shuffles_fit(width // V, height), 1 < t <= 4
    source, launch, hypothesis = render_pipe(case, width, height, chunk, shuffle=shuffle, skip=skip)
    what = f"3.5-D pipeline of the {t} steps" if t > 1 else "z march, in-plane neighbours from a shared plane"
    made = [names for names, on in ((("x neighbours by shuffles", "the x neighbours by warp shuffles"), shuffle),
                                    (("idle warps skip steps", "warps skipping the steps none of their rows needs"), skip))
            if on]
    if made:
        hypothesis += (f" Changed from the pipe gated before: {' and '.join(long for _, long in made)}, less on-chip "
                       "work a step (temporal_sweep_h200_s27.json, temporal_sweep_ts4_h200_s27.json).")
    changes = "".join(f", {short}" for short, _ in made)
    return f"pipe: {what}, {width}x{height} tiles, {chunk} planes a block{changes}", launch, hypothesis, source


def pair_candidates(case: Case) -> list[tuple[str, dict, str, str]]:
    """`pipe` marching two iterations a body (`pair`: the two phases' plane addresses and queue slots
    are constants, no queue moves), for 1 < T <= 4 in f32, where session 39's H200 sweep measured it
    ahead of every admitted kernel (docs/benchmarks/temporal_pair_h200_s39.json, each variant beside the
    composed bound and the admitted kernel in the same passes): at the pipe candidate's own tile and
    chunk (`pipe+pair`; diamond_ts4/256^3 at 96 x 32 L64 with skipped warps, 1.623x the composed
    bound against the admitted kernel's 1.557x) and at 64 x 24 tiles with shuffles and skipped warps,
    the chunk by `chunk_cost` (`pipe64x24+pair`; diamond_ts4/512^3 at L128, 1.801x against 1.574x).
    Not offered at T = 8: there the best paired variant ran at 0.78x of two launches of the paired ts4
    kernel (temporal_pair_ts8_h200_s40.json), which is its bound."""
    t = case.stencil.time_steps
    if case.precision != "f32" or not 1 < t <= 4:
        return []
    made = []
    for name, (w, h, length) in (("pipe+pair", default_parameters(case)), ("pipe64x24+pair", (64, 24, best_chunk(case, 64, 24)))):
        shuffle = shuffles_fit(w // V, h)
        source, launch, hypothesis = render_pipe(case, w, h, length, shuffle=shuffle, skip=True, pair=True)
        hypothesis += (" Marching two iterations a body, each phase's plane addresses and queue slots constants: "
                       "fewer instructions an iteration (temporal_pair_h200_s39.json).")
        made.append((f"{name}: 3.5-D pipeline of the {t} steps, {w}x{h} tiles, {length} planes a block, "
                     f"{'x neighbours by shuffles, ' if shuffle else ''}idle warps skip steps, two iterations a body",
                     launch, hypothesis, source))
    return made


def shuffles_fit(lanes: int, rows: int) -> bool:
    """Whether a block of `rows` rows of `lanes` threads can take its x neighbours by warp shuffles:
    a row must be a power-of-two segment of a warp (__shfl_*_sync's width) and the block whole warps."""
    return lanes & (lanes - 1) == 0 and lanes <= 32 and lanes * rows % 32 == 0


def default_parameters(case: Case) -> tuple[int, int, int]:
    """96 x 32 tiles up to T = 4, 64 x 32 above (a 24-row tile at T = 8 keeps 8 of 24 rows), 128 x 24
    for T = 1; the chunk by `chunk_cost` among those that fill the SMs. For T > 1 a single whole
    wave counts as full: on the H200 (docs/benchmarks/temporal_sweep_ts4_h200_s27.json) 96 x 32 with
    skipped warps ran diamond_ts4/256^3 fastest at L64, exactly one wave (1.694x of the composed
    bound; 64 x 24 with shuffles 1.547x), and 512^3 at L128 (1.624x; 64 x 24 with shuffles 1.633x).
    T = 1 keeps two waves, the rule its f16 rounds were gated under."""
    t = case.stencil.time_steps
    width, height = (96, 32) if 1 < t <= 4 else (128, 24) if t == 1 else (64, 32)  # T = 1: a 4-point x halo, so wider
    return width, height, best_chunk(case, width, height)


def best_chunk(case: Case, width: int, height: int) -> int:
    """The chunk of least `chunk_cost` among those that fill the SMs with width x height tiles (`default_parameters`)."""
    chunks = [c for c in (16, 32, 64, 128, 256, 512) if c < case.shape[0]] or [16]
    least = 1 if case.stencil.time_steps > 1 else 2  # below one wave, or a lone partial second one, SMs idle
    full = [c for c in chunks if waves(case, width, height, c) >= least] or chunks[:1]
    return min(full, key=lambda c: (chunk_cost(case, width, height, c), -c))


def chunk_cost(case: Case, width: int, height: int, chunk: int) -> float:
    """Relative time of a chunk length: the z halo's refill, (L + 2T) / L, times the last wave's
    idle share, ceil(waves) / waves."""
    t = case.stencil.time_steps
    w = waves(case, width, height, chunk)
    return (chunk + 2 * t) / chunk * math.ceil(w) / w


def waves(case: Case, width: int, height: int, chunk: int, sms: int = 132) -> float:
    """Blocks over the slots of the H200's SMs, an SM holding as many blocks as its registers
    (registers_per_thread), shared memory (228 KiB) and threads (2048) allow."""
    t = case.stencil.time_steps
    nz, ny, nx = case.shape
    threads = width // V * height
    per_sm = min(REGISTER_FILE // (threads * registers_per_thread(t)), 228 * 1024 // (shared_bytes(t, width, height) + 1024),
                 2048 // threads)
    blocks = math.ceil(nx / (width - 2 * x_halo(t))) * math.ceil(ny / (height - 2 * t)) * math.ceil((nz - 2 * t) / chunk)
    return blocks / (max(per_sm, 1) * sms)
