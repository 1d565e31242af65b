"""Reading the ledger export for benchmarks/operator_table.py: the hash chain verified, the rows
(the cases), each case's operator result replayed from the gate's verdicts and the ledger's
revisions, and the forge's campaign view. Needs no Django and no database.
"""
from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import scratch_ledger
from forge_campaign import CampaignView, read_campaign

from ledger.verify_export import verify_export

ROOT = Path(__file__).resolve().parents[1]
MATRIX_DIR = ROOT / "fixtures" / "matrices"
STANDING = ("admitted", "downgraded")


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

    @property
    def bound(self) -> dict:
        """The bound the standing speedup is over: the latest downgrade's own measurement
        (ResultDowngraded v2 `measured`) where there is one, else the admitting verdict's."""
        for revision in reversed(self.revisions):
            measured = revision["payload"].get("measured")
            if revision["type"] == "ResultDowngraded" and measured and measured.get("bound"):
                return measured["bound"]
        return self.payload.get("bound") or {}


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
    edges: dict[str, dict]  # edge case -> its latest EdgeShapeMeasured payload (forge/edges.py)


def edge_measurements(events: list[dict], backend: str) -> dict[str, dict]:
    """The generalisation measurements of `backend`, the latest per edge case, in ledger order."""
    edges: dict[str, dict] = {}
    for e in events:
        if e["type"] == "EdgeShapeMeasured" and e["payload"]["backend"] == backend:
            edges.pop(e["payload"]["case"], None)
            edges[e["payload"]["case"]] = e["payload"]
    return edges


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
    edges = edge_measurements(events, backend)
    cases = [c for c in cases if c not in edges]  # an edge shape is reported beside the matrix, not in it
    extra = [c for c in list(results) + [r["case"] for r in view.rounds.values() if r.get("backend") == backend]
             if c not in cases and c not in edges]
    cases += list(dict.fromkeys(extra))  # gated or forged outside the matrix: rows after it
    measured = [e for e in events if e["type"] == "CandidateMeasured" and e["payload"].get("backend") == backend]
    latest = measured[-1] if measured else None
    return Export(path, events, {e["event_id"]: e for e in events}, backend, cases, matrix, defined, results, view,
                  measured, (latest or {}).get("payload", {}).get("description") or {}, latest, verified, edges)
