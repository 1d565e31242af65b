"""The figure builders of frontend.plots: the §9 bins and valid plotly figures (checked by
plotly.graph_objects, which refuses any property plotly.js does not know)."""
import plotly.graph_objects as go
import pytest

from frontend import plots


@pytest.mark.parametrize("value, label", [
    (0.5, "< 1.05"), (1.0499, "< 1.05"), (1.05, "1.05–1.5"), (1.4999, "1.05–1.5"), (1.5, "1.5–3"),
    (2.999, "1.5–3"), (3.0, "3–10"), (9.99, "3–10"), (10.0, "≥ 10"), (250.0, "≥ 10"),
])
def test_each_speedup_falls_in_its_bin(value, label):
    assert dict(plots.speedup_bins([value]))[label] == 1
    assert sum(count for _, count in plots.speedup_bins([value])) == 1


def test_the_distribution_counts_every_headline_and_skips_missing_ones():
    figure = plots.speedup_distribution([0.9, 1.2, 1.3, 2.0, 4.0, 12.0, None])
    go.Figure(figure)
    assert figure["data"][0]["x"] == ["< 1.05", "1.05–1.5", "1.5–3", "3–10", "≥ 10"]
    assert figure["data"][0]["y"] == [1, 2, 1, 1, 1]


def test_every_builder_returns_a_valid_figure():
    cases = [{"label": "star_1/64x64x64/f32 [cpu]", "speedup": 2.0, "quality": 0.4, "kernel": 0.8, "bound": 0.4,
              "against": {"straightforward": 3.0, "pystencils": 2.0}},
             {"label": "box_1/64x64x64/f32 [cpu]", "speedup": None, "quality": None, "kernel": 0.5, "bound": None,
              "against": {"straightforward": 1.5}}]
    quality = plots.speedup_vs_baseline_quality(cases)
    assert quality["data"][0]["x"] == [0.4]  # a case without a bound is not placed
    bars = plots.baseline_bars(cases)
    assert [t["name"] for t in bars["data"]] == ["pystencils", "straightforward"] and bars["data"][0]["y"] == [2.0, None]
    trajectory = plots.round_trajectories([{"label": "c1", "rounds": [
        {"number": 2, "speedup": 1.5, "status": "reverted"}, {"number": 1, "speedup": 1.2, "status": "committed"},
        {"number": 3, "speedup": 1.4, "status": "committed"}, {"number": 4, "speedup": None, "status": "reverted"}]}])
    assert trajectory["data"][1]["y"] == [1.2, 1.2, 1.4, 1.4]  # the admitted best so far never counts a reverted round
    samples = plots.sample_distributions([{"name": "candidate", "samples": [1e-3, 2e-3]}])
    for figure in (quality, bars, trajectory, samples, plots.roofline_positions(cases), plots.speedup_distribution([])):
        go.Figure(figure)


def test_the_plot_tag_escapes_the_figure_and_drops_non_finite_numbers():
    import json
    import re

    from frontend.templatetags.audit import plot

    html = plot({"data": [{"type": "bar", "x": ["</script><b>"], "y": [float("nan")]}], "layout": {}})
    text = re.search(r'<script type="application/json" id="(plot-\d+)">(.*)</script>', html, re.S)
    assert f'data-figure="{text.group(1)}"' in html and "</script><b>" not in text.group(2)
    assert json.loads(text.group(2))["data"][0] == {"type": "bar", "x": ["</script><b>"], "y": [None]}
