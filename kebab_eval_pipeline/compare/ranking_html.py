"""A ranking of N runs as one standalone HTML page with one inline SVG chart.

The page: header, warnings, the ranking table (mean, rank, letters, superscripts per metric), one
chart — per metric, each run's mean with its bootstrap CI, runs in the table's order, the runs not
significantly different from the best one in green — the pairwise tests per metric and the runs'
versions. Inline CSS and SVG drawn by matplotlib without pyplot (as :mod:`.html` draws the
comparison's charts, with its style and helpers), no JavaScript and no URL: the file can be mailed
or opened offline. Every user-provided string is HTML-escaped. The same input renders the same bytes.
"""

from __future__ import annotations

import numpy as np

from kebab_eval_pipeline.compare.html import _draw, _e, _is_null, _nodata, _p, _section, _signed, html_page
from kebab_eval_pipeline.compare.ranking import Ranking, direction_word

__all__ = ["CHART_ID", "render_html"]

CHART_ID = "chart-ranking"
_BEST = "#1a7f37"  # not significantly different from the best run
_REST = "#6e7781"
_EXTRA_CSS = """
sup.beats { color: var(--better); font-weight: 600; margin-left: 2px; }
.letters { font-weight: 600; margin-left: 4px; }
.rank { color: var(--muted); margin-left: 4px; }
td.best { background: #dafbe1; }
"""


def render_html(ranking: Ranking) -> str:
    """The ranking as HTML (see the module docstring). Null means show as "null"; a metric no run
    scores on a common query has no dot."""
    info = ranking.info
    order: list[str] = info["order"]
    body = [
        _header(ranking),
        _warnings(info.get("warnings") or []),
        _section("ranking", "Ranking", _table(ranking)),
        _section("chart", "Means with 95% bootstrap CIs", _chart(ranking)),
        _section("pairs", "Pairwise tests (delta = b − a)", _pairs(ranking)),
        _section("runs", "Runs", _runs(ranking)),
    ]
    title = f"kebab-eval ranking of {len(order)} runs: {', '.join(order)}"
    return html_page(title, body, _EXTRA_CSS)


def _header(ranking: Ranking) -> str:
    info = ranking.info
    runs = " ".join(f"<code>{_e(r)}</code>" for r in info["order"])
    return (
        f"<header>\n<h1>Ranking of {len(info['order'])} runs</h1>\n"
        f'<p class="subtitle">{runs}</p>\n'
        f'<p class="note">Ranked on {", ".join(f"<code>{_e(m)}</code>" for m in info["metrics"])} over '
        f"the {int(info['n_common'])} queries common to all runs. Paired tests at α = {info['alpha']:g}, "
        f"p-values adjusted by {_e(info['family'])}; seed {int(info['seed'])}, "
        f"{int(info['resamples'])} resamples.</p>\n</header>"
    )


def _warnings(warnings: list[str]) -> str:
    if not warnings:
        return ""
    items = "\n".join(f"<li>{_e(w)}</li>" for w in warnings)
    return f'<aside class="warnings" role="note">\n<strong>Warnings</strong>\n<ul>\n{items}\n</ul>\n</aside>'


def _num(x) -> str:
    return "null" if _is_null(x) else f"{float(x):.4f}"


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


