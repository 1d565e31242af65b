"""The provenance chain behind a reported number, read from the ledger's events.

Operator result (operator/<backend>/<case>, one stream): the admitting GateVerdict → its
CandidateMeasured evidence (every raw sample of every variant, the backend description,
the harness version) → the forge round that proposed the kernel (RoundStarted,
CandidateProposed: hypothesis, proposer, parent hash) → the kernel source and its parent
(found by hash among the stream's gated candidates, else the straightforward kernel) → the
revisions (re-run verdicts, ResultDowngraded / ResultRetracted) and sign-offs.

Application result: the app stream (app/<name>: registration, milestones, state changes,
builds, per-dataset measurements, verdicts) and the result stream (app/<arch>/<name>:
revisions, sign-offs).

`chain_verifies` checks the listed events themselves with the ledger's verification code
(hash of the canonical body, link to the stored predecessor, columns against the body): a full
`verify` reads every event, far too slow for a page; the last full verification is shown
beside it.
"""
from __future__ import annotations

import difflib
import statistics
from typing import Any, Iterable

from django.db.models import Q
from django.db.models.functions import Substr

from appgate.models import AppRow
from appgate.verdicts import ceiling_problem
from forge.models import RoundRow
from forge.selectors import straightforward_kernel
from ledger.models import Event, VerificationRun
from ledger.records import RecordedEvent
from ledger.review import signoff_state
from ledger.services import iso_utc
from ledger.verification import check_positions
from measurement.models import OperatorResult
from measurement.services import source_hash

from . import app_sources
from .recorded import day, stamp_times
from .signoffs import records as signoff_records
from .tables import operator_result_key

REVISIONS = ("ResultRetracted", "ResultDowngraded")


class UnknownResult(LookupError):
    """No such result: the message says what was looked up."""


def _records(queryset) -> list[RecordedEvent]:
    return [RecordedEvent.from_body(body, prev, hash_)
            for body, prev, hash_ in queryset.order_by("position").values_list("body", "prev_hash", "hash")]


def _by_ids(event_ids: Iterable[str]) -> dict[str, RecordedEvent]:
    ids = [i for i in set(event_ids) if i]
    return {e.event_id: e for e in _records(Event.objects.filter(event_id__in=ids))} if ids else {}


def _stamp(event: RecordedEvent) -> dict[str, Any]:
    return {"position": event.position, "event_id": event.event_id, "hash": event.hash, "actor": event.actor,
            "recorded_at": event.recorded_at, **stamp_times(event)}


def _x(value: float | None) -> str:
    return f"{value:.3f}×" if value is not None else "no value"


# ---- history ------------------------------------------------------------------------------


def history(events: list[RecordedEvent], value_field: str, known: dict[str, int] | None = None) -> list[dict[str, Any]]:
    """Verdicts (admitting ones, re-runs, every app gate run), downgrades and retractions, oldest first, each with
    a sentence saying what happened ("downgraded from 2.310× to 1.940× on … by re-run #…"). `known`: positions
    of events named by id that are not in `events` (a re-run verdict outside a history window)."""
    positions = {**(known or {}), **{e.event_id: e.position for e in events}}
    entries = []
    for event in events:
        data = event.data
        rerun = positions.get(data.get("rerun") or "")
        entry = {"position": event.position, "type": event.type, "actor": event.actor, "recorded_at": event.recorded_at,
                 **stamp_times(event), "rerun": rerun, "verdict": None, "value": None, "from_value": None, "reason": "",
                 "left_out": []}  # a re-run verdict's baselines out of contention (measurement.contenders)
        by = f"re-run #{rerun}" if rerun else event.actor
        if event.type in ("GateVerdict", "AppGateVerdict"):
            if event.type == "GateVerdict" and data["verdict"] == "rejected" and not data.get("revises"):
                continue  # a forge candidate that never became the result (an app's verdicts all are its own)
            is_rerun = bool(data.get("revises"))
            entry.update(verdict=data["verdict"], value=data.get(value_field), reason=data.get("detail", ""),
                         rerun=event.position if is_rerun else None, left_out=list(data.get("left_out") or []))
            verdict = data["verdict"]
            if verdict == "inconclusive":  # its detail says why first (measurement.reruns)
                verdict = f"inconclusive ({data['detail'].split('; ', 1)[0]}), nothing revised"
            entry["text"] = (f"re-run #{event.position} on {day(event)}: {verdict}, measured {_x(entry['value'])}"
                             if is_rerun else f"{verdict} at {_x(entry['value'])} on {day(event)} (verdict #{event.position})")
        elif event.type == "ResultDowngraded":
            entry.update(value=data["to_value"], from_value=data["from_value"], reason=data["reason"])
            entry["text"] = (f"was {_x(data['from_value'])}, downgraded to {_x(data['to_value'])} on {day(event)} "
                             f"by {by}, because {data['reason']}")
        elif event.type == "ResultRetracted":
            entry["reason"] = data["reason"]
            entry["text"] = f"retracted on {day(event)} by {by}, because {data['reason']}"
        else:
            continue
        entries.append(entry)
    return entries


