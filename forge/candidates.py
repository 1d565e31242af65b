"""What a campaign submits for a case, in order (`benchmarks/forge_campaign.py --handwritten`): the
hand-written designs of forge/handwritten.py (rows16 and its one-change variants, octa) and of
forge/handwritten_temporal.py (pipe), each offered where the H200 measurements say it may help."""
from __future__ import annotations

from measurement.harness.cases import Case

from .handwritten import default_chunk, render, render_temporal
from .handwritten_planes import candidate as planes_candidate
from .handwritten_planes import producer_candidate
from .handwritten_temporal import candidate as pipe_candidate
from .handwritten_temporal import pair_candidates


def rows8_fits(case: Case) -> bool:
    """Whether rows8 exists for the case: its x halo fits one 8-byte vector, and that vector is
    narrower than rows16's 16 bytes at all (not f64: one double). The campaign, the sweeps and the
    marching-down variants offer rows8 by this one rule."""
    return case.precision != "f64" and case.stencil.halo <= 8 // case.dtype.itemsize


def matrix_candidates(case: Case) -> list[tuple[str, dict, str, str]]:
    """The candidates submitted for a case, in order: (subject, launch, hypothesis, source).

    `rows16`, then two one-change variants of it, each aimed at a bottleneck measured on the
    H200 (docs/benchmarks/ncu/, docs/forge.md):

    * `rows8`: 8-byte vectors (half the x-points per thread). The queue of 2R+1 partial outputs
      holds V registers each, so rows16 needs 64 registers a thread in f16 (star_1) and 94-168
      for star_4, which caps the resident warps (ncu: 50% theoretical occupancy for star_1 f16,
      52% of the DRAM bandwidth). Offered where the x halo fits one narrower vector (R <= lanes)
      and it is narrower at all (not f64: one double).
    * `short4`: 4-row blocks. A block of a register-heavy kernel fills the register file in
      coarse steps; half-size blocks leave fewer registers idle.

    The other one-parameter changes of the H200 sweep (docs/benchmarks/handwritten_sweep_h200.json,
    17 cases) are not offered: 16- or 32-row blocks and two vectors per thread were slower than
    rows16 or within 1%; 2-4x longer or shorter chunks gained at most 3.6% and lost up to 30%. Temporal types
    (T > 1) get `octa`, the composed octahedron through the plane queue (render_temporal), then in f32
    `pipe`, the T steps pipelined on chip (forge/handwritten_temporal.py), and up to T = 4 its two-iterations-a-body
    variants (`pair_candidates`, session 39). star_1 and varcoef_star_1
    in f16 get `pipe` with T = 1 last: the z march with shared in-plane neighbours and no register
    queue, after rows16/rows8/short4 all lost to the fair f16 kernel (the issue-15 re-gate). The
    3D constant-coefficient star stencils (star_R) get `planes` last (forge/handwritten_planes.py):
    the in-plane arms from a shared ring of input planes filled by cp.async and only the z arms in
    registers, 40-64 registers a thread where rows16 took 94-168 for star_4; for star_1 it aimed at
    the L2 traffic of rows16's three rows a plane and lost on the H200 in f32 (docs/forge.md), and
    is still offered to the f16 cases, which have not met it. For star_2 in f64 `planes+bulk+producer` follows it:
    the ring filled by a producer warp's bulk copies (session 33's sweep: star_2/512^3 f64 1.04x its admitted
    kernel; it lost to the admitted kernels of star_1 f64 and of star_1, star_2 and star_4 f32, and f16 vectors
    are too narrow for bulk copies)."""
    if case.stencil.time_steps != 1:
        source, launch, hypothesis = render_temporal(case)
        made = [(f"octa: hand-written composed octahedron, pair sums, {launch['tile'][0] // 32} x-points per thread",
                 launch, hypothesis, source)]
        return made + ([pipe_candidate(case)] if case.precision == "f32" else []) + pair_candidates(case)
    chunk = default_chunk(case, 1)
    source, launch, hypothesis = render(case, chunk=chunk)
    made = [(f"rows16: hand-written plane queue, {launch['tile'][0] // 32} x-points per thread", launch, hypothesis, source)]
    if rows8_fits(case):
        source, launch, _ = render(case, chunk=chunk, vector_bytes=8)
        hypothesis = (f"{case.id}: one change from rows16: 8-byte vectors ({launch['tile'][0] // 32} x-points per thread), "
                      f"so the {2 * case.stencil.radius + 1}-deep queue and the rows take half the registers and twice "
                      "the warps stay resident; gains if occupancy, not DRAM, limits rows16 (docs/benchmarks/ncu/).")
        made.append((f"rows8: hand-written plane queue, 8-byte vectors, {launch['tile'][0] // 32} x-points per thread",
                     launch, hypothesis, source))
    source, launch, _ = render(case, by=4, chunk=chunk)
    hypothesis = (f"{case.id}: one change from rows16: 4-row blocks instead of 8, so a block of this register-heavy "
                  "kernel takes half the registers and the SM packs more warps; gains if too few warps are resident "
                  "to keep enough loads in flight (docs/benchmarks/handwritten_sweep_h200.json).")
    made.append(("short4: hand-written plane queue, 4-row blocks", launch, hypothesis, source))
    if case.precision == "f16" and case.stencil.family == "star" and case.stencil.radius == 1 and case.stencil.dims == 3:
        made.append(pipe_candidate(case))  # no register queue: the fair f16 kernel beat all three
    stencil = case.stencil
    if stencil.family == "star" and stencil.dims == 3 and not stencil.variable_coefficient:
        made.append(planes_candidate(case))
        if case.precision == "f64" and stencil.radius == 2:  # where the H200 sweep put the producer warp ahead (session 33)
            made.append(producer_candidate(case))
    return made + marching_down(case, chunk) + lean(case, chunk) + rows_a_thread(case, chunk) + burst(case) + pipelined(case, chunk)


