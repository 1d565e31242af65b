#!/usr/bin/env python
"""Do forged kernels generalise? Gate each admitted kernel, unchanged, on an edge shape of its type
and precision that no round targeted (issue 16; forge/edges.py says what is borrowed and why it is
not rendered again), in a fresh scratch ledger, and ship that ledger's export.

The ledger given (--ledger, e.g. the shipped H200 campaign) is imported first: its admitted kernels
are what the edges borrow. The edge file's cases are loaded (`CaseDefined`, matrix --edges), then
each edge in the file's order: with --tune LIBRARY, a tuning run of that library baseline on the edge
case first (the matrix's bounds are tuned Halide: the edge's should be too); then the gate on the
edge case (CandidateMeasured + GateVerdict) and EdgeShapeMeasured. One line per edge on stderr; an
edge whose type and precision has no standing admitted kernel is reported and skipped, and one the
ledger already measured with the kernel it would borrow now is skipped, so a second call given the
first call's export (--ledger) measures the rest, and an edge measured before its matrix case's
kernel was replaced is measured again with the new one. The export is written after every edge.

    .venv/bin/python benchmarks/forge_edges.py --backend cpu --ledger LEDGER.jsonl --out /tmp/edges.jsonl

On the device machine (docs/forge.md, "Edge shapes"):

    source scripts/device_env.sh && python3 scripts/halide_aot.py --unpack && \\
        python3 benchmarks/forge_edges.py --backend cuda --tune halide \\
        --ledger fixtures/ledgers/h200_campaign.jsonl --out $OUT/h200_edges.jsonl --deadline 540

`benchmarks/operator_table.py EXPORT` then reports them in its section "Edge shapes (generalisation)".
Exit status 1 when an edge could not be measured (MeasurementError); the export is written anyway.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import scratch_ledger

ACTOR = "agent:forge-edges"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def measure_edges(edge_set, backend: str, *, tune: str | None = None, deadline: float | None = None,
                  only: set[str] | None = None, protocol=None, out: Path | None = None, say=log) -> dict[str, int]:
    """Every edge of `edge_set` (forge.edges.EdgeSet) not measured yet with the kernel the library
    lends it now, in order, until --deadline would be passed; counts of measured / no_kernel /
    failed / skipped edges."""
    from forge.edges import edge_up_to_date, measure_edge, measured_kernel
    from forge.library import NoForgedKernel
    from measurement.reruns import past_deadline
    from measurement.services import MeasurementError
    from measurement.tuning import tune_baseline

    counts = dict.fromkeys(("measured", "no_kernel", "failed", "skipped"), 0)
    started, durations = time.perf_counter(), []
    for edge in edge_set.edges:
        if only is not None and edge.case not in only:
            continue
        earlier = measured_kernel(edge.case, backend)
        if edge_up_to_date(edge.case, edge_set.matrix, backend, earlier):
            counts["skipped"] += 1
            say(f"{edge.case}: skipped (this ledger measured it already with the kernel it would borrow)")
            continue
        if earlier is not None:
            say(f"{edge.case}: measured before with `{earlier[:12]}`, whose matrix case has another kernel now: again")
        elapsed = time.perf_counter() - started
        if past_deadline(deadline, elapsed, durations):
            say(f"deadline: stopping after {elapsed:.0f} s; give this export as --ledger to measure the rest")
            break
        began = time.perf_counter()
        try:
            if tune:
                try:
                    tuned = tune_baseline(edge.case, backend, tune, actor=ACTOR, protocol=protocol).payload["chosen"]
                except MeasurementError as error:  # measured without the library, the edge would stand over a weaker bound
                    raise MeasurementError(f"{tune} not tuned, so not measured: {error}") from None
                say(f"{edge.case}: {tune} tuned: {tuned or 'no correct schedule (its default runs)'}")
            kernel, outcome = measure_edge(edge, edge_set.matrix, backend, actor=ACTOR, protocol=protocol)
        except NoForgedKernel as error:
            counts["no_kernel"] += 1
            say(f"{edge.case}: NO KERNEL: {error}")
            continue
        except MeasurementError as error:
            counts["failed"] += 1
            say(f"{edge.case}: FAILED: {error}")
            continue
        finally:
            durations.append(time.perf_counter() - began)
            if out is not None:
                scratch_ledger.export(out)
        counts["measured"] += 1
        speed = f"{outcome.speedup:.2f}x" if outcome.speedup is not None else "no speedup"
        ci = f" [{outcome.speedup_ci[0]:.2f}-{outcome.speedup_ci[1]:.2f}]" if outcome.speedup_ci else ""
        bound = (outcome.verdict_event.data.get("bound") or {}).get("label") or "no usable bound"
        there = f", {kernel.speedup:.2f}x there" if kernel.speedup is not None else ""
        say(f"{edge.case}: the kernel of {kernel.case} (`{kernel.source_hash[:12]}`{there}): "
            f"{outcome.verdict} ({outcome.verdict_event.data['state']}), {speed}{ci} over {bound} "
            f"[{durations[-1]:.0f} s]"
            + (f"; {', '.join(outcome.reasons)}" if outcome.reasons else ""))
    return counts


def run(options: argparse.Namespace) -> int:
    scratch_ledger.setup_django("edges")
    from forge.edges import read_edges
    from ledger.services import initialise_ledger
    from ledger.transfer import import_ledger
    from measurement.matrices import load_matrix

    initialise_ledger(f"edge shapes ({options.backend}, scratch)", ACTOR)
    edge_set = read_edges(options.edges)
    # Before the import, as forge_campaign loads its matrix: an earlier call's export already holds
    # the edges' CaseDefined, imported with its origin, which a later load would refuse as a conflict.
    load_matrix(edge_set.name, ACTOR)
    imported, _ = import_ledger(Path(options.ledger), ACTOR)
    log(f"imported {imported} events from {options.ledger}; {len(edge_set.edges)} edges of {edge_set.name} "
        f"borrow the kernels of the matrix {edge_set.matrix}")
    out = Path(options.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    only = {case.strip() for case in options.only.split(",")} if options.only else None
    counts = measure_edges(edge_set, options.backend, tune=options.tune, deadline=options.deadline, only=only, out=out)
    log(", ".join(f"{n} {k}" for k, n in counts.items()) + f"; {scratch_ledger.export(out)} events in {out}")
    return 1 if counts["failed"] else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--ledger", required=True,
                        help="the export whose admitted kernels the edges borrow (JSON Lines)")
    parser.add_argument("--edges", help="the edge file fixtures/matrices/NAME.json (default: cpu_edges or gpu_edges)")
    parser.add_argument("--out", required=True, help="the scratch ledger's export to write (JSON Lines)")
    parser.add_argument("--tune", metavar="LIBRARY",
                        help="tune this library baseline on each edge case before its gate")
    parser.add_argument("--deadline", type=float, help="seconds: start no edge expected to end later")
    parser.add_argument("--only", help="comma-separated edge cases: measure these alone")
    options = parser.parse_args()
    options.edges = options.edges or ("gpu_edges" if options.backend == "cuda" else "cpu_edges")
    return run(options)


if __name__ == "__main__":  # the harness children are spawned: this module must not run on import
    sys.exit(main())
