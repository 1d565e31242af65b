"""The variants benchmarks/handwritten_sweep.py times, family by family: each a list of (label, forge/handwritten.py
`render` parameters) for a case, so a sweep's JSON names every kernel by the parameters that rebuild it."""
from __future__ import annotations

from forge.candidates import marching_down, rows8_fits
from forge.handwritten import default_chunk


def marching_kernels(case) -> list[tuple[str, dict]]:
    """rows16, short4, and rows8 where the campaign offers it: the kernels most families change."""
    return [("rows16", {"by": 8}), ("short4", {"by": 4})] + ([("rows8", {"by": 8, "vector_bytes": 8})] if rows8_fits(case) else [])


def variants(case) -> list[tuple[str, dict]]:
    """rows16 (8-row blocks, default chunk, one vector), then each parameter changed alone."""
    chunk = default_chunk(case, 1)
    base = {"nv": 1, "by": 8, "chunk": chunk}
    changes = [("rows16", {})]
    changes += [(f"by={by}", {"by": by}) for by in (4, 16, 32)]
    changes += [(f"chunk={c}", {"chunk": c}) for c in (chunk // 4, chunk // 2, chunk * 2) if c >= 1]
    changes += [("nv=2", {"nv": 2}), ("nv=2,by=4", {"nv": 2, "by": 4})]
    return [(label, {**base, **change}) for label, change in changes]


def change_variants(case, march: bool = False) -> list[tuple[str, dict]]:
    """rows16, short4 (and rows8 where the campaign offers it), each unchanged, with the x halo by
    shuffles, with L2::256B loads, and with both; with `march`, each unchanged and with odd chunks
    marching down (`alternate`)."""
    base = {"nv": 1, "chunk": default_chunk(case, 1)}
    changes = ([("", {}), ("+alternate", {"alternate": True})] if march else
               [("", {}), ("+shuffle", {"shuffle": True}), ("+l2", {"l2_prefetch": True}),
                ("+shuffle+l2", {"shuffle": True, "l2_prefetch": True})])
    return [(name + label, {**base, **kernel, **change}) for name, kernel in marching_kernels(case) for label, change in changes]


def lean_variants(case) -> list[tuple[str, dict]]:
    """short4, rows16 (and rows8 where offered), each as gated, with `split` and `stride`, marching
    down, and marching down with both; and rows16 with `split` alone, to tell the two apart."""
    base = {"nv": 1, "chunk": default_chunk(case, 1)}
    lean = {"split": True, "stride": True}
    changes = [("", {}), ("+lean", lean), ("+alternate", {"alternate": True}), ("+alternate+lean", {"alternate": True, **lean})]
    made = [(name + label, {**base, **kernel, **change}) for name, kernel in marching_kernels(case) for label, change in changes]
    return made + [("rows16+split", {**base, "by": 8, "split": True})]


def stream_variants(case) -> list[tuple[str, dict]]:
    """rows16 as gated (the column every row is divided by), each `lean` kernel marching up and down,
    and each of those with session 32's evict-first output stores (`streaming`)."""
    made = [(label, p) for label, p in lean_variants(case) if label == "rows16" or label.endswith("+lean")]
    return made + [(f"{label}+stream", {**p, "streaming": True}) for label, p in made if label != "rows16"]


def lean_family(case, kernels: list[tuple[str, dict]], parameter: str, values: tuple[int, ...]) -> list[tuple[str, dict]]:
    """rows16 as gated, then each of `kernels` with `split` and `stride` (marching down too where
    forge/candidates.py `marching_down` offers it) at each of `values` of `parameter`, labelled
    `+PARAMETERVALUE` (`+PARAMETER` for True) where it is not the first value (the kernel's own)."""
    chunk = default_chunk(case, 1)
    base = {"nv": 1, "chunk": chunk, "split": True, "stride": True}
    marches = [("", {})] + ([("+alternate", {"alternate": True})] if marching_down(case, chunk) else [])
    made = [("rows16", {"nv": 1, "chunk": chunk, "by": 8})]
    for (name, kernel), (march, down) in [(k, m) for m in marches for k in kernels]:
        for value in values:
            suffix = "" if value == values[0] else f"+{parameter}" if value is True else f"+{parameter}{value}"
            label = f"{name}{march}+lean{suffix}"
            made.append((label, {**base, **kernel, **down, parameter: value}))
    return made


def rows_variants(case) -> list[tuple[str, dict]]:
    """Each `lean` kernel with 1, 2 and 4 rows a thread (session 32's `ry`)."""
    return lean_family(case, marching_kernels(case), "ry", (1, 2, 4))


def tall_variants(case) -> list[tuple[str, dict]]:
    """rows16's and rows8's lean kernels in blocks of 8, 16 and 32 rows: a taller block reads fewer halo
    rows from the L2 for its rows (session 32's ncu: star_2/512^3 f32 reads 1.86x its input from the L2),
    at one row a thread, so without the registers that several rows a thread cost."""
    return lean_family(case, [("rows16", {})] + ([("rows8", {"vector_bytes": 8})] if rows8_fits(case) else []), "by", (8, 16, 32))


def unroll_variants(case) -> list[tuple[str, dict]]:
    """rows16 as gated, then each kernel marching up and down with its march unrolled 1, 2, 4 and 8 rows (planes) a
    step (session 34's `unroll`); in 2D at the default chunk and twice it (rows16, short4 and rows8 where offered), in
    3D the `lean` kernels at the default chunk (`marching_down` where offered)."""
    if case.stencil.dims == 3:
        return lean_family(case, marching_kernels(case), "unroll", (2, 4, 8))
    chunk = default_chunk(case, 1)
    made = [("rows16", {"nv": 1, "chunk": chunk, "by": 8})]
    for name, kernel in marching_kernels(case):
        for march, down in (("", {}), ("+alternate", {"alternate": True})):
            for length in (chunk, 2 * chunk):
                for unroll in (1, 2, 4, 8):
                    made.append((f"{name}{march}+u{unroll}+l{length}", {"nv": 1, "chunk": length, **kernel, **down, "unroll": unroll}))
    return made


def narrow_variants(case) -> list[tuple[str, dict]]:
    """rows16 as gated, short4 marching up and down, then one double a lane (8-byte "vectors" in f64, session 34: tuned
    Halide's shape, whose star2d_1 f64 kernel runs one point a thread down 64 rows) in 2-, 4- and 8-row blocks at the
    default chunk and twice it, marching up and down, each as is and lean (`split` and `stride`)."""
    chunk = default_chunk(case, 1)
    made = [("rows16", {"nv": 1, "chunk": chunk, "by": 8}), ("short4", {"nv": 1, "chunk": chunk, "by": 4}),
            ("short4+alternate", {"nv": 1, "chunk": chunk, "by": 4, "alternate": True})]
    for by in (2, 4, 8):
        for length in (chunk, 2 * chunk):
            for march, down in (("", {}), ("+alternate", {"alternate": True})):
                for lean, changes in (("", {}), ("+lean", {"split": True, "stride": True})):
                    made.append((f"one{by}{march}{lean}+l{length}",
                                 {"nv": 1, "chunk": length, "by": by, "vector_bytes": 8, **down, **changes}))
    return made


def burst_variants(case) -> list[tuple[str, dict]]:
    """rows16, short4 marching down, then `burst` (session 41) in 4, 8 and 16 rows, 1-, 2-, 4- and (session 45) 8-row blocks,
    8- and 16-byte vectors."""
    chunk = default_chunk(case, 1)
    made = [("rows16", {"nv": 1, "chunk": chunk, "by": 8}), ("short4+alternate", {"nv": 1, "chunk": chunk, "by": 4, "alternate": True})]
    return made + [(f"burst{vb}+by{by}+l{rows}", {"nv": 1, "chunk": rows, "by": by, "vector_bytes": vb, "split": True, "burst": True})
                   for vb in (8, 16) for by in (1, 2, 4, 8) for rows in (4, 8, 16)]


def bounds_variants(case) -> list[tuple[str, dict]]:
    """rows16's and short4's lean kernels with their registers capped for 40 and 48 resident warps an SM (session 45's
    `min_blocks`: 5 and 6 blocks of 8 rows, 10 and 12 of 4). Session 44's Nsight Compute put star_1/512^3 f16's admitted
    kernel at 45-48% achieved occupancy (52 registers) and DRAM at 73% of its peak against the copy's 86%, at 1.06x
    the copy's bytes; nvcc fits the 40-warp cap (48 registers) with 4 bytes of spills at most on the f16 radius-1 cases. Every capped
    kernel was slower on the H100 (docs/benchmarks/handwritten_bounds_h100_s45.json)."""
    made = lean_family(case, [("rows16", {"by": 8})], "min_blocks", (0, 5, 6))
    return made + lean_family(case, [("short4", {"by": 4})], "min_blocks", (0, 10, 12))[1:]


def ahead_variants(case) -> list[tuple[str, dict]]:
    """Each `lean` kernel (rows16, short4, rows8 where offered; marching down too where offered) with its row prefetched
    to the L2 2, 4 and 8 planes ahead (session 46's `ahead`): more DRAM requests in flight without registers, against
    the gap session 44's Nsight Compute found on star_1/512^3 f16 (45-48% of warps resident, DRAM at 73% against the
    copy's 86% at 1.06x its bytes) and the register cap of session 45 could not close."""
    return lean_family(case, marching_kernels(case), "ahead", (0, 2, 4, 8))


def pipelined_variants(case) -> list[tuple[str, dict]]:
    """Session 47's `pipelined` (the next plane's row vectors loaded a step ahead), in four groups:

    * each `lean` kernel (rows16, short4, rows8 where offered; marching down too where offered) without and with it;
    * rows16's and short4's pipelined kernels with their registers capped for 4 blocks of 8 warps an SM (`+mb`): the raw
      vectors cost star_1/512^3 f16's rows16 16 registers (68, 3 blocks an SM), and session 46's pattern copies lost
      8-21 points of copy at 3 blocks (nvcc fits 64 with no spills there, at 12% more instructions a two-plane step);
    * each pipelined kernel with its own row alone ahead (`+own`: 56 registers there);
    * each pipelined kernel with its x halo from the neighbouring lanes by warp shuffles (`+shuffle`): the H200's pattern
      copies lost 8-9 points of copy on star_1/512^3 f16 to the two halo vectors a plane."""
    made = lean_family(case, marching_kernels(case), "pipelined", (False, True))
    pipelined = [(label, params) for label, params in made if params.get("pipelined")]
    own = [(label + "+own", {**params, "own_row": True}) for label, params in pipelined]
    capped = [(label + "+mb", {**params, "min_blocks": 32 // params["by"]}) for label, params in pipelined
              if params.get("vector_bytes", 16) == 16]
    shuffled = [(label + "+shuffle", {**params, "shuffle": True}) for label, params in pipelined]
    return made + capped + own + shuffled