# ---- chain verification ------------------------------------------------------------------


def verify_events(positions: Iterable[int]) -> dict[str, Any]:
    """Check each event with the ledger's own row check against its stored predecessor."""
    positions = sorted(set(positions))
    problem = check_positions(positions)
    last = VerificationRun.objects.exclude(finished_at=None).order_by("-finished_at").first()
    return {
        "ok": problem is None, "checked": len(positions), "problem": problem,
        "last_full_verification": {"status": last.status, "head_position": last.head_position,
                                   "finished_at": iso_utc(last.finished_at), "summary": last.summary} if last else None,
    }


def _event_list(events: Iterable[RecordedEvent]) -> list[dict[str, Any]]:
    unique = {e.position: e for e in events}
    return [{"position": e.position, "type": e.type, "stream": e.stream, "actor": e.actor, "hash": e.hash,
             "prev_hash": e.prev_hash, "recorded_at": e.recorded_at, **stamp_times(e)} for _, e in sorted(unique.items())]


# ---- operator results --------------------------------------------------------------------


def _variants(measured: RecordedEvent, verdict: RecordedEvent, kind: str) -> list[dict[str, Any]]:
    data = measured.data
    items = []
    for variant in data["variants"]:
        timing = variant.get("timing") or {}
        passes = timing.get("samples") or []
        items.append({
            "variant": variant["name"], "role": variant["role"], "precision": variant["precision"], "kind": kind,
            "samples": [s for launches in passes for s in launches], "passes": passes,
            "median": timing.get("median"), "spread": timing.get("spread"), "fraction_of_copy": timing.get("fraction_of_copy"),
            "correct": variant["correctness"].get("correct"), "source_hash": variant.get("source_hash"),
            "backend_description": data["description"], "harness_version": data["harness_version"],
            "protocol": data["protocol"], "copy_bandwidth": data.get("copy_bandwidth"), "noisy": data.get("noisy", False),
            "attempts": len(data.get("attempts") or []),
            "event_position": measured.position, "verdict_position": verdict.position, **stamp_times(measured),
        })
    return items


ROUND_END_WINDOW = 500  # a forge round ends (RoundCommitted / RoundReverted) right after its verdict


def _round_row(verdict: RecordedEvent, case: str, backend: str) -> RoundRow | None:
    """The forge round whose candidate got this verdict. The round's end event names the verdict
    and follows it within a few positions: found on the (type, position) index by the database
    (its canonical body holds `"verdict_event":"<id>"`); else, for a verdict not followed by
    its round's end, among the case's rounds (RoundRow's case index)."""
    ends = Event.objects.filter(type__in=["RoundCommitted", "RoundReverted"], position__gt=verdict.position,
                                position__lte=verdict.position + ROUND_END_WINDOW,
                                body__contains=_json_pair("verdict_event", verdict.event_id))
    for body, prev, hash_ in ends.order_by("position").values_list("body", "prev_hash", "hash")[:1]:
        end = RecordedEvent.from_body(body, prev, hash_)
        if end.data.get("verdict_event") == verdict.event_id:
            row = RoundRow.objects.filter(round=end.data["round"]).first()
            if row is not None:
                return row
    return next(iter(RoundRow.objects.filter(case=case, backend=backend, verdict_event=verdict.event_id).order_by()[:1]), None)


