#!/usr/bin/env python
"""A forging campaign in a fresh scratch ledger, shipped as that ledger's export, and the table
generated from the export (never typed by hand).

Run mode: a fresh ledger (a new folder, benchmarks/scratch_ledger.py), the matrix
loaded (`CaseDefined`), one campaign over --cases with the levers proposer, rounds taken
round-robin over the cases (so a deadline cuts every case short evenly, not the last ones
entirely) in this process, and the whole ledger exported to --out after every round:

    .venv/bin/python benchmarks/forge_campaign.py --backend cpu --matrix cpu --rounds 8 \\
        --out docs/benchmarks/forge_cpu_levers.jsonl

On the device machine (docs/gpu.md), with a deadline that starts no round expected to overrun:

    source scripts/device_env.sh && python3 benchmarks/forge_campaign.py --backend cuda \\
        --cases star_1/256x256x256/f32,box_1/256x256x256/f32,star2d_1/8192x8192/f32 \\
        --rounds 6 --deadline 540 --out $OUT/forge_h200_levers.jsonl

A campaign longer than one 10-minute device call continues in the next: `--resume PREVIOUS.jsonl`
(carried in an ignored folder such as device_carry/) imports that export and runs the rest of
its campaign, and --out then holds every call's events in one ledger.

Table mode (`--table FILE.jsonl`) prints markdown from the export alone: per case the best
admitted kernel's speedup over the per-case public bound (with its 95% CI and the bound's
identity), its fraction of the copy bandwidth measured in the same run, the diagnosis sealed
in the map, and each round's change and outcome. `python -m ledger.verify_export FILE` checks
the export; `manage.py ledger import FILE` loads it with its origin.
"""
from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import scratch_ledger
ACTOR = "agent:forge-campaign"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def run(options) -> int:
    scratch_ledger.setup_django("campaign")
    from forge.models import CaseCampaign
    from forge.proposers import make_proposer
    from forge.projections import campaign_key
    from forge.services import execute_round, start_campaign, start_round
    from ledger.services import initialise_ledger
    from measurement.reruns import past_deadline
    from measurement.matrices import load_matrix, matrix_cases

    started = time.perf_counter()
    initialise_ledger(f"forge campaign ({options.backend}, scratch)", ACTOR)
    load_matrix(options.matrix, ACTOR)
    if options.resume:
        campaign, cases = resume(Path(options.resume))
    else:
        if options.import_ledger:
            from ledger.transfer import import_ledger

            imported, _ = import_ledger(Path(options.import_ledger), ACTOR)
            log(f"imported {imported} events from {options.import_ledger}")
        cases = options.cases.split(",") if options.cases else matrix_cases(options.matrix)
        campaign = start_campaign(cases, options.backend, "levers", options.rounds, ACTOR)
    levers = make_proposer("levers")
    out = Path(options.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    durations: list[float] = []
    for number in range(1, options.rounds + 1):
        for case in cases:
            if CaseCampaign.objects.get(key=campaign_key(campaign, case)).converged:
                continue
            if options.only and case not in options.only.split(","):
                continue
            elapsed = time.perf_counter() - started
            if past_deadline(options.deadline, elapsed, durations):
                log(f"deadline: stopping after {elapsed:.0f} s; the export holds every ended round")
                scratch_ledger.export(out)
                return 0
            state = CaseCampaign.objects.get(key=campaign_key(campaign, case))
            name, proposer = scheduled(case, state.rounds + 1, levers, options.handwritten, options.handwritten_from,
                                       options.subjects.split(",") if options.subjects else None)
            round_id = start_round(campaign, case, name, ACTOR)
            if round_id is None:
                continue
            began = time.perf_counter()
            outcome = execute_round(round_id, proposer, ACTOR)
            durations.append(time.perf_counter() - began)
            speed = f"{outcome.speedup:.2f}x" if outcome.speedup is not None else "-"
            log(f"round {state.rounds + 1} {case}: {outcome.status} ({outcome.state}) {speed} [{durations[-1]:.0f} s] {outcome.detail[:100]}")
            scratch_ledger.export(out)
    log(f"done in {time.perf_counter() - started:.0f} s; {scratch_ledger.export(out)} events in {out}")
    return 0


def scheduled(case_id: str, number: int, levers, handwritten: bool, first: int = 2, subjects: list[str] | None = None):
    """(proposer name, proposer) of a case's round `number`: the levers, except that with
    --handwritten, from round `first` on, the case's hand-written candidates (forge.handwritten)
    that this ledger has not seen proposed yet are submitted as `forge submit` does, in order,
    while any are left; with `subjects` (--subjects), only the candidates of those names
    ("short4+alternate": a subject's text before its colon), where a sweep pointed at them. A name
    given as CASE=NAME holds for that case alone: a sweep points each case at its own variant, and
    one campaign (one import of the shipped export) then serves them all."""
    if handwritten and number >= first:
        from forge.candidates import matrix_candidates
        from forge.proposers.external import ExternalProposer
        from forge.selectors import proposed_source_hashes
        from measurement.harness.cases import parse_case
        from measurement.services import source_hash

        seen = proposed_source_hashes(case_id)
        for subject, launch, hypothesis, source in matrix_candidates(parse_case(case_id)):
            name = subject.split(":")[0]
            if subjects is not None and name not in subjects and f"{case_id}={name}" not in subjects:
                continue
            if source_hash(source) not in seen:
                return "external", ExternalProposer(source=source, hypothesis=hypothesis, launch=launch, subject=subject,
                                                    lever_tags=("handwritten",))
    return "levers", levers


def resume(path: Path) -> tuple[str, list[str]]:
    """Import an earlier call's export and continue its (last) campaign: a device call has 10
    minutes, a 37-case campaign needs many; rounds cut by the last call's end are abandoned."""
    from forge.runner import resume_campaign
    from ledger.transfer import import_ledger

    fresh, _ = import_ledger(path, ACTOR)
    started = [e["payload"] for e in scratch_ledger.read_export(path) if e["type"] == "CampaignStarted"]
    if not started:
        raise SystemExit(f"{path} holds no CampaignStarted event to resume")
    campaign, cases = started[-1]["campaign"], started[-1]["cases"]
    _, abandoned = resume_campaign(campaign, ACTOR)
    log(f"resumed campaign {campaign} from {path} ({fresh} events imported, {abandoned} cut rounds abandoned)")
    return campaign, cases


# ---------------------------------------------------------------- the table, from the export alone


@dataclass
class CampaignView:
    """What the forge events of an export say about its campaigns, read once (the table here and
    benchmarks/operator_table.py both read an export this way)."""

    events: list[dict]
    by_id: dict[str, dict]
    started: list[dict]  # CampaignStarted payloads
    rounds: dict[str, dict]  # round id -> number, case, branch, proposer, subject, end, state, speedup, line, ...
    per_case: dict[str, list[dict]]  # case -> its rounds in the order they started
    planned: dict[str, dict]  # case -> the latest CasePlanned payload
    sealed: dict[str, dict]  # case -> the latest CellSealed payload
    converged: dict[str, dict]  # case -> the latest CaseConverged payload
    branches: dict[str, list[str]]  # case -> opened / merged / dropped, in order
    branch_ends: dict[str, dict]  # branch id -> {"type": BranchMerged|BranchDropped, **payload}
    admitted: dict[str, dict]  # case -> the latest admitted GateVerdict of a round or a merged branch


def read_campaign(events: list[dict]) -> CampaignView:
    by_id = {e["event_id"]: e for e in events}
    view = CampaignView(events, by_id, [], {}, defaultdict(list), {}, {}, {}, defaultdict(list), {}, {})
    rounds = view.rounds
    for e in events:
        p = e["payload"]
        if e["type"] == "CampaignStarted":
            view.started.append(p)
        elif e["type"] == "CasePlanned":
            view.planned[p["case"]] = p
        elif e["type"] == "RoundStarted":
            rounds[p["round"]] = {"round": p["round"], "number": p["number"], "case": p["case"],
                                  "branch": p.get("branch", "main"), "proposer": p.get("proposer"),
                                  "backend": p.get("backend"), "campaign": p.get("campaign")}
            view.per_case[p["case"]].append(rounds[p["round"]])
        elif e["type"] == "CandidateProposed" and p["round"] in rounds:
            rounds[p["round"]].update(subject=p["subject"], hypothesis=p.get("hypothesis"),
                                      lever_tags=p.get("lever_tags", []), source_hash=p.get("source_hash"))
        elif e["type"] in ("RoundCommitted", "RoundReverted") and p["round"] in rounds:
            verdict = by_id.get(p["verdict_event"] or "", {}).get("payload", {})
            if verdict.get("verdict") == "admitted":
                view.admitted[p["case"]] = verdict
            rounds[p["round"]].update(end=e["type"], state=p["state"], speedup=p["speedup"], line=p.get("line", "main"),
                                      fraction=verdict.get("fraction_of_copy"), reasons=verdict.get("reasons", []),
                                      verdict_event=p["verdict_event"], verdict=verdict.get("verdict"))
        elif e["type"] == "RoundAbandoned" and p["round"] in rounds:
            rounds[p["round"]]["abandoned"] = p["reason"]
        elif e["type"] == "PerfLogged" and p["round"] in rounds:
            rounds[p["round"]]["perf"] = p
        elif e["type"] == "CellSealed":
            view.sealed[p["case"]] = p
        elif e["type"] == "CaseConverged":
            view.converged[p["case"]] = p
        elif e["type"].startswith("Branch"):
            view.branches[p["case"]].append(e["type"].removeprefix("Branch").lower())
            if e["type"] in ("BranchMerged", "BranchDropped"):
                view.branch_ends[p["branch"]] = {"type": e["type"], **p}
            verdict = by_id.get(p.get("verdict_event") or "", {}).get("payload", {})
            if e["type"] == "BranchMerged" and verdict.get("verdict") == "admitted":
                view.admitted[p["case"]] = verdict
    return view


def table(path: Path) -> str:
    view = read_campaign(scratch_ledger.read_export(path))
    events, started, per_case = view.events, view.started, view.per_case
    sealed, converged, branches, admitted = view.sealed, view.converged, view.branches, view.admitted
    first = events[0] if events else {}
    lines = [
        f"Generated by `benchmarks/forge_campaign.py --table {path.name}` from the ledger export "
        f"({len(events)} events, first recorded {first.get('recorded_at', '?')[:19]} UTC). "
        + (f"Campaign: backend {started[0]['backend']}, proposer {started[0]['proposer']}, "
           f"{started[0]['rounds_per_case']} rounds per case at most." if started else ""),
        "",
        "| case | rounds | admitted | speedup over the bound [95% CI] | bound | % of copy BW | branches | diagnosis (sealed) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for case in sorted(per_case):
        verdict = admitted.get(case)
        speed, bound_name, fraction = "–", "–", "–"
        if verdict:
            ci = verdict.get("speedup_ci")
            bound = verdict.get("bound") or {}
            speed = f"{verdict['speedup']:.2f}x" + (f" [{ci[0]:.2f}–{ci[1]:.2f}]" if ci else "")
            bound_name = f"{bound.get('name', '?')} ({bound.get('precision', '?')})"
            if verdict.get("fraction_of_copy") is not None:
                fraction = f"{verdict['fraction_of_copy'] * 100:.0f}%"
        diagnosis = sealed[case]["diagnosis"] if case in sealed else "not sealed (the case did not converge)"
        lines.append(f"| {case} | {len(per_case[case])} | {'yes' if verdict else 'no'} | {speed} | {bound_name} | {fraction} "
                     f"| {', '.join(branches[case]) or '–'} | {diagnosis} |")
    lines += ["", f"Admitted: {len(admitted)} of {len(per_case)} cases (the columns show the gate's latest admitted kernel).", "", "Rounds (speedup over the bound as the gate measured it; "
              "`B` = made on a branch, `→B` = kept as the branch head, `✓` = admitted):", ""]
    for case in sorted(per_case):
        cells = []
        for r in per_case[case]:
            speed = f"{r['speedup']:.2f}x" if r.get("speedup") is not None else r.get("state", "open")
            mark = "✓" if r.get("end") == "RoundCommitted" and r.get("line") == "main" else "→B" if r.get("end") == "RoundCommitted" else ""
            cells.append(f"{r['number']}{'B' if r['branch'] != 'main' else ''}: {r.get('subject', '?').split(':')[0]} {speed}{mark}")
        lines.append(f"- **{case}** ({converged.get(case, {}).get('reason', 'not converged')}): " + "; ".join(cells))
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--matrix", help="matrix whose CaseDefined events to load (default: the backend's: cpu or gpu)")
    parser.add_argument("--cases", help="comma-separated case ids (default: the whole matrix)")
    parser.add_argument("--rounds", type=int, default=6, help="round budget per case")
    parser.add_argument("--deadline", type=float, help="seconds: start no round expected to end later")
    parser.add_argument("--out", help="the JSON Lines export to write")
    parser.add_argument("--resume", help="an earlier call's export: import it and continue its campaign "
                                         "(its cases and round budget; --cases and --rounds are ignored)")
    parser.add_argument("--handwritten", action="store_true",
                        help="rounds 2, 3, ... of each case submit its hand-written candidates (forge/handwritten.py) "
                             "before the levers go on")
    parser.add_argument("--handwritten-from", type=int, default=2, metavar="N",
                        help="the first round of each case that submits hand-written candidates (default 2: round 1 "
                             "is the levers'); 1 in a new campaign over a ledger that already holds rounds")
    parser.add_argument("--subjects", metavar="NAMES",
                        help="comma-separated: submit only the hand-written candidates of these names (forge/candidates.py, "
                             "e.g. short4+alternate), in their order, where a sweep measured them ahead of the standing kernel; "
                             "CASE=NAME names one for that case alone (star_2/512x512x512/f32=rows8+lean)")
    parser.add_argument("--import", dest="import_ledger", metavar="FILE",
                        help="import this export first, then start a new campaign in the same ledger (--cases, --rounds); "
                             "its admitted results stay the prior bests every round must not regress")
    parser.add_argument("--only", help="comma-separated cases: run rounds for these alone in this call "
                                       "(the campaign keeps its other cases for a later --resume)")
    parser.add_argument("--table", help="print the markdown table of this export and exit")
    options = parser.parse_args()
    if options.table:
        sys.stdout.write(table(Path(options.table)))
        return 0
    if not options.out:
        parser.error("--out is required to run a campaign")
    if options.subjects and not options.handwritten:
        parser.error("--subjects names hand-written candidates: use it with --handwritten")
    if options.handwritten and options.backend != "cuda":
        parser.error("--handwritten candidates are CUDA kernels: use --backend cuda")
    options.matrix = options.matrix or ("gpu" if options.backend == "cuda" else "cpu")
    return run(options)


if __name__ == "__main__":
    sys.exit(main())
