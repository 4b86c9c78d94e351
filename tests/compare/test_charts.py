"""The report charts say what the comparison's tables say: read back from the SVG alone — mark
positions against the axis ticks' labels, as a reader does — every point, whisker end, bar and
cell gives the number of the per-metric, verdict and per-slice tables of a real comparison."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from kebab_eval_pipeline.compare import chart_geometry
from kebab_eval_pipeline.compare.document import render_report_html
from kebab_eval_pipeline.compare.runs import compare_runs
from kebab_eval_pipeline.compare.systems import verdict_label
from kebab_eval_pipeline.compare.verdicts import VERDICTS
from tests.compare.conftest import hit, replay_bundle, write_golden

N = 80
CATEGORIES = ("발효", "dairy", '<b>&"x"</b>')


def _trace(seed: int) -> list[dict]:
    """Per query, its gold document at a random rank 1–10 or missing (one in five)."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(N):
        hits = [hit(r, f"filler{i}-{r}.md", (1, 5)) for r in range(1, 11)]
        if rng.random() > 0.2:
            rank = int(rng.integers(1, 11))
            hits[rank - 1] = hit(rank, f"doc{i}.md", (1, 5))
        rows.append({"query_id": f"q{i:02d}", "hits": hits})
    return rows


@pytest.fixture(scope="module")
def comparison(tmp_path_factory):
    queries = [
        {
            "id": f"q{i:02d}",
            "query": f"question {i}?",
            "category": CATEGORIES[i % 3],
            "supports": [{"rel_path": f"doc{i}.md"}],
        }
        for i in range(N)
    ]
    golden = write_golden(tmp_path_factory.mktemp("g") / "golden.yaml", queries)
    a = replay_bundle(tmp_path_factory.mktemp("a"), "a", golden, _trace(1))
    b = replay_bundle(tmp_path_factory.mktemp("b"), "b", golden, _trace(2))
    report = compare_runs(a, b)
    return report, render_report_html(report)


def _figure(page: str, chart_id: str) -> str:
    return re.search(rf'<figure class="chart" id="{chart_id}">(.*?)</figure>', page, re.S).group(1)


def _number(text: str) -> float:
    return float(text.replace("−", "-"))


def _axis(ticks: list[tuple[float, str]]) -> tuple[callable, float]:
    """The data value at a pixel, from the first and last tick (position, label); and the value of
    one pixel (the reading's resolution)."""
    (p0, t0), (p1, t1) = ticks[0], ticks[-1]
    v0, v1 = _number(t0), _number(t1)
    per_px = (v1 - v0) / (p1 - p0)
    return (lambda p: v0 + (p - p0) * per_px), abs(per_px)


def test_forest_points_and_whiskers_are_the_paired_deltas_and_cis(comparison):
    report, page = comparison
    svg = _figure(page, "chart-deltas")
    ticks = re.findall(r'<text x="([\d.]+)" y="[\d.]+" text-anchor="middle">([−\d.]+)</text>', svg)
    value_at, px = _axis([(float(x), t) for x, t in ticks])
    labels = {
        float(y): text.split("  ")[0]
        for y, text in re.findall(
            r'<text class="label" x="[\d.]+" y="([\d.]+)" text-anchor="end">([^<]+)</text>', svg
        )
    }
    points = re.findall(
        r'<line class="whisker" x1="([\d.]+)" y1="([\d.]+)" x2="([\d.]+)" y2="[\d.]+"/>'
        r'.*?<circle cx="([\d.]+)"',
        svg,
    )
    table = report.per_metric.set_index("metric")
    tested = table[table["paired_delta"].notna()]
    assert len(points) == len(labels) == min(len(tested), 20) > 5
    zero = float(re.search(r'<line class="zero" x1="([\d.]+)"', svg).group(1))
    assert value_at(zero) == pytest.approx(0.0, abs=px)
    # Rounding: coordinates to 0.01 px, the reading to the pixel's value at that precision.
    tolerance = 0.02 * px + 1e-12
    widest = 0.0
    for x_low, y, x_high, cx in points:
        row = tested.loc[labels[float(y)]]
        delta, low, high = float(row["paired_delta"]), float(row["ci_low"]), float(row["ci_high"])
        assert value_at(float(cx)) == pytest.approx(delta, abs=tolerance)
        assert value_at(float(x_low)) == pytest.approx(min(low, delta), abs=tolerance)
        assert value_at(float(x_high)) == pytest.approx(max(high, delta), abs=tolerance)
        widest = max(widest, abs(low), abs(high), abs(delta))
    # The axis is symmetric and holds every interval: ±1.15 × the widest end.
    assert value_at(float(re.search(r'<line class="axis" x1="([\d.]+)"', svg).group(1))) == pytest.approx(
        -1.15 * widest, abs=tolerance
    )


