"""A ranking of N runs as one standalone HTML page with one inline SVG chart.

The page: header, warnings, the ranking table (mean, rank, letters, superscripts per metric), one
chart — per metric, each run's mean with its bootstrap CI, runs in the table's order, the runs not
significantly different from the best one in green — the pairwise tests per metric and the runs'
versions. Inline CSS and SVG (a forest plot of :mod:`.chart_geometry`, drawn by the templates'
``charts.html.j2`` as the comparison's charts are), no JavaScript and no URL: the file can be
mailed or opened offline. The markup is ``templates/ranking.html.j2`` (the comparison page's frame and
macros, autoescaped: every user-provided string is HTML-escaped); this module shapes the values.
The same input renders the same bytes.
"""

from __future__ import annotations

import math

import numpy as np

from kebab_eval_pipeline.compare import chart_geometry
from kebab_eval_pipeline.compare.html import _is_null, _p_text, _signed, _template
from kebab_eval_pipeline.compare.ranking import Ranking, direction_word
from kebab_eval_pipeline.foundation.number_text import shown as _num

__all__ = ["CHART_ID", "render_html"]

CHART_ID = "chart-ranking"
_BEST = "#1a7f37"  # not significantly different from the best run
_REST = "#6e7781"


def render_html(ranking: Ranking) -> str:
    """The ranking as HTML (see the module docstring). Null means show as "null"; a metric no run
    scores on a common query has no dot."""
    return _template("ranking.html.j2").render(ranking_view(ranking))


def ranking_view(ranking: Ranking) -> dict:
    """What ``ranking.html.j2`` renders, as plain values (numbers formatted, the chart's geometry
    or None); strings unescaped — the template escapes them."""
    info = ranking.info
    order: list[str] = info["order"]
    matching = info.get("matching") or {}
    return {
        "title": f"kebab-eval ranking of {len(order)} runs: {', '.join(order)}",
        "order": order,
        "metrics": info["metrics"],
        "n_common": int(info["n_common"]),
        "alpha": f"{info['alpha']:g}",
        "family": info["family"],
        "seed": int(info["seed"]),
        "resamples": int(info["resamples"]),
        "warnings": list(info.get("warnings") or []),
        "heads": [{"metric": m, "direction": direction_word(m)} for m in info["metrics"]],
        "rows": _table(ranking),
        "chart_id": CHART_ID,
        "chart": _chart(ranking),
        "pairs_by_metric": _pairs(ranking),
        "n_pairs": int(info["n_pairs"]),
        "runs": _runs(ranking),
        "matching": {"mode": matching.get("mode"), "note": matching.get("note")} if matching else None,
    }


def _best_group(ranking: Ranking) -> set[tuple[str, str]]:
    """(metric, run) of the runs not significantly different from the metric's best run."""
    out = set()
    pairs = ranking.pairs
    for metric in ranking.info["metrics"]:
        rows = ranking.per_run[ranking.per_run["metric"] == metric]
        ranked = rows.dropna(subset=["rank"]).sort_values(["rank", "row"])
        if not len(ranked):
            continue
        best = str(ranked["run_id"].iloc[0])
        sig = pairs[(pairs["metric"] == metric) & pairs["significant"].fillna(False).astype(bool)]
        apart = set(sig.loc[sig["run_a"] == best, "run_b"]) | set(sig.loc[sig["run_b"] == best, "run_a"])
        out |= {(metric, str(r)) for r in ranked["run_id"] if str(r) not in apart}
    return out


def _table(ranking: Ranking) -> list[dict]:
    """One row per run in the table's order: its system label, chunker and a cell per metric
    (mean, rank, letters, the rows it beats, green when in the best group)."""
    info = ranking.info
    detail = info.get("runs_detail") or {}
    by = {(r["metric"], r["run_id"]): r for r in ranking.per_run.to_dict("records")}
    best = _best_group(ranking)
    rows = []
    for run in info["order"]:
        d = detail.get(run, {})
        system = d.get("system") or {}
        cells = []
        for m in info["metrics"]:
            r = by[(m, run)]
            cells.append(
                {
                    "css": "num best" if (m, run) in best else "num",
                    "mean": _num(r.get("mean")),
                    "rank": None if _is_null(r.get("rank")) else int(r["rank"]),
                    "letters": r["letters"] if r.get("letters") else "",
                    "beats": [str(x) for x in r.get("better_than_rows") or []],
                }
            )
        rows.append(
            {
                "run": run,
                "label": " ".join(str(x) for x in (system.get("kind"), system.get("mode")) if x),
                "chunker": d.get("chunker_version") or "",
                "cells": cells,
            }
        )
    return rows


