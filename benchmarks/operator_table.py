#!/usr/bin/env python
"""The operator table of a matrix, generated from a ledger export alone (JSON Lines).

Why: a headline number about the operators (how many cases are admitted, how close the
memory-bound kernels come to the copy bandwidth, the speedups over the public bound) must be
traceable to the events that measured it, and must move when the ledger revises a result. So
nothing here is typed by hand or read from a database: every number comes from the export's
events (CaseDefined, GateVerdict and the CandidateMeasured it names, the forge's rounds,
PerfLogged, CellSealed, CaseConverged, and the revisions ResultDowngraded / ResultRetracted),
and the committed markdown is checked to be exactly what this script prints.

How:

    .venv/bin/python benchmarks/operator_table.py docs/benchmarks/forge_h200_levers.jsonl \\
        --out docs/benchmarks/h200_operator_table.md
    .venv/bin/python benchmarks/operator_table.py docs/benchmarks/forge_h200_levers.jsonl \\
        --check docs/benchmarks/h200_operator_table.md     # exit 1 when the file is not what it prints

The export's hash chain is verified first (`ledger.verify_export`; `--unverified` skips it).
The rows are the cases named by the export's CaseDefined events, in their order (`--matrix gpu`:
the cases of fixtures/matrices/gpu.json instead); a case without an admitted result still gets
its row. Per case: the current status (the latest admitted GateVerdict, then any revision
that revises it and any re-run verdict), the kernel (round subject, proposer, source sha256),
the candidate's median, its fraction of the copy bandwidth measured in the same run, its speedup
over each public baseline timed in that same CandidateMeasured, the speedup over the bound with
the gate's 95% CI, same- or mixed-precision, the arithmetic-intensity class and the diagnosis.
Then a summary against the targets, each case's rounds, the refuted directions and, when the
export holds re-run verdicts, the whole-matrix re-run.

Only the machine model is computed rather than measured: the FP32 peak is sm_count x 128 FP32
lanes x 2 (FMA) x the maximum SM clock of the recorded description, for compute capability 9.0
only (otherwise the classification is "unknown"); the copy bandwidth of the balance is the
median of the copy measurements in the export. Needs no Django and no database.
"""
from __future__ import annotations

