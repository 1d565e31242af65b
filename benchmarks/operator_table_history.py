"""The sections of benchmarks/operator_table.py on how the results came about and whether they
held: each case's forging rounds, the refuted directions (from the perf log), the
whole-matrix re-run and the re-gate against the bounds the re-runs measured.
"""
from __future__ import annotations

import math
from collections import Counter, defaultdict

from forge_campaign import CampaignView
from operator_table_export import Export
from operator_table_rows import case_facts, cell, machine, met, ratio_ci, round_label, round_number

from measurement.harness.rules import REGRESSION_BAND
from measurement.targets import WholeRerun, rerun_time as rerun_target, temporal


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
    timed = rerun_time(export)
    if not rows:
        return ["## Whole-matrix re-run", "", timed, ""] if whole_reruns(export) else []
    agreeing = sum(1 for r in rows if "| yes |" in r)
    return [
        "## Whole-matrix re-run",
        "",
        timed,
        "",
        f"Re-run verdicts (GateVerdict with `revises`) of the admitted kernels: {len(rows)}; {agreeing} agree with the admitted "
        f"speedup within the {REGRESSION_BAND:.0%} regression band (|re-run / admitted − 1| ≤ {REGRESSION_BAND:.0%}).",
        "",
        "| case | admitted [95% CI] | re-run [95% CI] | re-run / admitted | within the band | re-run verdict | revisions appended |",
        "|---|---|---|---|---|---|---|",
        *rows,
        "",
    ]


def whole_reruns(export: Export) -> list[dict]:
    """The MatrixRerunFinished events of the backend that planned every standing result."""
    return [e for e in export.events if e["type"] == "MatrixRerunFinished"
            and e["payload"]["backend"] == export.backend and e["payload"]["whole"]]


def rerun_time(export: Export) -> str:
    """Issue 16's target for the re-run as a unit (measurement.targets.rerun_time), from the latest
    whole MatrixRerunFinished of the backend (measurement.reruns.record_matrix_rerun)."""
    runs = whole_reruns(export)
    evaluation = rerun_target(WholeRerun.from_payload(runs[-1]["payload"]) if runs else None)
    head = f"Whole-matrix re-run time (target: {evaluation.target}):"
    if not runs:
        return f"{head} not recorded in this export (no MatrixRerunFinished of a whole re-run)."
    run = runs[-1]["payload"]
    left = f"; {len(run['not_run'])} left by its deadline" if run["not_run"] else ""
    return (f"{head} {met(evaluation.met)}: the latest (position {runs[-1]['position']}) re-ran {len(run['cases'])} of "
            f"{run['standing']} standing results in {run['wall_seconds']:.1f} s{left}.")


def regate_section(export: Export) -> list[str]:
    """Each standing case's latest re-run that names every baseline (GateVerdict v2, issue 15):
    the speedup over the bound that re-run measured, with its label, and over each baseline; how
    many cases still beat their bound (the CI's lower end above 1) and the geomean per precision.
    A re-gate with new baselines (Halide, the composed bound, the fair f16 kernel) shows here
    what the admitted numbers, measured against older bounds, no longer can."""
    latest = {}
    for case in export.cases:
        result = export.results.get(case)
        named = [r for r in (result.reruns if result else []) if r["payload"].get("baselines") is not None
                 and not r["payload"].get("left_out")]  # a re-run that left baselines out timed only the contenders
        if named:
            latest[case] = named[-1]["payload"]
    if not latest:
        return []
    families = sorted({name for q in latest.values() for name in q["baselines"]})
    rows, wins, noisy_wins, per_precision = [], 0, 0, defaultdict(list)
    for case, q in latest.items():
        ci = q.get("speedup_ci")
        above = bool(ci and ci[0] > 1.0)
        win = above and q["verdict"] in ("reconfirmed", "admitted")
        wins += win
        noisy_wins += above and q["verdict"] == "inconclusive"
        if q.get("speedup"):
            per_precision[case.rsplit("/", 1)[-1]].append(q["speedup"])
        bound = (q.get("bound") or {})
        over = [q["baselines"].get(name, {}).get("speedup") for name in families]
        rows.append(f"| {case} | {ratio_ci(export.results[case].payload.get('speedup'), export.results[case].payload.get('speedup_ci'))}"
                    f" over {cell((export.results[case].payload.get('bound') or {}).get('name', '?'))} | "
                    f"{ratio_ci(q.get('speedup'), ci)} | {cell(bound.get('label') or bound.get('name', '–'))} | "
                    + " | ".join(f"{x:.2f}x" if x else "–" for x in over)
                    + f" | {'yes' if win else 'CI above 1, but noisy' if above else 'no'} | {q['verdict']} |")
    geomeans = "; ".join(f"{precision}: {math.exp(sum(map(math.log, values)) / len(values)):.2f}x over {len(values)} cases"
                         for precision, values in sorted(per_precision.items()))
    return [
        "## Re-gate against every public baseline",
        "",
        f"The latest re-run of each standing result that timed every baseline in the same measurement: "
        f"**{wins} of {len(latest)} still beat their bound** (95% CI above 1 in a conclusive re-run); {noisy_wins} more "
        f"have a CI above 1 in a re-run too noisy to conclude. Geomean speedup over the bound, per precision: "
        f"{geomeans or 'none'}.",
        "",
        *temporal_target(export),
        "| case | admitted over | re-gate [95% CI] | bound of the re-gate | "
        + " | ".join(f"over {cell(name)}" for name in families) + " | still wins | verdict |",
        "|---|---|---|---|" + "---|" * len(families) + "---|---|",
        *rows,
        "",
    ]


def temporal_target(export: Export) -> list[str]:
    """The temporal target of issue 16 (measurement.targets.temporal): each diamond_tsT with T >= 4
    over its composed bound in the newest verdict that timed one (a re-run, or the admitting verdict
    of a kernel admitted after it)."""
    evaluation = temporal(case_facts(export, machine(export)))
    if not evaluation.scope:
        return []
    return [f"Temporal (target: {evaluation.target}): {met(evaluation.met)}: {evaluation.measured}.", ""]