def marching_down(case: Case, chunk: int) -> list[tuple[str, dict, str, str]]:
    """Session 28's `alternate` (odd chunks march down, so neighbouring chunks read their shared halo
    planes together and the second read hits the L2) on short4, rows8 and rows16, in the order the
    H200 sweep measured them best (docs/benchmarks/handwritten_march_h200_s28.json): rows8 first for
    varcoef_star_1 (1.03x and 1.18x over rows8 at 256^3 f32 and 512^3 f16), short4 first elsewhere
    (1.02-1.05x on star_1 and box_1 f32, star2d_1, box2d_1). Not offered where it lost: star_2
    (0.93-0.98x), every f64 case (0.94-0.99x) and star_4 (whose `planes` has no chunk queue)."""
    stencil = case.stencil
    if case.precision == "f64" or stencil.radius > 1:
        return []
    kernels = [("short4", {"by": 4}), ("rows16", {"by": 8})]
    if rows8_fits(case):
        kernels.insert(0 if stencil.variable_coefficient else 1, ("rows8", {"by": 8, "vector_bytes": 8}))
    made = []
    for name, parameters in kernels:
        source, launch, _ = render(case, chunk=chunk, alternate=True, **parameters)
        hypothesis = (f"{case.id}: one change from {name}: odd chunks march down {'z' if stencil.dims == 3 else 'y'}, so "
                      "two neighbouring chunks read the planes at their boundary at about the same time and the second "
                      "read hits the L2; gains where the chunks' halo re-reads from DRAM limit it (ncu: rows16 read 1.10x "
                      "the compulsory bytes at star_1/512^3 f32; docs/benchmarks/handwritten_march_h200_s28.json).")
        made.append((f"{name}+alternate: hand-written plane queue, odd chunks march down", launch, hypothesis, source))
    return made