def _round(verdict: RecordedEvent, case: str, backend: str) -> tuple[dict[str, Any] | None, list[RecordedEvent]]:
    row = _round_row(verdict, case, backend)
    if row is None:
        return None, []
    events = _records(Event.objects.filter(stream=f"round/{row.campaign}/{row.round}",
                                           type__in=["RoundStarted", "CandidateProposed", "RoundCommitted", "RoundReverted"]))
    started = next((e.data for e in events if e.type == "RoundStarted"), {})
    proposed = next((e.data for e in events if e.type == "CandidateProposed"), {})
    return {
        "round_id": row.round, "campaign": row.campaign, "number": row.number, "branch": started.get("branch", "main"),
        "proposer": started.get("proposer", ""), "hypothesis": proposed.get("hypothesis", ""),
        "subject": proposed.get("subject", ""), "lever_tags": proposed.get("lever_tags", []),
        "parent_hash": proposed.get("parent_hash") or started.get("parent_hash"),
        "positions": [e.position for e in events],
    }, events


def _diff(parent: str | None, source: str, parent_hash: str | None, own_hash: str) -> str:
    if parent is None:
        return ""
    return "".join(difflib.unified_diff(parent.splitlines(keepends=True), source.splitlines(keepends=True),
                                        fromfile=f"parent {(parent_hash or '')[:12]}", tofile=f"admitted {own_hash[:12]}"))


HISTORY_WINDOW = 50  # history entries a chain shows, newest; older ones are in the result stream


def _json_pair(key: str, value: str) -> str:
    """`"key":"value"` as it appears in a canonical (RFC 8785) body, where a string's own quotes
    are escaped: a body containing it has that key with that string value (at some depth)."""
    return f'"{key}":"{value}"'


def _history_window(key: str, value_field: str) -> tuple[list[dict[str, Any]], int | None]:
    """The newest HISTORY_WINDOW history entries of result stream `key` (oldest first) and the
    position below which older ones remain (None: none remain). A forge campaign's rejected
    candidates are most of a busy result stream and never in its history: the database drops
    them (canonical bodies: no `"verdict":"rejected"` with `"revises":null`) before a body is
    parsed, and reads the stream from its head down only as far as the window needs."""
    queryset = Event.objects.filter(stream=key, type__in=["GateVerdict", *REVISIONS]).exclude(
        Q(body__contains='"verdict":"rejected"') & Q(body__contains='"revises":null'))
    entries: list[dict[str, Any]] = []
    cursor, more = None, True
    while more and len(entries) <= HISTORY_WINDOW:
        page = queryset if cursor is None else queryset.filter(position__lt=cursor)
        chunk = [RecordedEvent.from_body(b, p, h) for b, p, h in
                 page.order_by("-position").values_list("body", "prev_hash", "hash")[:2 * HISTORY_WINDOW]]
        more = len(chunk) == 2 * HISTORY_WINDOW
        if chunk:
            cursor = chunk[-1].position
        chunk.reverse()
        named = {e.data.get("rerun") for e in chunk} - {e.event_id for e in chunk} - {None, ""}
        entries = history(chunk, value_field, known=_positions(named)) + entries
    if len(entries) > HISTORY_WINDOW:
        entries = entries[-HISTORY_WINDOW:]
        return entries, entries[0]["position"]
    return entries, (cursor if more else None)


def _positions(event_ids: Iterable[str]) -> dict[str, int]:
    ids = [i for i in set(event_ids) if i]
    return {str(k): v for k, v in Event.objects.filter(event_id__in=ids).values_list("event_id", "position")} if ids else {}


def _revisions_and_signoffs(key: str):
    """A result stream's revisions and sign-offs: reviewers' events, rare in the whole ledger,
    while a busy result stream holds thousands of forge verdicts and measurements. So they are
    read through the (type, position) index, the stream compared as an expression that no
    index answers (else SQLite walks the whole stream to check each event's type)."""
    return Event.objects.alias(stream_name=Substr("stream", 1)).filter(stream_name=key, type__in=[*REVISIONS, "AuditSignedOff"])


