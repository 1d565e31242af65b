"""Plotly figures of the audit UI, as plain figure dicts ({"data": [...], "layout": {...}}).

Plain dicts rather than plotly.graph_objects: building a validated Figure costs tens of
milliseconds per plot, and pages must stay fast; the tests validate every dict with
plotly.graph_objects.Figure instead. The page renders each dict with the bundled plotly.min.js
(served by the app, no CDN) through the `plot` template tag. The functions take plain numbers,
never models, so the same figure can be built from a selector, a fixture or an export.
"""
from __future__ import annotations

import math
from typing import Any, Iterable, Sequence

Figure = dict[str, Any]

# Design §9: application speedup bins; a bin holds lower <= x < upper.
SPEEDUP_BINS: tuple[tuple[float, float, str], ...] = (
    (-math.inf, 1.05, "< 1.05"),
    (1.05, 1.5, "1.05–1.5"),
    (1.5, 3.0, "1.5–3"),
    (3.0, 10.0, "3–10"),
    (10.0, math.inf, "≥ 10"),
)


def _layout(title: str, **extra: Any) -> dict[str, Any]:
    return {"title": {"text": title}, "margin": {"l": 60, "r": 20, "t": 40, "b": 60}, "height": 360, **extra}


def speedup_bins(speedups: Iterable[float | None]) -> list[tuple[str, int]]:
    """How many speedups fall in each §9 bin (None: no headline, not counted)."""
    counts = [0] * len(SPEEDUP_BINS)
    for value in speedups:
        if value is None:
            continue
        for index, (low, high, _label) in enumerate(SPEEDUP_BINS):
            if low <= value < high:
                counts[index] += 1
                break
    return [(label, count) for (_low, _high, label), count in zip(SPEEDUP_BINS, counts)]


def speedup_distribution(speedups: Iterable[float | None], title: str = "Application speedup distribution") -> Figure:
    bins = speedup_bins(speedups)
    return {
        "data": [{"type": "bar", "x": [label for label, _ in bins], "y": [count for _, count in bins],
                  "text": [str(count) for _, count in bins], "textposition": "auto", "name": "applications"}],
        "layout": _layout(title, xaxis={"title": {"text": "speedup (all-dataset geometric mean)"}, "type": "category"},
                          yaxis={"title": {"text": "applications"}}),
    }


def speedup_vs_baseline_quality(points: Sequence[dict[str, Any]], *, name: str = "cases",
                                 quality: str = "public bound: fraction of measured copy bandwidth",
                                 speedup: str = "speedup over the bound (×)") -> Figure:
    """points: {"label", "speedup", "quality"}, quality a fraction of a roof (an operator case: the
    bound's fraction of measured copy bandwidth; an application: its baseline's fraction of its
    roofline): a big speedup over a poor baseline is worth less than a small one over a good one.
    `quality` and `speedup` title the axes."""
    shown = [p for p in points if p.get("speedup") is not None and p.get("quality") is not None]
    return {
        "data": [{"type": "scatter", "mode": "markers", "x": [p["quality"] for p in shown],
                  "y": [p["speedup"] for p in shown], "text": [p["label"] for p in shown], "name": name,
                  "hovertemplate": "%{text}<br>baseline quality %{x:.1%}<br>%{y:.2f}×<extra></extra>"}],
        "layout": _layout("Speedup vs baseline quality", xaxis={"title": {"text": quality}, "tickformat": ".0%"},
                          yaxis={"title": {"text": speedup}}),
    }


def baseline_bars(cases: Sequence[dict[str, Any]]) -> Figure:
    """cases: {"label", "against": {baseline name: speedup of the admitted kernel over it}}; one
    bar group per case, one bar per baseline."""
    names = sorted({name for case in cases for name in case["against"]})
    data = [{"type": "bar", "name": name, "x": [c["label"] for c in cases],
             "y": [c["against"].get(name) for c in cases]} for name in names]
    return {"data": data, "layout": _layout("Admitted kernel against each baseline", barmode="group",
                                            yaxis={"title": {"text": "speedup (×)"}, "type": "log"},
                                            xaxis={"automargin": True})}


def roofline_positions(cases: Sequence[dict[str, Any]]) -> Figure:
    """cases: {"label", "kernel", "bound"}: fractions of the measured copy bandwidth (design §9:
    the roofline position of a bandwidth-bound stencil); 1.0 is the copy roof."""
    labels = [c["label"] for c in cases]
    return {
        "data": [
            {"type": "bar", "name": "admitted kernel", "x": labels, "y": [c["kernel"] for c in cases]},
            {"type": "bar", "name": "public bound", "x": labels, "y": [c["bound"] for c in cases]},
        ],
        "layout": _layout("Roofline position: fraction of measured copy bandwidth", barmode="group",
                          yaxis={"title": {"text": "of copy bandwidth"}, "tickformat": ".0%"}, xaxis={"automargin": True},
                          shapes=[{"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": 1, "y1": 1,
                                   "line": {"dash": "dash", "color": "#b3261e"}}]),
    }


def round_trajectories(campaigns: Sequence[dict[str, Any]]) -> Figure:
    """campaigns: {"label", "rounds": [{"number", "speedup" (None: nothing measured), "status"}]}.
    Each campaign gives the measured speedup per round (markers) and the admitted best so far (line)."""
    data = []
    for campaign in campaigns:
        rounds = sorted(campaign["rounds"], key=lambda r: r["number"])
        best, best_so_far = None, []
        for r in rounds:
            if r["status"] == "committed" and r["speedup"] is not None:
                best = r["speedup"] if best is None else max(best, r["speedup"])
            best_so_far.append(best)
        data.append({"type": "scatter", "mode": "markers", "name": f"{campaign['label']}: measured",
                     "x": [r["number"] for r in rounds], "y": [r["speedup"] for r in rounds],
                     "text": [r["status"] for r in rounds]})
        data.append({"type": "scatter", "mode": "lines", "line": {"shape": "hv"}, "name": f"{campaign['label']}: admitted best",
                     "x": [r["number"] for r in rounds], "y": best_so_far})
    return {"data": data, "layout": _layout("Round trajectory", xaxis={"title": {"text": "round"}, "dtick": 1},
                                            yaxis={"title": {"text": "speedup over the public bound (×)"}})}


def sample_distributions(variants: Sequence[dict[str, Any]], title: str = "Raw timing samples") -> Figure:
    """variants: {"name", "samples": [seconds, ...]}; a box per variant with every sample drawn."""
    return {
        "data": [{"type": "box", "name": v["name"], "y": list(v["samples"]), "boxpoints": "all", "jitter": 0.4,
                  "pointpos": 0} for v in variants],
        "layout": _layout(title, yaxis={"title": {"text": "seconds"}, "type": "log"}, showlegend=False),
    }
