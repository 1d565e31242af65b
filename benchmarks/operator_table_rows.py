"""The computed parts of benchmarks/operator_table.py: the machine model (the FP32 peak computed
from the recorded description, the copy bandwidth measured in the export, the balance that
classifies a case, the roofline ceiling over the bound) and the cells of a case's row.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass

from measurement.roofline import FP32_LANES, fp32_peak
from measurement.roofline import roofline_ceiling as ceiling_over
from measurement.targets import CaseFacts, composed_speedup
from operator_table_export import Export, Result

BASELINE_ORDER = ["straightforward", "cupyx.ndimage", "scipy.ndimage", "pystencils", "torch.conv"]


@dataclass
class Machine:
    peak: float | None  # FP32 flop/s, computed from the description
    peak_text: str
    copy: float | None  # bytes/s: median of the export's copy measurements on that device
    copies: int

    @property
    def balance(self) -> float | None:
        return self.peak / self.copy if self.peak and self.copy else None


def machine(export: Export) -> Machine:
    d = export.description
    capability, sms, clock = d.get("compute_capability"), d.get("sm_count"), (d.get("clocks_max_mhz") or {}).get("sm")
    copies = [e["payload"]["copy_bandwidth"] for e in export.measured
              if e["payload"].get("copy_bandwidth") and (e["payload"].get("description") or {}).get("device") == d.get("device")]
    copy = statistics.median(copies) if copies else None
    peak = fp32_peak(capability, sms, clock)
    if peak:
        text = (f"{sms} SMs × {FP32_LANES[str(capability)]} FP32 lanes × 2 flop (FMA) × {clock} MHz (the maximum SM clock recorded) "
                f"= {peak / 1e12:.1f} TFLOP/s")
        return Machine(peak, text, copy, len(copies))
    why = f"compute capability {capability}" if capability else "no compute capability recorded"
    return Machine(None, f"unknown ({why}: the FP32 peak is computed for compute capability 9.0 only)", copy, len(copies))


def intensity(export: Export, case: str) -> float | None:
    d = export.defined.get(case)
    return d["flops"] / d["compulsory_bytes"] if d and d.get("compulsory_bytes") else None


def classify(export: Export, mach: Machine, case: str) -> str:
    ai = intensity(export, case)
    if ai is None or mach.balance is None:
        return "unknown"
    return "memory-bound" if ai < mach.balance else "compute-bound"


def roofline_ceiling(export: Export, mach: Machine, case: str, result: "Result") -> float | None:
    """The speedup over the measured bound that a kernel would reach at the roofline: the
    compulsory bytes at the copy bandwidth measured in the admitting run, or the CaseDefined
    flops at the FP32 peak, whichever takes longer. It says how far a target is reachable at all
    over this bound on this machine, before any kernel is judged against it. The bound is the one
    the standing speedup is over (a downgrade's re-measured bound; the audit page does the same)."""
    d = export.defined.get(case)
    p = result.payload if result.verdict is not None else {}
    bound = result.bound.get("median") if result.verdict is not None else None
    copy = export.by_id.get(p.get("measurement") or "", {}).get("payload", {}).get("copy_bandwidth")
    if not (d and bound and copy):
        return None
    return ceiling_over(bound, d["compulsory_bytes"], d["flops"], copy, mach.peak)


def precision_of(export: Export, case: str) -> str:
    return (export.defined.get(case) or {}).get("precision") or case.rsplit("/", 1)[-1]


def case_facts(export: Export, mach: Machine) -> list[CaseFacts]:
    """What measurement.targets judges, per row of the export: the replayed result (the admitting
    verdict's payload), the class against the export's balance, the composed bound of the newest
    verdict that timed one, and the campaign view's latest CellSealed / CaseConverged of the case
    on this backend (a later campaign may have replaced the kernel a cell was sealed for)."""
    view = export.view
    facts = []
    for case in export.cases:
        result = export.results.get(case) or Result(case)
        p = result.payload
        cell, converged = (payload if (payload or {}).get("backend") == export.backend else None
                           for payload in (view.sealed.get(case), view.converged.get(case)))
        verdicts = sorted([*result.reruns, result.verdict] if result.verdict else [], key=lambda e: e["position"])
        facts.append(CaseFacts(
            case=case, precision=precision_of(export, case), bound_class=classify(export, mach, case),
            standing=result.standing, fraction_of_copy=p.get("fraction_of_copy"), speedup=result.speedup,
            same_precision=p.get("same_precision"), composed_speedup=composed_speedup(e["payload"] for e in verdicts),
            sealed=cell is not None,
            sealed_for_standing_kernel=bool(cell and result.standing
                                            and cell["source_hash"] == p.get("candidate_source_hash")),
            converged=converged is not None,
            converged_with_kernel=bool(converged and converged.get("best_speedup") is not None)))
    return facts


# ---------------------------------------------------------------- cells


def met(ok: bool) -> str:
    return "**met**" if ok else "**not met**"


def cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def bandwidth(value: float) -> str:
    return f"{value / 1e12:.2f} TB/s" if value >= 1e12 else f"{value / 1e9:.1f} GB/s"


def ratio_ci(speedup: float | None, ci) -> str:
    if speedup is None:
        return "–"
    return f"{speedup:.2f}x" + (f" [{ci[0]:.2f}–{ci[1]:.2f}]" if ci else "")


def round_of_verdict(export: Export, verdict: dict) -> dict | None:
    """The round that proposed the verdict's kernel: the round the verdict ended, else (a branch
    head measured by a resolution, a re-submission) the latest round of the case proposing that source."""
    rounds = export.view.rounds.values()
    found = next((r for r in rounds if r.get("verdict_event") == verdict["event_id"]), None)
    if found:
        return found
    p = verdict["payload"]
    same = [r for r in rounds if r["case"] == p["case"] and r.get("source_hash") == p["candidate_source_hash"]]
    return same[-1] if same else None


def kernel_cell(export: Export, verdict: dict) -> str:
    p = verdict["payload"]
    digest = f"`{p['candidate_source_hash'][:12]}`"
    r = round_of_verdict(export, verdict)
    if r is None:
        measured = export.by_id.get(p.get("measurement") or "", {}).get("payload", {})
        hypothesis = (measured.get("hypothesis") or "").split(". ")[0][:60]
        return f"submitted to the gate without a round{f' ({hypothesis})' if hypothesis else ''} · {digest}"
    via = "" if r.get("verdict_event") == verdict["event_id"] else " (branch head, admitted by its resolution)"
    return f"{r.get('subject', '?')} ({round_label(export, r)}){via} · {r.get('proposer') or '?'} · {digest}"


def round_number(r: dict) -> str:
    return f"{r['number']}{'B' if r['branch'] != 'main' else ''}"  # `B` = started on a branch


def round_label(export: Export, r: dict) -> str:
    """`round 2`, and the campaign's id where the export holds several: round numbers restart in
    each campaign."""
    label = f"round {round_number(r)}"
    if len(export.view.started) > 1:
        label += f" of campaign `{(r.get('campaign') or '?')[:8]}`"
    return label


def usable(variant: dict) -> bool:
    t = variant.get("timing")
    return bool(variant["correctness"].get("correct") and t and not t.get("impossible") and t.get("timed_output_ok", True))


def baseline_names(export: Export) -> list[str]:
    names = {v["name"] for e in export.measured for v in e["payload"]["variants"] if v["role"] == "baseline"}
    return [n for n in BASELINE_ORDER if n in names] + sorted(names - set(BASELINE_ORDER))


def baseline_cells(export: Export, verdict: dict, names: list[str]) -> list[str]:
    """Baseline median / candidate median, both from the verdict's own CandidateMeasured."""
    measured = export.by_id.get(verdict["payload"].get("measurement") or "", {}).get("payload")
    if measured is None:
        return ["evidence missing"] * len(names)
    variants = {v["name"]: v for v in measured["variants"]}
    candidate = next((v for v in measured["variants"] if v["role"] == "candidate"), None)
    median = ((candidate or {}).get("timing") or {}).get("median")
    cells = []
    for name in names:
        v = variants.get(name)
        timing = (v or {}).get("timing") or {}
        if v is None:
            cells.append("not measured")
        elif not timing.get("median") or not median:
            cells.append(f"✗ {v['correctness'].get('reason') or 'not timed'}")
        else:
            text = f"{timing['median'] / median:.2f}x"
            if v.get("precision") and v["precision"] != measured["case"].rsplit("/", 1)[-1]:
                text += f" ({v['precision']})"
            cells.append(text + ("" if usable(v) else " ✗"))
    return cells


def status_cell(result: Result) -> str:
    if result.verdict is None:
        if result.verdicts:
            reasons = ", ".join(f"{k} ×{n}" for k, n in result.rejected.most_common())
            return f"never admitted ({result.verdicts} verdicts rejected: {reasons})"
        return "never admitted"
    history = []
    for event in sorted(result.revisions + result.reruns, key=lambda e: e["position"]):
        q = event["payload"]
        if event["type"] == "ResultDowngraded":
            history.append(f"ResultDowngraded {q['from_value']:.2f}x → {q['to_value']:.2f}x: {q['reason']}")
        elif event["type"] == "ResultRetracted":
            history.append(f"ResultRetracted: {q['reason']}")
        else:
            history.append(f"re-run {q['verdict']} at {ratio_ci(q.get('speedup'), q.get('speedup_ci'))}")
    text = result.status + (f" ({'; '.join(history)})" if history else "")
    if result.superseded:
        text += f"; supersedes {result.superseded} earlier admitted kernel{'s' if result.superseded > 1 else ''}"
    return text


def diagnosis_cell(export: Export, case: str) -> str:
    view = export.view
    sealed = view.sealed.get(case)
    if sealed and sealed.get("backend") == export.backend:
        current = (export.results.get(case) or Result(case)).payload.get("candidate_source_hash")
        other = f" (sealed for `{sealed['source_hash'][:12]}`, not the current kernel)" if current != sealed["source_hash"] else ""
        return f"sealed: {sealed['diagnosis']}{other}"
    parts = []
    rounds = [r for r in view.per_case.get(case, []) if r.get("perf") and r.get("backend") == export.backend]
    if rounds:
        perf = rounds[-1]["perf"]
        parts.append(f"not sealed; last perf log ({round_label(export, rounds[-1])}): {perf['change']}: {perf['measurement']}")
    planned = view.planned.get(case)
    if planned and planned.get("backend") == export.backend and planned.get("borrowed_diagnosis"):
        # the case's own perf log, where it has one, is the better diagnosis; the plan says what the loop borrowed
        parts.append(f"planned (borrowed from {planned['borrowed_from']}): {planned['borrowed_diagnosis']}")
    return "; ".join(parts) or "–"