def operator_chain(backend: str, case: str) -> dict[str, Any]:
    """Every read is by event id, by position or by (stream, position) / (case) index: the
    cost does not grow with the ledger, nor with the result stream's rejected candidates."""
    key = operator_result_key(backend, case)
    row = OperatorResult.objects.filter(result=key).first()
    if row is None:
        raise UnknownResult(f"no kernel was ever admitted for {case} on the {backend} backend")
    verdict = _by_ids([row.verdict_event])[row.verdict_event]
    # re-runs of this verdict come after it and name it (`revises`): the database keeps only those
    reruns = [e for e in _records(Event.objects.filter(stream=key, type="GateVerdict", position__gt=verdict.position,
                                                       body__contains=_json_pair("revises", row.verdict_event)))
              if e.data.get("revises") == row.verdict_event]
    revisions = _records(_revisions_and_signoffs(key))
    measured = _by_ids([verdict.data["measurement"], *(e.data["measurement"] for e in reruns)])
    measurements = _variants(measured[verdict.data["measurement"]], verdict, "admission")
    for rerun in reruns:
        measurements += _variants(measured[rerun.data["measurement"]], rerun, "re-run")
    round_, round_events = _round(verdict, case, backend)
    hypothesis = measured[verdict.data["measurement"]].data.get("hypothesis", "")
    if round_ is None and hypothesis:
        round_ = {"round_id": None, "campaign": None, "number": None, "branch": None, "proposer": verdict.actor,
                  "hypothesis": hypothesis, "subject": "", "lever_tags": [], "parent_hash": None, "positions": []}
    parent_hash = round_["parent_hash"] if round_ else None
    parent_source = _source_by_hash(parent_hash, key, case, backend)
    shown = [verdict, *measured.values(), *reruns, *round_events, *revisions]
    events = _event_list(shown)
    history_entries, history_before = _history_window(key, "speedup")
    data = verdict.data
    return {
        "result": key, "case": case, "backend": backend, "status": row.status, "speedup": row.speedup,
        "verdict": {**_stamp(verdict), "verdict": data["verdict"], "state": data["state"], "reasons": data["reasons"],
                    "detail": data["detail"], "speedup": data["speedup"], "speedup_ci": data["speedup_ci"],
                    "bound": data["bound"], "baselines": data["baselines"], "same_precision": data["same_precision"],
                    "fraction_of_copy": data["fraction_of_copy"], "candidate_median": data["candidate_median"],
                    "launch": data["candidate_launch"], "measurement_position": measured[data["measurement"]].position},
        "measurements": measurements,
        "round": round_,
        "source": row.source, "source_hash": row.source_hash, "launch": row.launch,
        "parent_source": parent_source, "parent_hash": parent_hash,
        "diff": _diff(parent_source, row.source, parent_hash, row.source_hash),
        "history": history_entries,
        "history_before": history_before,  # older entries remain below this position (None: the history is whole)
        "events": events,
        **_verification(events),
        "signoff": signoff_state(key), "signoffs": signoff_records(key),
    }


def _source_by_hash(wanted: str | None, key: str, case: str, backend: str) -> str | None:
    """The source of a gated candidate by its hash: a round of the case that proposed it and
    reached a verdict (RoundRow by case), that verdict's candidate source; else the loop's
    first parent, the straightforward kernel, which is never gated; else the first verdict of
    the result stream that gated it (found by the database in the canonical bodies)."""
    if not wanted:
        return None
    ids = list(RoundRow.objects.filter(case=case, backend=backend, source_hash=wanted).exclude(verdict_event="")
               .order_by().values_list("verdict_event", flat=True)[:5])
    for event in _by_ids(ids).values():
        if event.data.get("candidate_source_hash") == wanted and "candidate_source" in event.data:
            return event.data["candidate_source"]
    straightforward = straightforward_kernel(case, backend).source
    if source_hash(straightforward) == wanted:
        return straightforward
    found = Event.objects.filter(stream=key, type="GateVerdict", body__contains=_json_pair("candidate_source_hash", wanted))
    for body, prev, hash_ in found.order_by("position").values_list("body", "prev_hash", "hash")[:1]:
        event = RecordedEvent.from_body(body, prev, hash_)
        if event.data["candidate_source_hash"] == wanted:
            return event.data["candidate_source"]
    return None


def _verification(events: list[dict[str, Any]]) -> dict[str, Any]:
    report = verify_events(e["position"] for e in events)
    return {"chain_verifies": report["ok"], "verification": report}


# ---- applications ------------------------------------------------------------------------


