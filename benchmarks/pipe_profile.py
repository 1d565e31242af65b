#!/usr/bin/env python
"""One `pipe` variant (forge/handwritten_temporal.py) launched twice on its case, for Nsight Compute
to profile the second launch: which on-chip limit each change of session 27 moved (docs/forge.md).
The timing of the variants is temporal_sweep.py's; this only gives ncu a process per variant.
`--design rows16 [--by 4]` launches the single-step plane queue (forge/handwritten.py) instead: where
DRAM bytes go on the memory-bound cases (session 28, scripts/rows16_ncu.sh); `rows8` the same with
8-byte vectors and `straightforward` the harness's own kernel, the bound of the f16 cases
(session 29, scripts/f16_ncu.sh: what the fair f16 kernel does that the plane queue does not).
`--candidate NAME` launches what a campaign submits under that name (forge/candidates.py, the subject
before its colon: `rows8+lean`), byte for byte the source the gate measured, and `--design copy` the
harness's copy of the case's array size, the ceiling of "% of copy" (session 32, scripts/candidate_ncu.sh);
`--design producer` `planes` with session 33's producer warp as forge/handwritten_planes.py's
`producer_candidate` renders it, also where campaigns do not offer it (f32: why it loses there);
`--design cpipe --cluster C --height H --chunk L [--exchange push|pull|signal]` the cluster pipeline of sessions
36-37 (forge/handwritten_cluster.py: scripts/cluster_ncu.sh, where its cluster barrier's time goes);
`--design tcq` session 37's f16 products on the tensor cores (forge/handwritten_tensor.py) as the fastest variant of
session 39's sweep on star_1/512^3 f16 (8 x 1 warps, 128 planes, 3 stages, `ca` copies;
docs/benchmarks/tensor_sweep_h200_s39.json): scripts/tcq_ncu.sh, what holds it at 28-37% of copy.
`--design halide [--schedule NAME]` one compiled schedule of the case's Halide pipeline, as the gate runs it (the
AOT folder unpacked; default `auto_anderson2021`, the tuned bound star2d_1/8192^2 f64 lost to): what the
public bound does that our kernels do not (session 41, scripts/star2d_ncu.sh; its kernels are `kernel_out*`).

On the device machine (docs/gpu.md):

    ncu --clock-control none --kernel-name stencil --launch-skip 1 --launch-count 1 \\
        --section SpeedOfLight --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis_Tables \\
        python3 benchmarks/pipe_profile.py --case diamond_ts4/512x512x512/f32 --shuffle --skip
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from forge.handwritten import render  # noqa: E402
from forge.handwritten_temporal import default_parameters, render_pipe  # noqa: E402
from measurement.harness.cases import parse_case  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", required=True)
    parser.add_argument("--shuffle", action="store_true")
    parser.add_argument("--skip", action="store_true")
    parser.add_argument("--design", choices=["pipe", "rows16", "rows8", "straightforward", "copy", "producer", "cpipe", "tcq", "halide"], default="pipe",
                        help="copy: the harness's copy ceiling for the case's array size (its kernel is harness_copy)")
    parser.add_argument("--by", type=int, default=8, help="rows16: rows a block (4: short4)")
    parser.add_argument("--alternate", action="store_true", help="rows16, rows8: odd chunks march down (not offered in f64)")
    parser.add_argument("--cluster", type=int, default=2, help="cpipe: blocks a cluster")
    parser.add_argument("--height", type=int, default=32, help="cpipe: rows a block")
    parser.add_argument("--chunk", type=int, default=256, help="cpipe: planes a cluster")
    parser.add_argument("--exchange", choices=["push", "pull", "signal"], default="push",
                        help="cpipe: how the edge rows cross between blocks (forge/handwritten_cluster.py)")
    parser.add_argument("--schedule", default="auto_anderson2021", help="halide: the schedule's name")
    parser.add_argument("--candidate", help="a campaign candidate's name (forge/candidates.py), instead of --design")
    options = parser.parse_args()
    from measurement.backends import get_backend
    from measurement.backends.base import Kernel, Variant
    from measurement.harness.oracle import make_inputs

    case = parse_case(options.case)
    variant = None  # a library baseline's; every other design renders a kernel
    backend = get_backend("cuda")
    if options.design == "copy" and not options.candidate:  # the ceiling every "% of copy" divides by
        backend.copy_bandwidth(case.points * case.dtype.itemsize)
        print(f"{case.id}: copy", file=sys.stderr)
        return 0
    if options.candidate:
        from forge.candidates import matrix_candidates

        named = {subject.split(":")[0]: (source, launch) for subject, launch, _, source in matrix_candidates(case)}
        if options.candidate not in named:
            parser.error(f"{case.id} has no candidate {options.candidate!r}; it has {', '.join(named)}")
        (source, launch), label = named[options.candidate], options.candidate
    elif options.design == "halide":
        label = f"halide[{options.schedule}]"
        variant = Variant(label, None, "baseline", options.schedule)
    elif options.design == "straightforward":
        kernel = backend.straightforward(case)
        source, launch, label = kernel.source, kernel.launch, "straightforward"
    elif options.design == "producer":
        from forge.handwritten_planes import producer_candidate

        _, launch, _, source = producer_candidate(case)
        label = "planes+bulk+producer"
    elif options.design == "cpipe":
        from forge.handwritten_cluster import render_cluster_pipe

        source, launch, _ = render_cluster_pipe(case, 64, options.height, options.cluster, options.chunk,
                                                exchange=options.exchange)
        label = f"cpipe 64x{options.height} C{options.cluster} L{options.chunk} {options.exchange}"
    elif options.design == "tcq":
        from forge.handwritten_tensor import render as render_tcq

        source, launch, _ = render_tcq(case, warps_x=8, warps_y=1, chunk=128, stages=3, cache="ca")
        label = "tcq 8x1 L128 nb3 ca"
    elif options.design in ("rows16", "rows8"):
        source, launch, _ = render(case, by=options.by, vector_bytes=16 if options.design == "rows16" else 8,
                                   alternate=options.alternate)
        label = f"{options.design} by={options.by}{' alternate' if options.alternate else ''}"
    else:
        width, height, chunk = default_parameters(case)
        source, launch, _ = render_pipe(case, width, height, chunk, shuffle=options.shuffle, skip=options.skip)
        label = f"pipe {width}x{height} L{chunk} shuffle={options.shuffle} skip={options.skip}"
    prepared = backend.prepare(case, variant or Variant("pipe", Kernel(source, launch), "candidate"))
    buffers = backend.allocate(case, make_inputs(case, 1))
    coefficients = backend.coefficients(case.coefficients())
    for _ in range(2):  # the first compiles and warms; ncu profiles the second (--launch-skip 1)
        prepared.run(buffers, coefficients)
    backend.synchronize()
    print(f"{case.id}: {label}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
