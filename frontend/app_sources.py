"""What an application's own events say beyond its projection row (appgate.projections keeps its
state, reason and verdict): where the program comes from, as its AppRegistered manifest declares
it, and the hotspot kernels its M1 milestone profiled, or `appgate profile` (AppBaselineProfiled) did
since on the same baseline files. The application table reads both for every row in one query
(`for_rows`); an app's page reads them from the events its chain already holds.

Nothing here infers: a manifest that declares no upstream or an M1 without a profile gives empty
values, shown as such."""
from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable

from django.db.models import Q

from ledger.models import Event
from ledger.records import RecordedEvent

BUNDLED = "bundled"  # provenance.upstream of the apps shipped in fixtures/apps/
PROFILED = "AppBaselineProfiled"  # `appgate profile`: a profile that changes no state (appgate/baseline_profile.py)


def provenance(registered: dict[str, Any]) -> dict[str, Any]:
    """From an AppRegistered payload: the suite (the named checkout root its source lives in, the
    `bundled` apps', else empty), the upstream as declared (a suite's program: the URL of its
    folder at the commit), the repository that URL is in, the declared version or commit, the
    source path (relative to the root for a suite's program) and the sha256 of every baseline file."""
    manifest = registered.get("manifest") or {}
    declared = manifest.get("provenance") or {}
    source = manifest.get("source") or {}
    upstream = declared.get("upstream", "")
    return {
        "suite": source.get("root") or (BUNDLED if upstream == BUNDLED else ""),
        "upstream": upstream,
        "upstream_repo": upstream_repository(upstream),
        "upstream_version": declared.get("version", ""),
        "source_root": source.get("root") or "",
        "source_path": source.get("path", ""),
        "licence": declared.get("licence", ""),
        "authors": declared.get("authors", ""),
        "files": dict(sorted((source.get("baseline_files") or {}).items())),
    }


def upstream_repository(upstream: str) -> str:
    """https://github.com/OWNER/REPO of a GitHub tree or blob URL (how the suite importer names a
    program's folder at a commit); any other https URL as declared; nothing for a bundled app."""
    if not upstream.startswith("https://"):
        return ""
    if upstream.startswith("https://github.com/"):
        return "/".join(upstream.split("/")[:5])
    return upstream


def hotspots(event: RecordedEvent | None) -> dict[str, Any]:
    """From the event whose profile is shown (`shown_profile`: an M1 AppMilestoneReached, or an
    AppBaselineProfiled of `appgate profile`): the profiler's top kernels ({name, seconds, share,
    launches}, and speed_of_light with ncu), the tool, the top kernel with its share of all
    kernels' GPU time (M1's: the share it judged the scope by) and the kernels' time-weighted speed
    of light (the baseline's quality; None with nsys, or before profiles recorded it), and the
    event, so that a reviewer can follow the number to what measured it. Empty when no profile
    was recorded (a CPU program, a failed profile)."""
    profile = _profile(event)
    top = profile.get("top") or []
    return {"kernels": top, "tool": profile.get("tool", ""), "problem": profile.get("problem", ""),
            "launches_measured": profile.get("launches_measured", ""),
            "kernel": top[0]["name"] if top else "", "share": top[0]["share"] if top else None,
            "speed_of_light": profile.get("speed_of_light"),
            "event": None if event is None else {"position": event.position, "event_id": event.event_id,
                                                 "by": "appgate profile" if event.type == PROFILED else "M1"}}


def _profile(event: RecordedEvent | None) -> dict[str, Any]:
    if event is None:
        return {}
    data = event.data
    return (data["profile"] if event.type == PROFILED else (data.get("evidence") or {}).get("profile")) or {}


def shown_profile(m1: RecordedEvent | None, profiled: Iterable[RecordedEvent],
                  files: dict[str, str]) -> RecordedEvent | None:
    """Whose profile the table and the app page show: the latest of the app's last M1 and its
    AppBaselineProfiled events of the registered baseline `files` that measured the speed of light,
    else the last M1. A profile of other baseline files is of another program; and a later profile
    without the speed of light (nsys, a failed run) does not hide the M1 the scope was judged by."""
    measured = [event for event in (m1, *(p for p in profiled if p.data["baseline_files"] == files))
                if event is not None and _profile(event).get("speed_of_light") is not None]
    return max(measured, key=lambda event: event.position, default=m1)


def last_m1(milestones: list[dict]) -> int | None:
    """The position of the app's last M1 milestone (a projection row's `milestones`)."""
    return next((m["position"] for m in reversed(milestones) if m["milestone"] == "M1"), None)


def for_rows(rows: Iterable[dict]) -> dict[str, dict[str, Any]]:
    """Per app name ({name, registered_position, milestones} projection rows): its provenance and
    hotspots, in one query whatever the number of rows (the registrations and last M1s by
    position, every AppBaselineProfiled of their streams)."""
    rows = list(rows)
    wanted = [position for row in rows for position in (row["registered_position"], last_m1(row["milestones"]))
              if position is not None]
    streams = [f"app/{row['name']}" for row in rows]
    found = Event.objects.filter(Q(position__in=wanted) | Q(type=PROFILED, stream__in=streams))
    events = {position: RecordedEvent.from_body(body, prev, hash_) for position, body, prev, hash_ in
              found.values_list("position", "body", "prev_hash", "hash")}
    profiled: dict[str, list[RecordedEvent]] = defaultdict(list)
    for event in events.values():
        if event.type == PROFILED:
            profiled[event.data["app"]].append(event)
    sources: dict[str, dict[str, Any]] = {}
    for row in rows:
        registered = events.get(row["registered_position"])
        origin = provenance(registered.data if registered else {})
        m1 = events.get(last_m1(row["milestones"]))
        sources[row["name"]] = {"provenance": origin,
                                "hotspots": hotspots(shown_profile(m1, profiled[row["name"]], origin["files"]))}
    return sources