def application_chain(app: str) -> dict[str, Any]:
    row = AppRow.objects.filter(name=app).first()
    if row is None:
        raise UnknownResult(f"no application named {app!r} is registered")
    result = row.result or f"app/{row.architecture}/{app}"
    own = _records(Event.objects.filter(stream=f"app/{app}"))
    revisions = _records(Event.objects.filter(stream=result, type__in=[*REVISIONS, "AuditSignedOff"]))
    verdict = next((e for e in own if e.event_id == row.verdict_event), None)
    evidence = set(verdict.data["measurements"]) if verdict else set()
    datasets = [_dataset(e) for e in own if e.type == "AppDatasetMeasured" and e.event_id in evidence]
    builds = [{**_stamp(e), "variant": e.data["variant"], "ok": e.data["ok"], "command": e.data["command"],
               "seconds": e.data["seconds"], "binary_hash": e.data["binary_hash"], "output_tail": e.data["output_tail"],
               "source_hashes": e.data["source_hashes"]}
              for e in own if e.type == "AppVariantBuilt" and e.event_id in evidence]
    registered = [e for e in own if e.type == "AppRegistered"]
    proposed = next((e for e in own if e.type == "AppCandidateProposed"
                     and verdict is not None and str(e.event_id) == verdict.data.get("candidate")), None)
    shown = [*registered, *(e for e in own if e.type in ("AppMilestoneReached", "AppStateChanged", "AppGateVerdict",
                                                          app_sources.PROFILED)),
             *([proposed] if proposed else []),
             *(e for e in own if e.event_id in evidence), *revisions]
    events = _event_list(shown)
    data = verdict.data if verdict else {}
    origin = app_sources.provenance(registered[-1].data if registered else {})
    m1 = next((e for e in reversed(own) if e.type == "AppMilestoneReached" and e.data["milestone"] == "M1"), None)
    merged = sorted([*own, *revisions], key=lambda e: e.position)
    return {
        "result": result, "app": app, "domain": row.domain, "architecture": row.architecture,
        "state": row.state, "state_reason": row.state_reason, "status": row.status or "none",
        "manifest": {"path": row.manifest_path, "hash": row.manifest_hash,
                     "position": registered[-1].position if registered else None,
                     # the probe both variants build with (docs/appgate.md#probes): ours, not the candidate's
                     "probe": (((registered[-1].data.get("manifest") or {}).get("correctness") or {}).get("probe")
                               if registered else None)},
        "milestones": [{**_stamp(e), "milestone": e.data["milestone"], "detail": e.data["detail"], "evidence": e.data["evidence"]}
                       for e in own if e.type == "AppMilestoneReached"],
        "states": [{**_stamp(e), "state": e.data["state"], "code": e.data["code"] or "", "reason": e.data["reason"]}
                   for e in own if e.type == "AppStateChanged"],
        "state_code": row.state_code,
        "origin": origin,
        "hotspots": app_sources.hotspots(app_sources.shown_profile(
            m1, [e for e in own if e.type == app_sources.PROFILED], origin["files"])),
        "verdict": {**_stamp(verdict), "verdict": data["verdict"], "reasons": data["reasons"], "detail": data["detail"],
                    "headline": data["headline"], "headline_ci": data["headline_ci"], "machine": data["machine"],
                    "checks": data["checks"], "noisy": data["noisy"]} if verdict else None,
        "headline": row.headline, "headline_ci": row.headline_ci, "geomean": data.get("headline"),
        "real": row.real,
        "amdahl": {"hotspot_fraction": data.get("hotspot_fraction"), "hotspot_speedup": data.get("hotspot_speedup"),
                   "ceiling": data.get("amdahl_ceiling"), "limit": data.get("amdahl_limit"),
                   "problem": ceiling_problem(data.get("headline"), data.get("amdahl_ceiling"))},
        "datasets": datasets, "builds": builds,
        # the judged candidate: a patch (its diff against the upstream baseline) or, None, the switch's variant
        "candidate": {**_stamp(proposed), **{k: proposed.data[k] for k in ("proposer", "subject", "hypothesis", "patch")}}
        if proposed else None,
        "history": history(merged, "headline"),
        "events": events,
        **_verification(events),
        "signoff": signoff_state(result), "signoffs": signoff_records(result),
    }


def _dataset(event: RecordedEvent) -> dict[str, Any]:
    data = event.data
    return {**_stamp(event), "dataset": data["dataset"], "args": data["args"], "correct": data["correct"],
            "correctness_detail": data["correctness_detail"], "samples": data["samples"],
            "hotspot_samples": data["hotspot_samples"], "medians": data["medians"], "spread": data["spread"],
            "order": data["order"], "speedup": data["speedup"], "speedup_ci": data["speedup_ci"],
            "hotspot_fraction": data["hotspot_fraction"], "noisy": data["noisy"], "timing_source": data["timing_source"],
            "clock_step": data["clock_step"], "excused": data["excused"],
            "wall_medians": {v: statistics.median(w) for v, w in data["wall_samples"].items() if w}}
