"""`manage.py appgate triage`: the App Agent's M1 (appgate.agent.triage) on many manifests, one after
the other, and a report of each application's state and reason code with the counts per state and
per reason (docs/appgate.md#triage). A manifest that does not load is reported, not triaged.
"""
from __future__ import annotations

import collections
from pathlib import Path
from typing import Callable

from .agent import triage
from .manifest import ManifestError


def manifest_paths(given: list[str]) -> list[Path]:
    """The manifests named, a folder standing for the *.yaml files in it."""
    paths: list[Path] = []
    for item in map(Path, given):
        paths += sorted(item.glob("*.yaml")) if item.is_dir() else [item]
    return paths


def triage_all(paths: list[Path], actor: str, progress: Callable[[str], None] | None = None) -> dict:
    say = progress or (lambda message: None)
    results = []
    for path in paths:
        try:
            row = triage(path, actor, say)
        except ManifestError as error:
            results.append({"manifest": str(path), "app": None, "state": None, "code": "invalid_manifest",
                            "reason": "; ".join(error.problems)})
        else:
            results.append({"manifest": str(path), "app": row.name, "state": row.state, "code": row.state_code,
                            "reason": row.state_reason})
        say(f"{results[-1]['app'] or path}: {results[-1]['state']} ({results[-1]['code']})")
    return {
        "triaged": len(results),
        "by_state": dict(collections.Counter(str(r["state"]) for r in results).most_common()),
        "by_reason": dict(collections.Counter(f"{r['state']}/{r['code']}" for r in results).most_common()),
        "apps": results,
    }