def _table(ranking: Ranking) -> str:
    info = ranking.info
    metrics, order = info["metrics"], info["order"]
    detail = info.get("runs_detail") or {}
    by = {(r["metric"], r["run_id"]): r for r in ranking.per_run.to_dict("records")}
    best = _best_group(ranking)
    head = "".join(
        f'<th class=num>{_e(m)}<br><span class="muted">{_e(direction_word(m))}</span></th>' for m in metrics
    )
    rows = []
    for i, run in enumerate(order, start=1):
        d = detail.get(run, {})
        system = d.get("system") or {}
        label = " ".join(str(x) for x in (system.get("kind"), system.get("mode")) if x)
        cells = []
        for m in metrics:
            r = by[(m, run)]
            rank = "" if _is_null(r.get("rank")) else f'<span class="rank">({int(r["rank"])})</span>'
            letters = f'<span class="letters">{_e(r["letters"])}</span>' if r.get("letters") else ""
            beats = list(r.get("better_than_rows") or [])
            sup = f'<sup class="beats">{", ".join(str(x) for x in beats)}</sup>' if beats else ""
            cls = "num best" if (m, run) in best else "num"
            cells.append(f'<td class="{cls}">{_num(r.get("mean"))}{rank}{letters}{sup}</td>')
        rows.append(
            f"<tr><td class=num>{i}</td><th scope=row><code>{_e(run)}</code></th><td>{_e(label)}</td>"
            f"<td><code>{_e(d.get('chunker_version') or '')}</code></td>{''.join(cells)}</tr>"
        )
    legend = (
        "Each cell: the mean over the queries the metric scores in every run, (its rank: 1 is best), "
        "its letters — runs sharing a letter are not significantly different (compact letter display, "
        "Piepho 2004) — and in superscript the rows (#) of the runs it is significantly better than. "
        "Green: not significantly different from the best run."
    )
    return (
        '<div class="scroll"><table class="metrics">\n<thead><tr><th class=num>#</th><th>run</th>'
        f"<th>system</th><th>chunker</th>{head}</tr></thead>\n<tbody>\n"
        + "\n".join(rows)
        + f'\n</tbody>\n</table></div>\n<p class="caption">{legend}</p>'
    )


def _chart(ranking: Ranking) -> str:
    info = ranking.info
    metrics, order = info["metrics"], info["order"]
    frame = ranking.per_run
    if not frame["mean"].notna().any():
        return _nodata("No metric has a query scored by every run.")
    best = _best_group(ranking)
    y = np.arange(len(order))

    def draw(fig) -> None:
        axes = fig.subplots(1, len(metrics), sharey=True, squeeze=False)[0]
        for ax, metric in zip(axes, metrics, strict=True):
            rows = frame[frame["metric"] == metric].set_index("run_id").loc[order]
            mean = rows["mean"].to_numpy(dtype=float)
            low = rows["ci_low"].to_numpy(dtype=float)
            high = rows["ci_high"].to_numpy(dtype=float)
            err = np.vstack([np.nan_to_num(mean - low).clip(0), np.nan_to_num(high - mean).clip(0)])
            colours = [_BEST if (metric, run) in best else _REST for run in order]
            for k in range(len(order)):
                if np.isnan(mean[k]):
                    continue
                ax.errorbar(
                    mean[k],
                    y[k],
                    xerr=err[:, k : k + 1],
                    fmt="o",
                    color=colours[k],
                    ecolor=colours[k],
                    elinewidth=1.6,
                    capsize=3,
                    markersize=5,
                )
                ax.annotate(
                    str(rows["letters"].iloc[k] or ""),
                    (high[k] if not np.isnan(high[k]) else mean[k], y[k]),
                    xytext=(4, 0),
                    textcoords="offset points",
                    va="center",
                    fontsize=9,
                    color=colours[k],
                )
            ax.set_title(f"{metric} ({direction_word(metric)})", fontsize=10)
            ax.margins(x=0.12)  # room for the letters right of the widest interval
            ax.grid(axis="x", color="#d0d7de", linewidth=0.6)
            ax.set_axisbelow(True)
            ax.tick_params(axis="y", length=0)
            ax.spines["left"].set_visible(False)
        axes[0].set_yticks(y, labels=[f"{i}  {run}" for i, run in enumerate(order, start=1)])
        axes[0].set_ylim(len(order) - 0.5, -0.5)  # the first row on top, as in the table

    svg = _draw(CHART_ID, 1.0 + 0.34 * len(order), draw)
    return (
        f'<figure class="chart" id="{CHART_ID}">\n<figcaption>Each run\'s mean per metric with its 95% '
        "bootstrap CI and its letters; green: not significantly different from the best run</figcaption>\n"
        f"{svg}\n</figure>"
    )


