"""What an application's own events say beyond its projection row (appgate.projections keeps its
state, reason and verdict): where the program comes from, as its AppRegistered manifest declares
it, and the hotspot kernels its M1 milestone profiled. The application table reads both for every
row in one query (`for_rows`); an app's page reads them from the events its chain already holds.

Nothing here infers: a manifest that declares no upstream or an M1 without a profile gives empty
values, shown as such."""
from __future__ import annotations

from typing import Any, Iterable

from ledger.models import Event
from ledger.records import RecordedEvent

BUNDLED = "bundled"  # provenance.upstream of the apps shipped in fixtures/apps/


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


def hotspots(m1: dict[str, Any] | None) -> dict[str, Any]:
    """From an M1 AppMilestoneReached payload: the profiler's top kernels ({name, seconds, share,
    launches}, and speed_of_light with ncu), the tool, the top kernel with its share of all
    kernels' GPU time (the share M1 judged the scope by) and the kernels' time-weighted speed
    of light (the baseline's quality; None before profiles recorded it, or with nsys). Empty
    when M1 recorded no profile (a CPU program, a failed profile)."""
    profile = ((m1 or {}).get("evidence") or {}).get("profile") or {}
    top = profile.get("top") or []
    return {"kernels": top, "tool": profile.get("tool", ""), "problem": profile.get("problem", ""),
            "launches_measured": profile.get("launches_measured", ""),
            "kernel": top[0]["name"] if top else "", "share": top[0]["share"] if top else None,
            "speed_of_light": profile.get("speed_of_light")}


def last_m1(milestones: list[dict]) -> int | None:
    """The position of the app's last M1 milestone (a projection row's `milestones`)."""
    return next((m["position"] for m in reversed(milestones) if m["milestone"] == "M1"), None)


def for_rows(rows: Iterable[dict]) -> dict[str, dict[str, Any]]:
    """Per app name ({name, registered_position, milestones} projection rows): its provenance and
    hotspots, in one query whatever the number of rows."""
    rows = list(rows)
    wanted = {row["registered_position"]: row["name"] for row in rows}
    m1 = {position: row["name"] for row in rows if (position := last_m1(row["milestones"])) is not None}
    events = {position: RecordedEvent.from_body(body, prev, hash_).data for position, body, prev, hash_ in
              Event.objects.filter(position__in=[*wanted, *m1]).values_list("position", "body", "prev_hash", "hash")}
    found: dict[str, dict[str, Any]] = {row["name"]: {"provenance": provenance({}), "hotspots": hotspots(None)} for row in rows}
    for position, name in wanted.items():
        if position in events:
            found[name]["provenance"] = provenance(events[position])
    for position, name in m1.items():
        if position in events:
            found[name]["hotspots"] = hotspots(events[position])
    return found
