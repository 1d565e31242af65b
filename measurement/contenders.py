"""Which baselines a gate re-run times again.

A re-run asks whether a standing result still beats its bound, the fastest baseline. A library
baseline that lost to that bound by CONTENTION_FACTOR or more in the standing result's own
measurement cannot become the bound unless it changed, yet timing it again costs the most of a
re-run on the H200: cuDNN's algorithm search alone took 23 s of star_4/512³ f16's timing child,
and the checks of cupyx.ndimage and torch.conv 2-3 s of every case's baselines' child
(docs/gpu.md, session 26). So a re-run leaves such a baseline out where the harness child finds
the same identity installed (library, version, schedule); one that changed is checked and timed
as ever. The measurement records what it left out (its description's `left_out`), and a
revision keeps the left-out baseline's last measured entry, marked `carried`, so the evidence says
which baselines were timed and which were carried. A gate that admits a kernel, and the matrix
re-gate (measure_baselines), time every baseline.
"""
from __future__ import annotations

import json
from typing import Any

CONTENTION_FACTOR = 3.0
ALWAYS_TIMED = frozenset({"straightforward"})  # the floor every variant's errors are held to


def out_of_contention(baselines: dict[str, dict] | None, bound: dict[str, Any] | None) -> dict[str, dict]:
    """{name: identity} of the standing measurement's baselines whose median is at least
    CONTENTION_FACTOR times its bound's; a baseline without a recorded identity is always timed."""
    if not baselines or not bound or not bound.get("median"):
        return {}
    limit = CONTENTION_FACTOR * bound["median"]
    return {name: entry["identity"] for name, entry in baselines.items()
            if name not in ALWAYS_TIMED and entry.get("identity") and (entry.get("median") or 0) >= limit}


def same_identity(recorded: dict[str, Any], installed: dict[str, Any]) -> bool:
    """Compared as JSON, as the recorded one went through the ledger."""
    return json.loads(json.dumps(recorded, sort_keys=True)) == json.loads(json.dumps(installed, sort_keys=True))


def carried(standing: dict[str, dict] | None, left_out: list[str]) -> dict[str, dict]:
    """The standing entries of the baselines a re-run left out, marked `carried`: their values
    are an earlier measurement's of this result, not this re-run's."""
    return {name: {**standing[name], "carried": True} for name in left_out if standing and name in standing}