def _pairs(ranking: Ranking) -> str:
    parts = []
    for metric in ranking.info["metrics"]:
        pairs = ranking.pairs[ranking.pairs["metric"] == metric]
        rows = []
        for p in pairs.to_dict("records"):
            ci = "–" if _is_null(p.get("ci_low")) else f"[{_signed(p['ci_low'])}, {_signed(p['ci_high'])}]"
            better = p.get("better")
            rows.append(
                f"<tr><td><code>{_e(p['run_a'])}</code></td><td><code>{_e(p['run_b'])}</code></td>"
                f"<td class=num>{_num(p.get('mean_a'))}</td><td class=num>{_num(p.get('mean_b'))}</td>"
                f"<td class=num>{_signed(p.get('delta'))}</td><td class=num>{ci}</td>"
                f"<td class=num>{_p(p.get('p_value'))}</td><td class=num>{_p(p.get('p_adjusted'))}</td>"
                f"<td>{'' if _is_null(better) else f'<code>{_e(better)}</code>'}</td>"
                f"<td>{_e('' if _is_null(p.get('test')) else p['test'])}</td></tr>"
            )
        parts.append(
            f"<h3>{_e(metric)}</h3>\n"
            '<div class="scroll"><table class="metrics">\n<thead><tr><th>a</th><th>b</th>'
            "<th class=num>mean a</th><th class=num>mean b</th><th class=num>delta</th>"
            "<th class=num>95% CI</th><th class=num>p</th><th class=num>p (Holm)</th>"
            "<th>significantly better</th><th>test</th></tr></thead>\n<tbody>\n"
            + "\n".join(rows)
            + "\n</tbody>\n</table></div>"
        )
    info = ranking.info
    parts.append(
        '<p class="caption">p: exact McNemar for 0/1 scores, a sign-flip randomization test for graded '
        "ones; the CI of the delta is a paired bootstrap percentile interval. p (Holm): adjusted over "
        f"the {int(info['n_pairs'])} pairs of the metric; significant below α = {info['alpha']:g}.</p>"
    )
    return "\n".join(parts)


def _runs(ranking: Ranking) -> str:
    info = ranking.info
    detail = info.get("runs_detail") or {}
    rows = []
    for run in info["order"]:
        d = detail.get(run, {})
        g = d.get("golden") or {}
        s = d.get("system") or {}
        sha = str(g.get("sha256") or "")
        rows.append(
            f"<tr><th scope=row><code>{_e(run)}</code></th><td>{_e(s.get('kind') or '')}</td>"
            f"<td>{_e(s.get('mode') or '')}</td><td><code>{_e(d.get('chunker_version') or '')}</code></td>"
            f'<td>{_e(g.get("name") or "")}</td><td><code title="{_e(sha)}">{_e(sha[:12])}</code></td>'
            f"<td class=num>{int(info['n_queries'].get(run, 0))}</td>"
            f"<td class=num>{int(info['dropped'].get(run, 0))}</td>"
            f"<td>{_e(d.get('created_at') or '')}</td></tr>"
        )
    matching = info.get("matching") or {}
    caption = (
        f'<p class="caption">Matching: <code>{_e(matching.get("mode"))}</code>'
        + (f" — {_e(matching['note'])}" if matching.get("note") else "")
        + "</p>"
        if matching
        else ""
    )
    return (
        '<div class="scroll"><table class="versions">\n<thead><tr><th>run</th><th>system</th><th>mode</th>'
        "<th>chunker</th><th>golden set</th><th>golden sha256</th><th class=num>queries</th>"
        "<th class=num>not in every run</th><th>created</th></tr></thead>\n<tbody>\n"
        + "\n".join(rows)
        + "\n</tbody>\n</table></div>\n"
        + caption
    )