def _chart(ranking: Ranking) -> dict | None:
    """Per metric a panel: each run's mean with its CI and letters, runs in the table's order,
    green when not significantly different from the best run — as :func:`.chart_geometry.forest`
    geometry (None: no metric has a query scored by every run)."""
    info = ranking.info
    metrics, order = info["metrics"], info["order"]
    frame = ranking.per_run
    if not frame["mean"].notna().any():
        return None
    best = _best_group(ranking)
    panels = []
    for metric in metrics:
        rows = frame[frame["metric"] == metric].set_index("run_id").loc[order]
        mean = rows["mean"].to_numpy(dtype=float)
        low = rows["ci_low"].to_numpy(dtype=float)
        high = rows["ci_high"].to_numpy(dtype=float)
        intervals = []
        for k, run in enumerate(order):
            letters = str(rows["letters"].iloc[k] or "")
            ci = "" if math.isnan(low[k]) else f" [{_num(low[k])}, {_num(high[k])}]"
            intervals.append(
                chart_geometry.Interval(
                    mean[k],
                    low[k],
                    high[k],
                    _BEST if (metric, run) in best else _REST,
                    note=letters,
                    title=f"{run}, {metric}: {_num(mean[k])}{ci} {letters}".rstrip(),
                )
            )
        panels.append(
            chart_geometry.Panel(
                intervals, _domain(mean, low, high), title=f"{metric} ({direction_word(metric)})"
            )
        )
    labels = [f"{i}  {run}" for i, run in enumerate(order, start=1)]
    return chart_geometry.forest(labels, panels)


def _domain(mean: np.ndarray, low: np.ndarray, high: np.ndarray) -> tuple[float, float]:
    """A panel's x range: the means and CI ends with 12% room either side (0 ± 0.05 without any;
    ± 0.05 around a single value)."""
    values = np.concatenate([mean, low, high])
    values = values[~np.isnan(values)]
    if not values.size:
        return -0.05, 0.05
    lo, hi = float(values.min()), float(values.max())
    pad = 0.12 * (hi - lo) if hi > lo else 0.05
    return lo - pad, hi + pad


def _pairs(ranking: Ranking) -> list[tuple[str, list[dict]]]:
    """(metric, its pairwise tests) per metric, in the ranking's metric order."""
    out = []
    for metric in ranking.info["metrics"]:
        pairs = ranking.pairs[ranking.pairs["metric"] == metric]
        rows = []
        for p in pairs.to_dict("records"):
            ci = "–" if _is_null(p.get("ci_low")) else f"[{_signed(p['ci_low'])}, {_signed(p['ci_high'])}]"
            better = p.get("better")
            rows.append(
                {
                    "run_a": p["run_a"],
                    "run_b": p["run_b"],
                    "mean_a": _num(p.get("mean_a")),
                    "mean_b": _num(p.get("mean_b")),
                    "delta": _signed(p.get("delta")),
                    "ci": ci,
                    "p": _p_text(p.get("p_value")),
                    "p_adjusted": _p_text(p.get("p_adjusted")),
                    "better": None if _is_null(better) else better,
                    "test": "" if _is_null(p.get("test")) else p["test"],
                }
            )
        out.append((metric, rows))
    return out


def _runs(ranking: Ranking) -> list[dict]:
    """Each run's system, chunker, golden set, query counts and creation time."""
    info = ranking.info
    detail = info.get("runs_detail") or {}
    rows = []
    for run in info["order"]:
        d = detail.get(run, {})
        g = d.get("golden") or {}
        s = d.get("system") or {}
        rows.append(
            {
                "run": run,
                "kind": s.get("kind") or "",
                "mode": s.get("mode") or "",
                "chunker": d.get("chunker_version") or "",
                "golden": g.get("name") or "",
                "sha256": str(g.get("sha256") or ""),
                "queries": int(info["n_queries"].get(run, 0)),
                "dropped": int(info["dropped"].get(run, 0)),
                "created": d.get("created_at") or "",
            }
        )
    return rows
