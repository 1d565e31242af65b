"""The operator gate's two thresholds and the physics-floor rule: plain numbers and a comparison,
imported by the harness's judge (summarise_timing marks impossible timings) and by
measurement.decisions (every other rule). Kept apart so that both, and the mutation tests of the
decision modules (docs/testing.md), see one definition."""
from __future__ import annotations

# A pass spread above this marks a timing noisy; a median more than this slower than the prior
# best is a regression; a re-run's CI this far below the standing speedup downgrades it.
REGRESSION_BAND = 0.02
# A median, less the harness's own launch overhead (an empty kernel's time), below this
# fraction of (compulsory bytes / measured copy ceiling) is impossible for a single-pass
# kernel: the slack covers the copy measurement's own noise.
IMPOSSIBLE_MARGIN = 0.9


def impossible_speed(median: float, launch_overhead: float, floor_seconds: float) -> bool:
    """A median, less the launch overhead, below IMPOSSIBLE_MARGIN of the time the compulsory
    bytes take at the measured copy bandwidth (`floor_seconds`)."""
    return median - launch_overhead < IMPOSSIBLE_MARGIN * floor_seconds