def test_verdict_bars_are_the_verdict_counts(comparison):
    report, page = comparison
    svg = _figure(page, "chart-verdicts")
    ticks = re.findall(r'<text x="[\d.]+" y="([\d.]+)" text-anchor="end">(\d+)</text>', svg)
    value_at, px = _axis([(float(y), t) for y, t in ticks])
    bars = re.findall(
        r'<rect x="[\d.]+" y="([\d.]+)" width="[\d.]+" height="([\d.]+)" fill="#[0-9a-f]{6}"/>'
        r'<text class="value" [^>]*>(\d+)</text><text class="label" [^>]*>([^<]+)</text>',
        svg,
    )
    counts = {v: int(n) for v, n in report.info["verdict_counts"].items()}
    verdict_of = {verdict_label(v, report.info): v for v in VERDICTS}  # neutral words for two systems
    shown = {verdict_of[label]: (float(y), float(h), int(n)) for y, h, n, label in bars}
    assert set(shown) >= {"win", "loss", "regression", "draw"}
    for verdict, (top, height, written) in shown.items():
        assert written == counts.get(verdict, 0), verdict
        assert value_at(top + height) == pytest.approx(0.0, abs=0.02 * px)  # bars stand on zero
        assert value_at(top) == pytest.approx(counts.get(verdict, 0), abs=0.02 * px)
    assert sum(n for _, _, n in shown.values()) == N


def test_category_cells_are_the_per_slice_deltas(comparison):
    report, page = comparison
    svg = _figure(page, "chart-categories")
    cells = re.findall(r"<title>([^<]+), ([^<,]+): ([^<]+)</title><rect [^>]*fill=\"(#[0-9a-f]{6})\"", svg)
    columns = re.findall(
        r'<text class="label" x="[\d.]+" y="[\d.]+" text-anchor="middle">([^<]+)</text>', svg
    )
    assert columns and len(cells) == len(columns) * len(CATEGORIES)
    slices = report.per_slice[report.per_slice["dimension"] == "category"].set_index(["value", "metric"])
    span = max(abs(float(slices.loc[(c, m), "delta"])) for c in CATEGORIES for m in columns)
    escaped = {"&lt;b&gt;&amp;&quot;x&quot;&lt;/b&gt;": '<b>&"x"</b>'}
    for row, metric, text, fill in cells:
        category = escaped.get(row.split("  (n=")[0], row.split("  (n=")[0])
        delta = float(slices.loc[(category, metric), "delta"])
        assert _number(text) == pytest.approx(delta, abs=5e-4), (category, metric)
        # The colour encodes the same number: red below zero, green above, on ±span.
        assert fill == chart_geometry.diverging_colour(delta, span)
        if not math.isclose(delta, 0, abs_tol=1e-9):
            r, g = int(fill[1:3], 16), int(fill[3:5], 16)
            assert (g > r) == (delta > 0), (category, metric, fill)


def test_nice_ticks_cover_and_label_the_domain():
    ticks, decimals = chart_geometry.nice_ticks(-0.0575, 0.0575)
    assert ticks == [-0.05, -0.025, 0.0, 0.025, 0.05] and decimals == 3
    assert [chart_geometry.number(t, decimals) for t in ticks] == [
        "−0.050",
        "−0.025",
        "0.000",
        "0.025",
        "0.050",
    ]
    assert chart_geometry.nice_ticks(0, 11.8, integer=True) == ([0.0, 5.0, 10.0], 0)
    assert chart_geometry.number(-0.0001, 3, signed=True) == "0.000"  # never "−0.000"