def lean(case: Case, chunk: int, capped: bool = False, **changes: bool) -> list[tuple[str, dict, str, str]]:
    """Session 30's `split` and `stride` together (forge/handwritten.py `render`: the vector and
    per-lane paths in two loops, the plane address advanced by the stride) on rows16, short4 and
    rows8 where offered, marching up, then down where `marching_down` offers it. Aimed at the f16
    cases, which the issue rate limits (scripts/f16_ncu.sh): the SASS of rows16 on star_1/512^3 f16
    has 284 instructions in its two-plane loop instead of 411, and 52 registers instead of 64
    (benchmarks/sass_count.py, docs/benchmarks/sass_f16_s30.json). Offered to every single-step
    case: the same cut holds in f32 (191 to 135 on star_1/512^3). `capped` and `changes` (render's `pipelined`, `own_row`
    and `shuffle`) are for `pipelined` below (`capped`: the 16-byte kernels alone, registers capped for 32 warps an SM)."""
    kernels = [("rows16", {"by": 8}), ("short4", {"by": 4})]
    if capped:
        kernels = [(name, {**parameters, "min_blocks": 32 // parameters["by"]}) for name, parameters in kernels]
    elif rows8_fits(case):
        kernels.append(("rows8", {"by": 8, "vector_bytes": 8}))
    down = [name.split("+")[0] for name, *_ in marching_down(case, chunk)]
    made = []
    for alternate in (False, True):
        for name, parameters in kernels:
            if alternate and name not in down:
                continue
            source, launch, _ = render(case, chunk=chunk, alternate=alternate, split=True, stride=True, **changes, **parameters)
            label = f"{name}{'+alternate' if alternate else ''}+lean"
            hypothesis = (f"{case.id}: one change from {label[:-5]}: the vector and per-lane paths in two loops (nvcc "
                          "issued both, one predicated off) and the plane address advanced by the stride, about a "
                          "third fewer instructions a plane (benchmarks/sass_count.py); gains where the issue rate, "
                          "not DRAM, limits it (the f16 cases: scripts/f16_ncu.sh).")
            made.append((f"{label}: hand-written plane queue, vector and lane paths in two loops, strided plane address",
                         launch, hypothesis, source))
    return made


def pipelined(case: Case, chunk: int) -> list[tuple[str, dict, str, str]]:
    """Session 47's `pipelined` (forge/handwritten_pipelined.py: the next plane's vectors loaded raw a step ahead) on each
    `lean` kernel, in the same order. Offered to star_1 in 3D in f16 and f32, where the H100 sweeps put it ahead of the
    admitted kernel: star_1/64x1024^2 f16 89.2% of copy against 86.6%, star_1/512^3 f32 90.7% against 88.5%, and level
    (within 1%) at star_1/512^3 f16, 256^3 and 128^3 f32 (docs/benchmarks/handwritten_pipelined_h100_s47.json,
    handwritten_pipelined_more_h100_s47.json). Elsewhere it lost to the admitted kernels or tied them: box_1/512^3 f16
    0.98x (72 registers), star_2 f32 0.97x, star_1/512^3 f64 0.97x, box_1/64x1024^2 f32 0.97x. The H200 admitted three
    (docs/gpu.md, session 47); its sweep then put the 16-byte f32 kernels with their registers capped for 4 blocks of 8
    warps an SM (`+mb`: `__launch_bounds__(256, 4)`, under which nvcc gives them 55-56 registers instead of 40) ahead
    on star_1/512^3 f32, 86.6% of copy against the admitted 83.2% (docs/benchmarks/handwritten_pipelined_h200_s47.json),
    and behind on f16 (72.3% against 74.6% uncapped): offered after the rest.

    Then each uncapped one with its own row alone ahead (`+own`) and with its x halo by warp shuffles (`+shuffle`), and
    all of these for varcoef_star_1 in f16 and f32 too: the sweep family `pipelined` measures exactly these kernels,
    and a kernel it measures ahead on the H200 is gated in the same warm minutes (scripts/h200_gate.sh `GATE_FROM=warm`)
    only if the campaign offers it. Their evidence so far is the H100's: level with the admitted kernels (within 1.5%;
    star_1/512^3 f16 `rows8+alternate+lean+pipelined+shuffle` 79.6% of copy against 78.6%; varcoef_star_1/512^3 f16
    `short4+lean+pipelined` 91.0% against 91.7%: handwritten_pipelined_h100_s48.json,
    handwritten_pipelined_more_h100_s47.json). varcoef_star_1/512^3 f16 stands at 84% of copy on the H200, one point
    under the f16 median's target."""
    stencil = case.stencil
    if stencil.family != "star" or stencil.dims != 3 or stencil.radius != 1 or case.precision == "f64":
        return []
    kernels = [("", kernel) for kernel in lean(case, chunk, pipelined=True)]
    kernels += [("+mb", kernel) for kernel in lean(case, chunk, capped=True, pipelined=True)]
    kernels += [("+own", kernel) for kernel in lean(case, chunk, pipelined=True, own_row=True)]
    kernels += [("+shuffle", kernel) for kernel in lean(case, chunk, pipelined=True, shuffle=True)]
    made = []
    for suffix, (label, launch, _, source) in kernels:
        name, what = label.split(":", 1)
        what = f"{what}, the next plane's vectors loaded a step ahead" + WHAT_PIPELINED[suffix]
        hypothesis = (f"{case.id}: one change from {name}: plane n + 1's vectors are loaded into registers "
                      "before plane n is converted, summed and stored, so each warp has a plane's loads in flight while it "
                      "works (nvcc issues none above the store's branch otherwise); gains where the per-plane work leaves "
                      "DRAM idle (docs/forge.md, session 47)" + WHY_PIPELINED[suffix])
        made.append((f"{name}+pipelined{suffix}:{what}", launch, hypothesis, source))
    return made


WHAT_PIPELINED = {"": "", "+mb": ", registers capped for 32 warps an SM", "+own": " (the thread's own row alone)",
                  "+shuffle": ", the x halo by warp shuffles"}
WHY_PIPELINED = {
    "": ".",
    "+mb": (", with the registers nvcc takes under __launch_bounds__(256, 4): the H200 sweep ran those fastest on "
            "star_1/512^3 f32 and behind the uncapped ones in f16 (docs/benchmarks/handwritten_pipelined_h200_s47.json)."),
    "+own": ", with only the thread's own row loaded ahead: 12 registers fewer (56 instead of 68 on star_1/512^3 f16).",
    "+shuffle": (", with the x halo from the neighbouring lanes by warp shuffles instead of two more 16-byte loads a "
                 "plane: the H200's pattern copies lost 8-9 points of copy to those loads on star_1/512^3 f16 "
                 "(docs/benchmarks/pattern_h200_s47.json)."),
}


def rows_a_thread(case: Case, chunk: int) -> list[tuple[str, dict, str, str]]:
    """Session 32's `ry` (forge/handwritten.py `render`: each thread computes 2 or 4 consecutive rows
    and loads their footprint's rows once) on short4's lean kernel, marching up, then down where
    `marching_down` offers it. Offered where the H200 sweep measured it ahead of every one-row kernel
    (docs/benchmarks/handwritten_rows_h200_s32.json, made with the launch slip docs/forge.md describes;
    handwritten_rows_fixed_h200_s32.json with it fixed): the f32 3D radius-1 constant-coefficient
    stencils (box_1/512^3 84% of copy against 79%, box_1/64x1024^2 87% against 81%, star_1/512^3 86%
    against 84%, star_1/64x1024^2 89-91% against 88%). It lost everywhere else: star_2, f16 and f64,
    varcoef_star_1 (the rows' queues take registers those kernels' occupancy cannot spare)."""
    stencil = case.stencil
    if case.precision != "f32" or stencil.dims != 3 or stencil.radius != 1 or stencil.variable_coefficient:
        return []
    down = "short4" in [name.split("+")[0] for name, *_ in marching_down(case, chunk)]
    made = []
    for alternate in (False, True) if down else (False,):
        for ry in (2, 4):
            source, launch, _ = render(case, chunk=chunk, by=4, alternate=alternate, split=True, stride=True, ry=ry)
            label = f"short4{'+alternate' if alternate else ''}+lean+ry{ry}"
            hypothesis = (f"{case.id}: one change from {label.rsplit('+', 1)[0]}: each thread computes {ry} consecutive rows and "
                          f"loads the {ry + 2} rows of their footprint once, so a block reads {4 * ry + 2} rows a plane for "
                          f"{4 * ry} output rows instead of relying on L1 for the y neighbours; gains where the reads "
                          "from the L2 beyond one a point limit it (ncu, scripts/rows_ncu.sh: 1.71x the input at "
                          "box_1/512^3 f32 with the L2 as busy as in a copy).")
            made.append((f"{label}: hand-written plane queue, {ry} rows a thread", launch, hypothesis, source))
    return made


# (family, variable coefficient, precision, radius) of the 3D types `burst` is offered to
BURST_3D = (("star", False, "f32", 2), ("star", False, "f64", 1), ("star", False, "f16", 1))


def burst(case: Case) -> list[tuple[str, dict, str, str]]:
    """Session 41's `burst` (forge/handwritten.py `render`: a few rows a thread, unrolled whole, every row read before
    any output is stored) for the 2D cases, in the two shapes the H100 sweeps put first per precision
    (docs/benchmarks/handwritten_burst_h100_s41.json, handwritten_burst_f16_h100_s41.json): in f32 and f64 16-byte
    vectors in 1-row blocks and 8-byte vectors in 4-row blocks, 4 rows a thread (star2d_1/8192^2 f64 98.7% of copy,
    1.037x tuned Halide; star2d_1 and box2d_1 f32 96.3-96.8%); in f16 16-byte vectors in 4-row blocks, 4 and 8 rows
    (box2d_1/8192^2 94.6%, star2d_1/16384^2 98.3-98.8%, against 84-89% for the marching kernels). The marching
    kernels run DRAM at 80% of its peak where tuned Halide's short unrolled blocks run it at the copy's 85.5%
    (Nsight Compute, docs/gpu.md session 41).

    In 3D a chunk of planes reads its z halo planes again. The H100 sweeps of session 42 put `burst` (16-byte vectors in
    4-row blocks, 4 or 8 planes a thread) 4-7% ahead of the admitted kernel on five types
    (docs/benchmarks/handwritten_burst3d_admitted_h100_s42.json); the H200 gate of the same session admitted it on two,
    star_2/512^3 f32 (1.50x over tuned Halide, 1.46x before) and star_1/512^3 f64 (level with the kernel before), and
    reverted it on star_1 f32 (512^3 and 128x256x2048) and varcoef_star_1/512^3 f32, 3-6% slower than their admitted
    kernels (docs/benchmarks/h200_campaign_burst_s42.log). It is offered in 3D to the stars of radius 2 in f32 and of
    radius 1 in f64, where the H200 admitted it, and to star_1 in f16, whose f16 cases (71-78% of copy) the H200 never
    measured it on and where the H100 puts it level with the admitted kernel (Nsight Compute at 512^3, session 44).
    Session 44 offered it to star_1 f32 and varcoef_star_1 f16 too; session 45 took them back: on star_1 f32 the H100
    puts the admitted kernels 2-6% ahead at 128^3 and 256^3 (docs/benchmarks/handwritten_burst_by8_h100_s45.json) and
    the H200 had reverted it at 512^3 and 128x256x2048, and on varcoef_star_1/512^3 f16 the H100 measured it 7% slower
    (312 against 291 us, docs/benchmarks/ncu/ncu_f16_h100_s44_*). 8-row blocks, which read fewer arm rows a point, beat
    no admitted kernel of those four cases on the H100 and were slower than 4-row blocks at star_2/512^3 (the same file)."""
    stencil = case.stencil
    if stencil.dims == 2:
        shapes = ((16, 4, 4), (16, 4, 8)) if case.precision == "f16" else ((16, 1, 4), (8, 4, 4))
    elif (stencil.family, stencil.variable_coefficient, case.precision, stencil.radius) in BURST_3D:
        shapes = ((16, 4, 4), (16, 4, 8))
    else:
        return []
    made = []
    for vector_bytes, by, rows in shapes:
        source, launch, _ = render(case, chunk=rows, by=by, vector_bytes=vector_bytes, split=True, burst=True)
        label = f"burst{vector_bytes}+by{by}+l{rows}"
        hypothesis = (f"{case.id}: {rows} {'rows' if stencil.dims == 2 else 'planes'} a thread, the march unrolled whole "
                      "and the outputs stored after it, so a thread issues all its loads at once, as tuned Halide's "
                      "kernel does; gains where the DRAM rate, not the bytes, keeps the marching kernels from the copy "
                      "(docs/gpu.md, sessions 41 and 42).")
        made.append((f"{label}: hand-written short chunk unrolled whole, {vector_bytes}-byte vectors, {by}-row blocks",
                     launch, hypothesis, source))
    return made