import argparse
import difflib
import json
import math
import statistics
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for _path in (str(HERE), str(ROOT)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

import scratch_ledger  # noqa: E402
from forge_campaign import CampaignView, read_campaign  # noqa: E402
from ledger.verify_export import ExportError, verify_export  # noqa: E402
from measurement.harness.judge import REGRESSION_BAND  # noqa: E402

MATRIX_DIR = ROOT / "fixtures" / "matrices"
BASELINE_ORDER = ["straightforward", "cupyx.ndimage", "scipy.ndimage", "pystencils", "torch.conv"]
# FP32 lanes per SM by compute capability (Hopper, CC 9.0: 4 partitions x 32 FP32 units).
FP32_LANES = {"9.0": 128}
MEMORY_MEDIAN_TARGET = 0.90  # median fraction of the copy bandwidth over the memory-bound cases
MEMORY_FLOOR = 0.80  # no memory-bound case below this fraction
GEOMEAN_TARGET = 2.5  # geometric mean of the same-precision f32 speedups over the bound
STANDING = ("admitted", "downgraded")


# ---------------------------------------------------------------- reading the export


@dataclass
class Result:
    """One case's operator result as the export leaves it."""

    case: str
    status: str = "never admitted"  # admitted | downgraded | retracted | revised by re-run | never admitted
    verdict: dict | None = None  # the latest admitted GateVerdict event (not a re-run)
    speedup: float | None = None  # the standing speedup over the bound (to_value after a downgrade)
    revisions: list[dict] = field(default_factory=list)  # ResultDowngraded / ResultRetracted applied to `verdict`
    reruns: list[dict] = field(default_factory=list)  # GateVerdict events revising `verdict`
    superseded: int = 0  # earlier admitted verdicts of the case
    verdicts: int = 0  # every gate verdict of the case that is not a re-run
    rejected: Counter = field(default_factory=Counter)  # reason -> count over the rejected verdicts

    @property
    def standing(self) -> bool:
        return self.status in STANDING

    @property
    def payload(self) -> dict:
        return self.verdict["payload"] if self.verdict else {}


def default_backend(events: list[dict]) -> str:
    for e in reversed(events):
        if e["type"] in ("CandidateMeasured", "CampaignStarted"):
            return e["payload"]["backend"]
    return "cuda"


def read_results(events: list[dict], backend: str) -> dict[str, Result]:
    """Replay the gate's verdicts and the ledger's revisions of `operator/<backend>/<case>`.

    As the operator_results projection does: a new admitted verdict becomes the case's result;
    a revision applies to the verdict it names in `revises` (without one: to the result standing
    then); a retracted verdict takes no further revision; a re-run verdict (GateVerdict with
    `revises`) never becomes the result itself."""
    prefix = f"operator/{backend}/"
    results: dict[str, Result] = {}
    states: dict[str, list] = {}  # admitted verdict id -> [status, speedup, revisions]
    reruns: dict[str, list[dict]] = defaultdict(list)
    current: dict[str, str] = {}  # result key -> its latest admitted verdict id
    for e in events:
        p = e["payload"]
        if e["type"] == "GateVerdict" and p.get("backend") == backend:
            if p.get("revises"):
                reruns[p["revises"]].append(e)
                continue
            result = results.setdefault(p["case"], Result(p["case"]))
            result.verdicts += 1
            if p["verdict"] == "admitted":
                if result.verdict is not None:
                    result.superseded += 1
                result.verdict = e
                current[p["result"]] = e["event_id"]
                states[e["event_id"]] = ["admitted", p["speedup"], []]
            else:
                result.rejected.update(p.get("reasons") or [p.get("state", "?")])
        elif e["type"] in ("ResultDowngraded", "ResultRetracted") and p["result"].startswith(prefix):
            state = states.get(p.get("revises") or current.get(p["result"], ""))
            if state is None or state[0] == "retracted":
                continue
            if e["type"] == "ResultRetracted":
                state[0] = "retracted"
            else:
                state[0], state[1] = "downgraded", p["to_value"]
            state[2].append(e)
    for result in results.values():
        if result.verdict is None:
            continue
        status, speedup, revisions = states[result.verdict["event_id"]]
        result.status, result.speedup, result.revisions = status, speedup, revisions
        result.reruns = reruns.get(result.verdict["event_id"], [])
        if status == "admitted" and result.reruns and result.reruns[-1]["payload"]["verdict"] == "revised":
            result.status = "revised by re-run"  # a re-run found it no longer holds; no revision event recorded
    return results


@dataclass
class Export:
    path: Path
    events: list[dict]
    by_id: dict[str, dict]
    backend: str
    cases: list[str]  # the rows, in order
    matrix: str | None
    defined: dict[str, dict]  # case -> CaseDefined payload
    results: dict[str, Result]
    view: CampaignView
    measured: list[dict]  # CandidateMeasured events of the backend
    description: dict
    description_event: dict | None
    verified: str


def load(path: Path, matrix: str | None = None, backend: str | None = None, verify: bool = True) -> Export:
    verified = "not verified (--unverified)"
    if verify:  # one read: the verifier keeps the records it checked
        with path.open(encoding="utf-8") as handle:
            summary = verify_export(handle, keep_events=True)  # raises ExportError naming the first bad line
        verified = f"hash chain verified by `ledger.verify_export` ({summary.events} events, head `{summary.head_hash[:16]}`)"
        events = summary.events_list
    else:
        events = scratch_ledger.read_export(path)
    backend = backend or default_backend(events)
    defined: dict[str, dict] = {}
    matrices: list[str] = []
    for e in events:
        if e["type"] == "CaseDefined":
            defined.setdefault(e["payload"]["case"], e["payload"])
            if e["payload"]["matrix"] not in matrices:
                matrices.append(e["payload"]["matrix"])
    if matrix:
        cases = json.loads((MATRIX_DIR / f"{matrix}.json").read_text())["cases"]
    else:
        cases = list(defined)
        matrix = ", ".join(matrices) or None
    results = read_results(events, backend)
    view = read_campaign(events)
    extra = [c for c in list(results) + [r["case"] for r in view.rounds.values() if r.get("backend") == backend]
             if c not in cases]
    cases += list(dict.fromkeys(extra))  # gated or forged outside the matrix: rows after it
    measured = [e for e in events if e["type"] == "CandidateMeasured" and e["payload"].get("backend") == backend]
    latest = measured[-1] if measured else None
    return Export(path, events, {e["event_id"]: e for e in events}, backend, cases, matrix, defined, results, view,
                  measured, (latest or {}).get("payload", {}).get("description") or {}, latest, verified)


# ---------------------------------------------------------------- the machine model


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
    lanes = FP32_LANES.get(str(capability))
    if lanes and sms and clock:
        peak = sms * lanes * 2 * clock * 1e6
        text = (f"{sms} SMs × {lanes} FP32 lanes × 2 flop (FMA) × {clock} MHz (the maximum SM clock recorded) "
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
    over this bound on this machine, before any kernel is judged against it."""
    d = export.defined.get(case)
    p = result.payload if result.verdict is not None else {}
    bound = (p.get("bound") or {}).get("median")
    copy = export.by_id.get(p.get("measurement") or "", {}).get("payload", {}).get("copy_bandwidth")
    if not (d and bound and copy):
        return None
    floor = max(d["compulsory_bytes"] / copy, d["flops"] / mach.peak if mach.peak else 0.0)
    return bound / floor


def precision_of(export: Export, case: str) -> str:
    return (export.defined.get(case) or {}).get("precision") or case.rsplit("/", 1)[-1]


# ---------------------------------------------------------------- cells


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


# ---------------------------------------------------------------- the table


def header(export: Export, command: str) -> list[str]:
    events = export.events
    # an imported event keeps the time its first ledger recorded it (origin); the import's own time says nothing,
    # nor does a checkpoint's (the publication key signs a shipped export's head later)
    times = [datetime.fromisoformat((e.get("origin") or e)["recorded_at"]) for e in events if e["type"] != "CheckpointSigned"]
    span = (max(times) - min(times)).total_seconds() if times else 0.0
    d = export.description
    source = export.description_event
    if export.backend == "cuda":
        clocks = d.get("clocks_max_mhz") or {}
        backend = (f"{d.get('device', '?')} (compute capability {d.get('compute_capability', '?')}, {d.get('sm_count', '?')} SMs, "
                   f"L2 {int(d.get('l2_bytes') or 0) // 2**20} MiB, {int(d.get('memory_bytes') or 0) / 2**30:.0f} GiB), "
                   f"NVIDIA driver {d.get('nvidia_driver', '?')} (CUDA driver API {d.get('driver_version', '?')}), "
                   f"CUDA runtime {d.get('runtime_version', '?')}, NVRTC {d.get('nvrtc_version', '?')}, "
                   f"clocks max SM {clocks.get('sm', '?')} MHz / memory {clocks.get('memory', '?')} MHz, "
                   f"power limit {d.get('power_limit_w', '?')} W; CuPy {d.get('cupy', '?')}, torch {d.get('torch', '?')}, "
                   f"pystencils {d.get('pystencils', '?')}, NumPy {d.get('numpy', '?')}, Python {d.get('python', '?')}")
    else:
        backend = (f"{d.get('cpu_model') or d.get('device', '?')} ({d.get('physical_cores', '?')} cores, "
                   f"{d.get('usable_cpus', '?')} usable CPUs, LLC {int(d.get('llc_bytes') or 0) // 2**20} MiB), "
                   f"compiler {d.get('compiler_version', '?')} `{d.get('flags', '')}`, NumPy {d.get('numpy', '?')}, "
                   f"SciPy {d.get('scipy', '?')}, pystencils {d.get('pystencils', '?')}, Python {d.get('python', '?')}")
    where = (f" (the latest CandidateMeasured: position {source['position']}, {source['recorded_at'][:19]} UTC)"
             if source else " (no CandidateMeasured in the export)")
    campaigns = [s for s in export.view.started if s["backend"] == export.backend]
    ran = "; ".join(f"campaign `{s['campaign'][:8]}`: proposer {s['proposer']}, {len(s['cases'])} cases, "
                    f"up to {s['rounds_per_case']} rounds each" for s in campaigns)
    proposers = Counter(e["payload"].get("proposer", "?") for e in events if e["type"] == "RoundStarted")
    if ran and proposers:
        ran += "; rounds by proposer: " + ", ".join(f"{name} {count}" for name, count in sorted(proposers.items())) + \
            " (external: candidates submitted as `forge submit` does)"
    title = f"{d.get('device') or export.backend}"
    return [
        f"# Operator table: {export.matrix or 'no'} matrix on {title} ({export.backend})",
        "",
        f"Generated by `{command}` from the ledger export `{display(export.path)}` alone "
        f"({len(events)} events, recorded {min(times).isoformat(' ', 'seconds')[:19] if times else '?'} – "
        f"{max(times).isoformat(' ', 'seconds')[:19] if times else '?'} UTC, a span of {span:.0f} s; {export.verified}). "
        "Every number below is read from those events or computed from them; `--check` proves this file is what the "
        "script prints.",
        "",
        f"Backend{where}: {backend}.",
        "",
        f"Forging: {ran}." if ran else "Forging: no campaign in the export.",
        "",
    ]


def display(path: Path) -> str:
    try:
        return path.resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return path.name


def case_table(export: Export, mach: Machine) -> list[str]:
    names = baseline_names(export)
    lines = [
        "## Per case",
        "",
        "Status: the latest admitted gate verdict of the case, then any ResultDowngraded / ResultRetracted revising it and "
        "any re-run verdict. Kernel: the round's subject (round number; `B` = made on a branch) · proposer · the source's "
        "sha256 (12 hex digits). Median and % of copy BW: the candidate in the admitting measurement, with the copy bandwidth "
        "that the same timing child measured. `× baseline`: that baseline's median / the candidate's median, both from that "
        "same CandidateMeasured (a precision in brackets where the baseline computes in another precision than the case; "
        "✗ = not usable). Over the bound: the gate's speedup over the fastest usable baseline with its 95% bootstrap CI. "
        "Roofline ceiling: the bound's median / the roofline time (compulsory bytes at that run's copy bandwidth or "
        "CaseDefined flops at the FP32 peak, whichever is longer), the most any kernel could gain over that bound. "
        "flop/byte: CaseDefined flops / compulsory bytes, against the machine balance of the summary.",
        "",
        "| case | status | kernel | median | % of copy BW (copy BW) | " + " | ".join(f"× {n}" for n in names)
        + " | over the bound [95% CI] | roofline ceiling | precision | flop/byte · class | diagnosis |",
        "|" + "---|" * (10 + len(names)),
    ]
    for case in export.cases:
        result = export.results.get(case) or Result(case)
        ai = intensity(export, case)
        klass = f"{ai:.1f} · {classify(export, mach, case)}" if ai is not None else "no CaseDefined"
        diagnosis = cell(diagnosis_cell(export, case))
        if result.verdict is None:
            lines.append(f"| {case} | {cell(status_cell(result))} | – | – | – | " + " | ".join("–" for _ in names)
                         + f" | – | – | – | {klass} | {diagnosis} |")
            continue
        p = result.payload
        measured = export.by_id.get(p.get("measurement") or "", {}).get("payload", {})
        copy = measured.get("copy_bandwidth")
        fraction = f"{p['fraction_of_copy']:.0%}" if p.get("fraction_of_copy") is not None else "–"
        fraction += f" ({bandwidth(copy)})" if copy else ""
        bound = p.get("bound") or {}
        speed = ratio_ci(p.get("speedup"), p.get("speedup_ci")) + f" over {bound.get('name', '?')}"
        if result.status == "downgraded":
            speed = f"{result.speedup:.2f}x (downgraded; admitted at {speed})"
        elif not result.standing:
            speed = f"{result.status}; was {speed}"
        precision = precision_of(export, case)
        same = p.get("same_precision")
        split = f"same ({precision})" if same else f"mixed: {precision} case, bound in {bound.get('precision', '?')}" if same is False else "–"
        median = f"{p['candidate_median'] * 1e3:.4g} ms" if p.get("candidate_median") else "–"
        ceiling = roofline_ceiling(export, mach, case, result)
        lines.append(f"| {case} | {cell(status_cell(result))} | {cell(kernel_cell(export, result.verdict))} | {median} | {fraction} | "
                     + " | ".join(baseline_cells(export, result.verdict, names))
                     + f" | {speed} | {f'{ceiling:.2f}x' if ceiling else '–'} | {split} | {klass} | {diagnosis} |")
    return lines + [""]


def met(ok: bool) -> str:
    return "**met**" if ok else "**not met**"


def geomean(values: list[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def summary(export: Export, mach: Machine) -> list[str]:
    results = export.results
    rows = [(case, results.get(case) or Result(case)) for case in export.cases]
    standing = [(c, r) for c, r in rows if r.standing]
    counts = Counter(r.status for _, r in rows)
    lines = [
        "## Summary",
        "",
        f"- **Admitted: {len(standing)} of {len(rows)} cases** have a standing admitted result "
        f"({counts['admitted']} admitted, {counts['downgraded']} downgraded); {counts['retracted']} retracted, "
        f"{counts['revised by re-run']} revised by a re-run, {counts['never admitted']} never admitted.",
    ]
    copy = f"{bandwidth(mach.copy)} (median of the {mach.copies} copy measurements of the export)" if mach.copy else "unknown"
    if mach.balance:
        lines.append(f"- Machine balance = FP32 peak / copy bandwidth = {mach.balance:.1f} flop/byte. The FP32 peak is "
                     f"computed, not measured, from the recorded description: {mach.peak_text}; copy bandwidth {copy}. "
                     "A case is memory-bound when its arithmetic intensity (CaseDefined flops / compulsory bytes) is below "
                     "the balance, compute-bound otherwise; f16 and f64 cases are classified against the same FP32 balance.")
    else:
        lines.append(f"- Machine balance: unknown. FP32 peak {mach.peak_text}; copy bandwidth {copy}. "
                     "Every case is classified \"unknown\".")
    klass = {case: classify(export, mach, case) for case, _ in rows}
    tally = Counter(klass.values())
    lines.append("- Classification: " + ", ".join(f"{n} {k}" for k, n in sorted(tally.items())) + ".")
    precision = {case: precision_of(export, case) for case, _ in rows}

    def memory_block(title: str, wanted: set[str]) -> list[str]:
        cases = [(c, r) for c, r in rows if klass[c] == "memory-bound" and precision[c] in wanted]
        if not cases:
            return [f"- {title}: no memory-bound case."]
        with_result = [(c, r) for c, r in cases if r.standing and r.payload.get("fraction_of_copy") is not None]
        missing = len(cases) - len(with_result)
        if not with_result:
            return [f"- {title}: {len(cases)} memory-bound cases, none with a standing result; the targets "
                    f"(median ≥ {MEMORY_MEDIAN_TARGET:.0%}, none < {MEMORY_FLOOR:.0%} of the copy bandwidth) are {met(False)}."]
        fractions = {c: r.payload["fraction_of_copy"] for c, r in with_result}
        median, low = statistics.median(fractions.values()), min(fractions, key=fractions.get)
        below = sorted(c for c, f in fractions.items() if f < MEMORY_FLOOR)
        return [
            f"- {title}: {len(with_result)} of {len(cases)} memory-bound cases have a standing result: median "
            f"{median:.0%} of the copy bandwidth (target ≥ {MEMORY_MEDIAN_TARGET:.0%}: {met(median >= MEMORY_MEDIAN_TARGET)}), "
            f"minimum {fractions[low]:.0%} ({low}); {len(below)} below {MEMORY_FLOOR:.0%} "
            f"(target none: {met(not below)})" + (f": {', '.join(below)}" if below else "") + ". "
            + (f"Over the matrix both targets are {met(False)}: {missing} memory-bound case{'s' if missing > 1 else ''} "
               "without a standing result." if missing else "Every memory-bound case of the set has a result."),
        ]

    lines += ["", "### Memory-bound cases (% of the copy bandwidth measured in the same run)", ""]
    lines += memory_block("f32 / f64", {"f32", "f64"})
    lines += memory_block("f16 (kept apart)", {"f16"})

    lines += ["", "### Speedup over the bound", ""]
    for wanted in ("f32", "f64", "f16"):
        same = [(c, r) for c, r in standing if precision[c] == wanted and r.payload.get("same_precision") and r.speedup]
        total = sum(1 for c, _ in rows if precision[c] == wanted)
        if not total:
            continue
        mean = geomean([r.speedup for _, r in same])
        values = ", ".join(f"{c} {r.speedup:.2f}x" for c, r in same)
        if wanted == "f32":
            target = (f" (target ≥ {GEOMEAN_TARGET}x: {met(mean is not None and mean >= GEOMEAN_TARGET)}"
                      + (f"; {total - len(same)} f32 cases of the matrix have no same-precision standing result" if total > len(same) else "")
                      + ")")
        else:
            target = ""
        lines.append(f"- Same precision, {wanted}: geometric mean " + (f"**{mean:.2f}x**" if mean else "– (no result)")
                     + f" over {len(same)} of the {total} {wanted} cases{target}" + (f": {values}." if values else "."))
        ceilings = [roofline_ceiling(export, mach, c, r) for c, r in same]
        if same and all(ceilings):
            ceiling = geomean(ceilings)
            reach = ""
            if wanted == "f32":
                reach = (f"; the target of {GEOMEAN_TARGET}x is " + ("below that ceiling" if ceiling >= GEOMEAN_TARGET
                                                                     else "above it: out of reach over these bounds"))
            lines.append(f"  - Roofline ceiling over the same bounds (per case in the table below): geometric mean "
                         f"{ceiling:.2f}x{reach}.")
    mixed = [(c, r) for c, r in standing if r.payload.get("same_precision") is False]
    lines.append("- Mixed precision (the bound computes in another precision than the case; never in the headlines above): "
                 + ("; ".join(f"{c} {r.speedup:.2f}x over {r.payload['bound']['name']} ({r.payload['bound']['precision']})"
                              for c, r in mixed) if mixed else "none") + ".")

    lines += ["", "### Compute-bound cases (achieved GFLOP/s = CaseDefined flops / candidate median)", ""]
    compute = [(c, r) for c, r in rows if klass[c] == "compute-bound"]
    if not compute:
        lines.append("- None" + (" (the classification is unknown)" if mach.balance is None else "") + ".")
    for case, result in compute:
        d = export.defined[case]
        text = f"- {case} ({d['flops'] / d['compulsory_bytes']:.1f} flop/byte, {precision[case]}): "
        if result.standing and result.payload.get("candidate_median"):
            achieved = d["flops"] / result.payload["candidate_median"]
            text += (f"{achieved / 1e9:,.0f} GFLOP/s, {achieved / mach.peak:.1%} of the FP32 peak; "
                     f"{result.speedup:.2f}x over the bound ({result.status}).")
            if achieved > mach.peak:
                text += (" Over 100%: CaseDefined counts every offset's multiply-add, and the kernel executes fewer "
                         "(it sums symmetric offsets before their shared coefficient multiplies).")
        else:
            text += f"no standing result ({result.status})."
        lines.append(text)

    f16 = [(c, r) for c, r in rows if precision[c] == "f16"]
    lines += ["", "### f16 cases (listed apart from f32 / f64)", ""]
    if not f16:
        lines.append("- None in the matrix.")
    for case, result in f16:
        if result.standing:
            p = result.payload
            kind = "same precision" if p.get("same_precision") else f"mixed: bound in {(p.get('bound') or {}).get('precision', '?')}"
            lines.append(f"- {case} ({klass[case]}): {result.speedup:.2f}x over {p['bound']['name']} ({kind}), "
                         f"{p['fraction_of_copy']:.0%} of the copy bandwidth ({result.status}).")
        else:
            lines.append(f"- {case} ({klass[case]}): {result.status}.")
    return lines + [""]


def outcome(r: dict, view: CampaignView) -> str:
    if r.get("abandoned"):
        return "abandoned"
    end = r.get("end")
    if end is None:
        return "open"
    why = ", ".join(r.get("reasons") or []) or r.get("state", "")
    if end == "RoundCommitted" and r.get("line") == "main":
        return "admitted"
    if end == "RoundCommitted":
        fate = view.branch_ends.get(r["line"])
        return f"head of {r['line']} ({why}; branch {fate['type'].removeprefix('Branch').lower() if fate else 'still open'})"
    return f"reverted ({why})"


def rounds_section(export: Export) -> list[str]:
    view = export.view
    cases = [c for c in export.cases if any(r.get("backend") == export.backend for r in view.per_case.get(c, []))]
    lines = ["## Rounds", ""]
    if not cases:
        return lines + ["No forging round in the export.", ""]
    lines += ["Each round: number (`B` = started on a branch), subject, speedup over the bound as the gate measured it, "
              "outcome. Branch resolutions (the head measured against the main line) follow the rounds.", ""]
    several = len(view.started) > 1
    if several:
        lines[-2] += " Round numbers restart in each campaign, whose id opens its rounds."
    for case in cases:
        cells = []
        campaign = None
        for r in view.per_case[case]:
            speed = f"{r['speedup']:.2f}x" if r.get("speedup") is not None else "–"
            opening = f"campaign `{(r.get('campaign') or '?')[:8]}`, " if several and r.get("campaign") != campaign else ""
            campaign = r.get("campaign")
            cells.append(f"{opening}{round_number(r)}: {r.get('subject', '?').split(':')[0]} "
                         f"{speed} {outcome(r, view)}")
        ends = [b for b in view.branch_ends.values() if b["case"] == case and b.get("round") is None]
        cells += [f"{b['branch']} {b['type'].removeprefix('Branch').lower()}: {b['reason']}" for b in ends]
        converged = view.converged.get(case)
        state = f"converged: {converged['reason']}" if converged else "not converged"
        lines.append(f"- **{case}** ({state}): " + "; ".join(cell(c) for c in cells))
    return lines + [""]


def refuted_section(export: Export) -> list[str]:
    """Rounds whose direction lost: reverted, or kept as the head of a branch that was then dropped;
    heads of branches still open are listed apart (not refuted yet, not admitted either)."""
    view = export.view
    refuted, pending = [], []
    tally: dict[str, Counter] = defaultdict(Counter)
    for case in export.cases:
        for r in view.per_case.get(case, []):
            if r.get("backend") != export.backend or r.get("end") is None:
                continue
            lever = r.get("subject", "?").split(":")[0]
            fate = view.branch_ends.get(r.get("line", "")) if r["end"] == "RoundCommitted" and r.get("line") != "main" else None
            if r["end"] == "RoundCommitted" and r.get("line") == "main":
                tally[lever]["admitted"] += 1
                continue
            perf = r.get("perf") or {}
            verdict = export.by_id.get(r.get("verdict_event") or "", {}).get("payload", {})
            measured = verdict.get("detail") or perf.get("measurement", "")
            fraction = perf.get("fraction_of_copy")
            why = ", ".join(r.get("reasons") or []) or r.get("state", "?")
            tags = ", ".join(r.get("lever_tags") or [])
            text = (f"{case} {round_label(export, r)}: tried `{r.get('subject', '?')}`" + (f" ({tags})" if tags else "")
                    + f"; measured {measured}" + (f", {fraction:.0%} of copy" if fraction is not None else "") + f"; rejected: {why}")
            if r["end"] == "RoundReverted":
                refuted.append(text + " (reverted)")
                tally[lever]["refuted"] += 1
            elif fate is not None and fate["type"] == "BranchDropped":
                refuted.append(text + f" (kept as the head of {r['line']}, which was dropped: {fate['reason']})")
                tally[lever]["refuted"] += 1
            elif fate is None:
                pending.append(text + f" (head of {r['line']}, still open)")
                tally[lever]["pending"] += 1
            else:
                tally[lever]["stepping stone"] += 1  # a head of a branch merged later
    lines = ["## Refuted directions (from the perf log)", ""]
    lines += [f"- {cell(t)}" for t in refuted] or ["- None: no round was reverted and no branch was dropped."]
    if pending:
        lines += ["", "Not admitted and not refuted yet (heads of branches the export leaves open):", ""]
        lines += [f"- {cell(t)}" for t in pending]
    if tally:
        lines += ["", "By lever (rounds): " + "; ".join(
            f"{lever}: " + ", ".join(f"{n} {k}" for k, n in sorted(c.items())) for lever, c in sorted(tally.items())) + "."]
    return lines + [""]


def rerun_section(export: Export) -> list[str]:
    rows = []
    for case in export.cases:
        result = export.results.get(case)
        for rerun in (result.reruns if result else []):
            q = rerun["payload"]
            admitted = result.payload
            ratio = q["speedup"] / admitted["speedup"] if q.get("speedup") and admitted.get("speedup") else None
            agree = "–" if ratio is None else ("yes" if abs(ratio - 1) <= REGRESSION_BAND else "no")
            appended = [e for e in export.events if e["type"] in ("ResultDowngraded", "ResultRetracted")
                        and e["payload"].get("rerun") == rerun["event_id"]]
            revisions = "; ".join(f"{e['type']}: {e['payload']['reason']}" for e in appended) or "none"
            rows.append(f"| {case} | {ratio_ci(admitted.get('speedup'), admitted.get('speedup_ci'))} | "
                        f"{ratio_ci(q.get('speedup'), q.get('speedup_ci'))} | {f'{ratio:.3f}' if ratio else '–'} | {agree} | "
                        f"{q['verdict']} | {cell(revisions)} |")
    if not rows:
        return []
    agreeing = sum(1 for r in rows if "| yes |" in r)
    return [
        "## Whole-matrix re-run",
        "",
        f"Re-run verdicts (GateVerdict with `revises`) of the admitted kernels: {len(rows)}; {agreeing} agree with the admitted "
        f"speedup within the {REGRESSION_BAND:.0%} regression band (|re-run / admitted − 1| ≤ {REGRESSION_BAND:.0%}).",
        "",
        "| case | admitted [95% CI] | re-run [95% CI] | re-run / admitted | within the band | re-run verdict | revisions appended |",
        "|---|---|---|---|---|---|---|",
        *rows,
        "",
    ]


def command_text(export: Export, matrix: str | None, backend: str | None) -> str:
    parts = [".venv/bin/python benchmarks/operator_table.py", display(export.path)]
    if matrix:
        parts.append(f"--matrix {matrix}")
    if backend:
        parts.append(f"--backend {backend}")
    return " ".join(parts)


def render(path: Path, matrix: str | None = None, backend: str | None = None, verify: bool = True) -> str:
    export = load(path, matrix, backend, verify)
    mach = machine(export)
    lines = (header(export, command_text(export, matrix, backend)) + summary(export, mach) + case_table(export, mach)
             + rounds_section(export) + refuted_section(export) + rerun_section(export))
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("export", help="the ledger export (JSON Lines)")
    parser.add_argument("--matrix", help="rows: the cases of fixtures/matrices/NAME.json (default: the export's CaseDefined)")
    parser.add_argument("--backend", choices=["cpu", "cuda"], help="default: the backend of the latest CandidateMeasured")
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--out", help="write the markdown here (default: stdout)")
    output.add_argument("--check", metavar="FILE", help="exit 1 when FILE differs from what would be generated")
    parser.add_argument("--unverified", action="store_true", help="skip the export's hash-chain verification")
    options = parser.parse_args(argv)
    try:
        text = render(Path(options.export), options.matrix, options.backend, not options.unverified)
    except ExportError as error:
        print(f"{options.export}: the export does not verify: {error}", file=sys.stderr)
        return 2
    if options.check:
        target = Path(options.check)
        current = target.read_text(encoding="utf-8") if target.is_file() else ""
        if current == text:
            print(f"{target}: up to date with {options.export}")
            return 0
        diff = difflib.unified_diff(current.splitlines(), text.splitlines(), str(target), "generated", lineterm="", n=1)
        print(f"{target}: differs from what {options.export} generates:", file=sys.stderr)
        print("\n".join(list(diff)[:60]), file=sys.stderr)
        return 1
    if options.out:
        Path(options.out).parent.mkdir(parents=True, exist_ok=True)
        Path(options.out).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
