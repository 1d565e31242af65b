"""The section "Edge shapes (generalisation)" of benchmarks/operator_table.py, beside the matrix.

Per edge case (its latest EdgeShapeMeasured, forge/edges.py): why the shape, the kernel it borrowed
(the round that proposed it, as the matrix table names kernels), that kernel's standing speedup on
its own matrix case, and the gate's verdict on the edge with the speedup over the edge's own bound
and its 95% CI. Then per precision the geometric means over the same pairs, the matrix cases'
("cube") against the edges': the seed's generalisation claim, measured.
"""
from __future__ import annotations

from collections import defaultdict

from operator_table_export import Export
from operator_table_render import geomean
from operator_table_rows import cell, kernel_cell, ratio_ci


def edges_section(export: Export) -> list[str]:
    lines = ["## Edge shapes (generalisation)", ""]
    if not export.edges:
        return lines + [
            "Not measured yet: the export holds no EdgeShapeMeasured event. `benchmarks/forge_edges.py` gates each "
            "admitted kernel, unchanged and without a round, on a shape of its type and precision that no round "
            "targeted (a thin slab or long box, a thin strip in 2-D: fixtures/matrices/gpu_edges.json, "
            "cpu_edges.json) and records the gate's verdict as a generalisation measurement.", ""]
    lines += [
        "Each edge case gates, unchanged and without a forging round, the kernel admitted for the largest matrix case "
        "of its type and precision that has a standing one (forge/edges.py). Matrix case: that kernel's standing "
        "speedup there. Over the edge's bound: the gate's speedup over the fastest usable baseline of the edge case "
        "itself, measured with its own baselines, with the 95% bootstrap CI.",
        "",
        "| edge case | why this shape | borrowed kernel | matrix case (standing speedup) | verdict on the edge "
        "| over the edge's bound [95% CI] | % of copy BW |",
        "|---|---|---|---|---|---|---|",
    ]
    pairs: dict[str, list[tuple[float, float]]] = defaultdict(list)  # precision -> (matrix case, edge) speedups
    for case, p in export.edges.items():
        borrowed = export.by_id.get(p["borrowed_verdict"])
        kernel = (kernel_cell(export, borrowed) if borrowed
                  else f"`{p['source_hash'][:12]}` (its verdict is not in the export)")
        lender = export.results.get(p["borrowed_from"])
        current = (lender is not None and lender.verdict is not None
                   and lender.verdict["event_id"] == p["borrowed_verdict"])
        if current and lender.standing:
            matrix = f"{p['borrowed_from']} ({lender.speedup:.2f}x, {lender.status})"
        else:
            why = lender.status if current else "a later kernel replaced it there"
            matrix = f"{p['borrowed_from']} ({why}: left out of the means)"
        verdict = (export.by_id.get(p["verdict_event"]) or {}).get("payload", {})
        bound = verdict.get("bound") or {}
        over = bound.get("label") or bound.get("name", "?")
        speed = (f"{ratio_ci(verdict['speedup'], verdict.get('speedup_ci'))} over {over}"
                 if verdict.get("speedup") is not None else "–")
        fraction = f"{verdict['fraction_of_copy']:.0%}" if verdict.get("fraction_of_copy") is not None else "–"
        reasons = f": {', '.join(verdict['reasons'])}" if verdict.get("reasons") else ""
        lines.append(f"| {case} | {cell(p['reason'])} | {cell(kernel)} | {matrix} "
                     f"| {p['verdict']} ({p['state']}){cell(reasons)} | {speed} | {fraction} |")
        if current and lender.standing and verdict.get("speedup") is not None:
            pairs[case.rsplit("/", 1)[-1]].append((lender.speedup, verdict["speedup"]))
    lines.append("")
    for precision in ("f32", "f64", "f16"):
        if pairs.get(precision):
            cube, edge = geomean([c for c, _ in pairs[precision]]), geomean([e for _, e in pairs[precision]])
            count = len(pairs[precision])
            lines.append(f"- {precision}: geometric mean over {count} pair{'s' if count > 1 else ''}: "
                         f"matrix cases **{cube:.2f}x**, edge shapes **{edge:.2f}x** over their own bounds "
                         f"(edge / matrix {edge / cube:.2f}).")
    if not pairs:
        lines.append("- No pair with a standing matrix result and a timed edge: no geometric mean.")
    return lines + [""]
