"""The application table's figures (issue 18, the seed's plots), over the rows the table shows:
the speedup bins of the applications whose REAL headline stands, the speedup against the
baseline's quality where both are known, and the median and geometric mean of the integrated
applications with their count. Plain numbers in, figure dicts and figures out (frontend.plots,
frontend.tables.figures)."""
from __future__ import annotations

from typing import Any

from . import plots
from .tables import STANDING, figures as summary

QUALITY_AXIS = "baseline: speed of light (fraction of peak)"


def standing_real(rows: list[dict]) -> list[dict]:
    """The rows whose headline is a standing (admitted or downgraded) REAL result: the only
    application numbers a table may report."""
    return [row for row in rows if row["status"] in STANDING and row["real"] and row["headline"] is not None]


def figures(rows: list[dict]) -> dict[str, Any]:
    """`distribution`: the bins over standing REAL headlines (`binned`: their count); `quality`:
    the scatter of those that also have a measured baseline quality, None when none has (the page
    says so rather than drawing empty axes); `standing` and `integrated`: n, median, geomean and
    its bootstrap CI, over the standing REAL headlines and over those of INTEGRATED applications."""
    real = standing_real(rows)
    both = [{"label": row["app"], "speedup": row["headline"], "quality": row["baseline_quality"]}
            for row in real if row["baseline_quality"] is not None]
    return {
        "distribution": plots.speedup_distribution([row["headline"] for row in real],
                                                   f"Application speedup distribution ({len(real)} standing REAL headlines)"),
        "binned": len(real),
        "quality": plots.speedup_vs_baseline_quality(both, name="applications", quality=QUALITY_AXIS,
                                                     speedup="all-dataset geometric mean speedup (×)") if both else None,
        "standing": summary([row["headline"] for row in real]),
        "integrated": summary([row["headline"] for row in real if row["state"] == "INTEGRATED"]),
    }
