"""Render a comparison as one standalone HTML page with inline SVG charts (SPEC §8 outputs).

Input is the comparison contract the other renderers share:

- ``info``: run ids (``run_a`` is None without a baseline), ``baseline_note``, ``versions_*``,
  ``system_*``, ``golden_*``, ``chunker_version_match`` / ``matching_criterion`` /
  ``fallback_note``, ``verdict_counts``, ``flip_counts``, golden drift (``only_in_a``,
  ``only_in_b``, ``gold_changed``), ``warnings``, ``min_queries``, ``seed``, ``created_at_*``;
- ``per_metric``: one row per metric (a, b, delta, rel_change and the paired test's n_paired,
  paired_delta, p_value, ci_low, ci_high, test, test_note, significance, direction);
- ``per_query``: one row per query (verdict, ranks, note, flips, gold_changed, slice labels);
- ``per_slice``: a and b per breakdown slice and metric (dimension, value, metric, a, b, delta, n_a, n_b).

Output is a single HTML document: inline CSS, inline SVG charts drawn by matplotlib, no
JavaScript and no external resource (no URL at all that a browser could fetch), so the file can
be mailed, attached to a CI run or opened offline. Every user-provided string is HTML-escaped.
Rendering the same input twice gives the same bytes.
"""

from __future__ import annotations

import html
import io
import math
import re
import warnings
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from kebab_eval_pipeline.compare.report import VERSION_KEYS
from kebab_eval_pipeline.compare.systems import verdict_label
from kebab_eval_pipeline.compare.verdicts import VERDICTS
from kebab_eval_pipeline.metrics import catalogue
from kebab_eval_pipeline.metrics.aggregate import NO_VALUE

__all__ = ["CHART_IDS", "render_html"]

#: The three charts, as element ids of their ``<figure>`` (and prefixes of the SVG's own ids).
CHART_IDS: tuple[str, ...] = ("chart-deltas", "chart-verdicts", "chart-categories")

#: Verdicts always shown in the verdict chart; the others only when non-zero.
_MAIN_VERDICTS = ("win", "loss", "regression", "draw")
#: Notable queries, in table order.
_NOTABLE = ("regression", "loss", "win")
_MAX_DELTA_ROWS = 20
_MAX_CATEGORY_ROWS = 25
_MAX_LISTED_IDS = 200

_COLOURS = {
    "better": "#1a7f37",
    "worse": "#cf222e",
    "same": "#6e7781",
    "win": "#1a7f37",
    "loss": "#d4a72c",
    "regression": "#cf222e",
    "draw": "#8c959f",
    "not_scored": "#d0d7de",
    "only_a": "#54aeff",
    "only_b": "#0969da",
}

# 8.4 in = 806 CSS px (SVG lengths are in pt, 72 per inch; CSS has 96 px per inch): every chart
# has the same natural width, so their text sizes match on the page.
_CHART_WIDTH_IN = 8.4
_RC = {
    # Labels stay <text>: the browser draws them with its own fonts, Hangul included.
    "svg.fonttype": "none",
    # Layout is measured with matplotlib's bundled font, so it is the same on every machine.
    "font.family": ["DejaVu Sans", "sans-serif"],
    "font.sans-serif": ["DejaVu Sans"],
    "font.size": 10,
    # A '$' in a category name is text, not mathtext.
    "text.parse_math": False,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.edgecolor": "#8c959f",
    "axes.labelcolor": "#1f2328",
    "xtick.color": "#59636e",
    "ytick.color": "#1f2328",
    "xtick.labelcolor": "#59636e",
    "ytick.labelcolor": "#1f2328",
}
# savefig's defaults would stamp the date, creator and an RDF block naming external URLs.
_SVG_METADATA = {"Date": None, "Creator": None, "Format": None, "Type": None}
# Only CJK glyphs are expected to be missing from DejaVu Sans; anything else should still warn.
_CJK_GLYPH_WARNING = (
    r"Glyph \d+ \(\\N\{(?:HANGUL|CJK|HIRAGANA|KATAKANA|IDEOGRAPHIC|HALFWIDTH|FULLWIDTH|BOPOMOFO)"
)
_SVG_TAG = re.compile(r"<[^<>]+>")
_SVG_ID = re.compile(r'\bid="([^"]+)"')
_SVG_URL_REF = re.compile(r"url\(#([^)]+)\)")
_SVG_HREF = re.compile(r'href="#([^"]+)"')
_SVG_NAMESPACES = re.compile(r' xmlns(?::xlink)?="[^"]*"')
_SVG_DEFAULT_STYLE = re.compile(r"\s*<defs>\s*<style[^>]*>[^<]*</style>\s*</defs>")


def render_html(
    info: Mapping,
    per_metric: pd.DataFrame,
    per_query: pd.DataFrame,
    per_slice: pd.DataFrame,
    *,
    max_query_rows: int = 300,
    suspect_gold: pd.DataFrame | None = None,
) -> str:
    """The comparison of candidate ``info["run_b"]`` against baseline ``info["run_a"]`` as HTML.

    Sections: header, warnings (only when any), headline metrics, versions side by side (differing
    rows highlighted), three charts (metric deltas with 95% CIs, verdict counts, per-category
    deltas; each replaced by a short note when it has no data), the metrics table, notable
    queries (regressions, losses, wins; at most ``max_query_rows`` rows, then "… N more"), the
    suspect-gold queue (``suspect_gold``, worst first, as many rows at most), answer flips and
    golden-set drift. Without a baseline (``run_a`` None) the page still renders: the
    note, b's versions and metrics, and no-data notes instead of charts. Nulls show as "null"
    (values) or "–" (untestable fields). Sets matplotlib rcParams only inside a ``rc_context``.
    """
    has_baseline = info.get("run_a") is not None
    metrics = _records(per_metric)
    queries = _records(per_query)
    body = [
        _header(info),
        _warnings(info),
        _headline(metrics, has_baseline),
        _versions(info),
        _section("charts", "Charts", _charts(info, per_metric, per_slice, has_baseline)),
        _section("metrics", "Metrics", _metrics_table(metrics, has_baseline)),
        _margins_section(info),
        _slices_section(info, per_slice),
        _section("queries", "Notable queries", _notable_queries(info, queries, max_query_rows)),
        _section("suspect-gold", "Suspect gold", _suspect_gold(info, suspect_gold, max_query_rows)),
        _section("flips", "Answer flips", _flips(info, queries)),
        _section("drift", "Golden-set drift", _drift(info)),
        _footer(info),
    ]
    title = f"kebab-eval comparison: {info.get('run_b')} vs {info.get('run_a') or 'no baseline'}"
    return html_page(title, body)


def html_page(title: str, body: list[str], extra_css: str = "") -> str:
    """A standalone page: ``title`` (escaped), the report CSS (plus ``extra_css``) and the
    non-empty ``body`` parts in order — the frame of the comparison and the ranking pages."""
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{_e(title)}</title>\n<style>{_CSS}{extra_css}</style>\n</head>\n"
        "<body>\n<main>\n" + "\n".join(part for part in body if part) + "\n</main>\n</body>\n</html>\n"
    )


# ---------------------------------------------------------------------------------------------
# Formatting


def _e(value: object) -> str:
    """HTML-escape any value (quotes included, so it is safe in attributes too)."""
    return html.escape(str(value), quote=True)


def _is_null(value: object) -> bool:
    if value is None or value is pd.NA:
        return True
    return isinstance(value, float | np.floating) and math.isnan(value)


def _num(value: object, null: str = "null", digits: int = 4) -> str:
    if _is_null(value):
        return null
    if isinstance(value, int | np.integer):
        return str(int(value))
    return f"{float(value):.{digits}f}"


def _signed(value: object, null: str = "null") -> str:
    return null if _is_null(value) else f"{float(value):+.4f}".replace("-", "−")


def _percent(value: object) -> str:
    return "–" if _is_null(value) else f"{100 * float(value):+.1f}%".replace("-", "−")


def _p(value: object) -> str:
    if _is_null(value):
        return "–"
    return "&lt;0.0001" if float(value) < 0.0001 else f"{float(value):.4f}"


def _text(value: object, null: str = "–") -> str:
    """A user-provided string, escaped; nulls and empty strings become ``null`` (default "–")."""
    return null if _is_null(value) or value == "" else _e(value)


def _records(frame: pd.DataFrame) -> list[dict]:
    return frame.to_dict("records") if frame is not None and len(frame) else []


def _section(anchor: str, title: str, content: str) -> str:
    return f'<section id="{anchor}">\n<h2>{_e(title)}</h2>\n{content}\n</section>'


def _nodata(message: str) -> str:
    return f'<p class="nodata">{_e(message)}</p>'


def _id_list(ids: Sequence[str], limit: int = _MAX_LISTED_IDS) -> str:
    shown = ", ".join(f"<code>{_e(q)}</code>" for q in ids[:limit])
    more = f" … {len(ids) - limit} more" if len(ids) > limit else ""
    return shown + more


# ---------------------------------------------------------------------------------------------
# Page sections


def _header(info: Mapping) -> str:
    a, b = info.get("run_a"), info.get("run_b")
    if a is None:
        title = f"<h1>Evaluation run <code>{_e(b)}</code></h1>"
        subtitle = '<p class="subtitle">No baseline: nothing to compare against.</p>'
    elif info.get("cross_system"):  # two systems: which did better, not what regressed
        title = f"<h1>Comparison of two systems: <code>{_e(b)}</code> vs <code>{_e(a)}</code></h1>"
        subtitle = (
            f'<p class="subtitle">{_e(str(info.get("systems_note")).capitalize())}: delta = b − a; the '
            "differences are between two systems, not regressions of one</p>"
        )
    else:
        title = f"<h1>Comparison: <code>{_e(b)}</code> vs baseline <code>{_e(a)}</code></h1>"
        subtitle = '<p class="subtitle">delta = b − a (candidate minus baseline)</p>'
    created = []
    if a is not None:
        created.append(f"<span>a <code>{_e(a)}</code> created {_text(info.get('created_at_a'))}</span>")
    created.append(f"<span>b <code>{_e(b)}</code> created {_text(info.get('created_at_b'))}</span>")
    note = info.get("baseline_note") or ""
    return (
        f"<header>\n{title}\n{subtitle}\n"
        + (f'<p class="note">{_e(note)}</p>\n' if note else "")
        + f'<p class="meta">{" · ".join(created)}</p>\n</header>'
    )


def _warnings(info: Mapping) -> str:
    # info["warnings"] is the single source (the Markdown and JSON show the same list); the page
    # only adds a link to its drift table.
    items = [_e(w) for w in info.get("warnings") or []]
    only_a, only_b = info.get("only_in_a") or [], info.get("only_in_b") or []
    changed = info.get("gold_changed") or []
    if only_a or only_b or changed:
        items.append(
            f"Golden-set drift: {_plural(len(only_a), 'query')} only in a, {len(only_b)} only in b, "
            f'{len(changed)} with changed gold (see <a href="#drift">Golden-set drift</a>).'
        )
    if not items:
        return ""
    lis = "\n".join(f"<li>{item}</li>" for item in items)
    return f'<aside class="warnings" role="note">\n<strong>Warnings</strong>\n<ul>\n{lis}\n</ul>\n</aside>'


def _present(names: Iterable[str], wanted: Sequence[str]) -> list[str]:
    """The ``wanted`` metrics that ``names`` has, in order; for a wanted ``family@k`` that is
    absent, the family's smallest k present (a run with other cut-offs still gets the column)."""
    parsed = [catalogue.parse(n) for n in names if catalogue.measure(n) is not None]
    present = {p.metric for p in parsed}
    picked = []
    for name in wanted:
        want = catalogue.parse(name)
        ks = sorted(p.k for p in parsed if p.stem == want.stem and p.k is not None)
        if name in present:
            picked.append(name)
        elif ks:
            picked.append(catalogue.format_name(want.stem, ks[0]))
    return picked


def _headline_names(names: Sequence[str]) -> list[str]:
    """The catalogue's card metrics (mrr, hit@5, recall@5, ndcg@10, refusal_correctness,
    answer_precision; the nearest k when a cut-off is absent)."""
    return _present(names, catalogue.card_names())


def _headline(metrics: list[dict], has_baseline: bool) -> str:
    by_name = {m["metric"]: m for m in metrics}
    cards = []
    for name in _headline_names(list(by_name)):
        m = by_name[name]
        if _is_null(m.get("b")) and _is_null(m.get("a")):
            continue
        if has_baseline:
            direction = _direction(m)
            sig = m.get("significance") or ""
            detail = (
                f'<div class="from">a {_num(m.get("a"))}</div>'
                f'<div class="delta {direction}">{_signed(m.get("delta"))}'
                f"{f' <span class=sig>{_e(sig)}</span>' if sig else ''}</div>"
            )
        else:
            detail = ""
        cards.append(
            f'<div class="card"><div class="name">{_e(name)}</div>'
            f'<div class="value">{_num(m.get("b"))}</div>{detail}</div>'
        )
    return f'<div class="cards">\n{"".join(cards)}\n</div>' if cards else ""


def _versions(info: Mapping) -> str:
    has_baseline = info.get("run_a") is not None
    va, vb = info.get("versions_a") or {}, info.get("versions_b") or {}
    extra = sorted((set(va) | set(vb)) - set(VERSION_KEYS))
    rows: list[tuple[str, object, object]] = [(k, va.get(k), vb.get(k)) for k in (*VERSION_KEYS, *extra)]
    sa, sb = info.get("system_a") or {}, info.get("system_b") or {}
    ga, gb = info.get("golden_a") or {}, info.get("golden_b") or {}
    rows += [
        ("system kind", sa.get("kind"), sb.get("kind")),
        ("system mode", sa.get("mode"), sb.get("mode")),
        ("golden set", ga.get("name"), gb.get("name")),
        ("golden sha256", ga.get("sha256"), gb.get("sha256")),
        ("golden queries", ga.get("queries"), gb.get("queries")),
    ]
    head = "<th>a (baseline)</th><th>b (candidate)</th><th></th>" if has_baseline else "<th>b</th>"
    lines = []
    for key, a, b in rows:
        if not has_baseline:
            lines.append(f"<tr><th scope=row>{_e(key)}</th><td>{_version_cell(key, b)}</td></tr>")
            continue
        differs = _is_null(a) != _is_null(b) or (not _is_null(a) and str(a) != str(b))
        cls, mark = (' class="diff"', '<span title="differs">≠</span>') if differs else ("", "")
        lines.append(
            f"<tr{cls}><th scope=row>{_e(key)}</th><td>{_version_cell(key, a)}</td>"
            f"<td>{_version_cell(key, b)}</td><td class=mark>{mark}</td></tr>"
        )
    match = info.get("chunker_version_match")
    caption = (
        f"chunker_version_match: <code>{_text(match, 'null')}</code> · per-query matching criterion: "
        f"<code>{_text(info.get('matching_criterion'), 'null')}</code>"
        if has_baseline
        else ""
    )
    table = (
        f'<div class="scroll"><table class="versions">\n<thead><tr><th></th>{head}</tr></thead>\n'
        f"<tbody>\n{chr(10).join(lines)}\n</tbody>\n</table></div>"
    )
    return _section(
        "versions", "Versions", table + (f'\n<p class="caption">{caption}</p>' if caption else "")
    )


def _version_cell(key: str, value: object) -> str:
    if _is_null(value):
        return '<span class="null">null</span>'
    if key == "golden sha256":  # 64 hex digits would widen the table; the full hash is on hover
        return f'<code title="{_e(value)}">{_e(str(value)[:12])}</code>'
    return f"<code>{_e(value)}</code>"


def _value(metric: Mapping, run: str) -> str:
    """A run's value of a metric; counts (``n_*``) as whole numbers."""
    value = metric.get(run)
    if str(metric["metric"]).startswith("n_") and not _is_null(value) and float(value).is_integer():
        return str(int(value))
    return _num(value)


def _direction(metric: Mapping) -> str:
    d = metric.get("direction")
    return d if d in ("better", "worse", "same") else ""


def _metrics_table(metrics: list[dict], has_baseline: bool) -> str:
    if not metrics:
        return _nodata("No metrics.")
    if not has_baseline:  # a, delta and the tests would all be null: b's values alone
        rows = [
            f"<tr><th scope=row>{_e(m['metric'])}</th><td class=num>{_value(m, 'b')}</td></tr>"
            for m in metrics
        ]
        return (
            '<table class="metrics-b">\n<thead><tr><th>metric</th><th class=num>b</th></tr></thead>\n'
            f"<tbody>\n{chr(10).join(rows)}\n</tbody>\n</table>"
        )
    # Metrics null in both runs (empty denominators, e.g. answer metrics of retrieval-only runs)
    # would fill the table with rows of "null": they are named in a fold below it instead.
    valued = [m for m in metrics if not (_is_null(m.get("a")) and _is_null(m.get("b")))]
    null_both = [str(m["metric"]) for m in metrics if _is_null(m.get("a")) and _is_null(m.get("b"))]
    rows = []
    for m in valued:
        direction = _direction(m)
        ci = (
            "–"
            if _is_null(m.get("ci_low")) or _is_null(m.get("ci_high"))
            else f"[{_signed(m['ci_low'])}, {_signed(m['ci_high'])}]"
        )
        rows.append(
            f"<tr><th scope=row>{_e(m['metric'])}</th>"
            f"<td class=num>{_value(m, 'a')}</td><td class=num>{_value(m, 'b')}</td>"
            f'<td class="num {direction}">{_signed(m.get("delta"))}</td>'
            f'<td class="num {"" if _is_null(m.get("rel_change")) else direction}">'
            f"{_percent(m.get('rel_change'))}</td>"
            f"<td class=num>{_p(m.get('p_value'))}</td><td class=num>{_adjusted_p(m)}</td>"
            f"<td class=num>{ci}</td>"
            f'<td class="sig {direction}">{_e(m.get("significance") or "")}</td>'
            f"<td class=num>{_num(m.get('n_paired'), '–')}</td><td>{_test_cell(m)}</td></tr>"
        )
    legend = (
        "p and 95% CI come from the paired test over the queries both runs scored (n): exact McNemar "
        "for 0/1 scores, a sign-flip randomization test for graded ones. Adjusted p: Holm over the gated "
        "metrics (H), Benjamini–Hochberg over every test of the report, slices included (BH); the "
        "Metrics section above names the families. Significance (adjusted p unless configured raw): "
        "* p&lt;0.05, ** p&lt;0.01, *** p&lt;0.001. Green is better, red worse (a rise is worse for "
        "rates of bad events and latencies)."
    )
    return (
        '<div class="scroll"><table class="metrics">\n<thead><tr><th>metric</th><th class=num>a</th>'
        "<th class=num>b</th><th class=num>delta</th><th class=num>relative</th><th class=num>p</th>"
        "<th class=num>p adj.</th>"
        "<th class=num>95% CI</th><th>sig.</th><th class=num>n</th><th>test</th></tr></thead>\n"
        f"<tbody>\n{chr(10).join(rows)}\n</tbody>\n</table></div>\n"
        + (
            f'<details class="null-metrics"><summary>{_plural(len(null_both), "metric")} null in both '
            f"runs (no queries to score)</summary><p>{_id_list(null_both)}</p></details>\n"
            if null_both
            else ""
        )
        + f'<p class="caption">{legend}</p>'
    )


def _adjusted_p(metric: Mapping) -> str:
    """The adjusted p and its family (H = Holm, BH); – for reports stored before adjustment."""
    p = metric.get("p_adjusted")
    if _is_null(p):
        return "–"
    by = {"holm": "H", "bh": "BH"}.get(str(metric.get("adjusted_by")), "")
    return f"{_p(p)} <small>{by}</small>" if by else _p(p)


def _margins_section(info: Mapping) -> str:
    """The non-inferiority / equivalence decisions of the regression gates' margins ('' when none)."""
    margins = info.get("margins") or []
    if not margins:
        return ""
    rows = []
    for m in margins:
        claim = (
            f"no worse by more than {m['margin']:g}"
            if m["kind"] == "non_inferior"
            else f"within ±{m['margin']:g}"
        )
        verdict = m.get("verdict") or "no bound"
        css = "better" if m.get("passed") else "worse"
        rows.append(
            f"<tr><th scope=row>{_e(m['metric'])}</th><td>{_e(claim)}</td>"
            f'<td class="{css}">{_e(verdict)}</td><td class=num>{_signed(m.get("bound_low"), "–")}</td>'
            f"<td class=num>{_signed(m.get('bound_high'), '–')}</td><td class=num>{_p(m.get('p_value'))}</td>"
            f"<td>{_e(m.get('text'))}</td></tr>"
        )
    table = (
        '<div class="scroll"><table class="margins">\n<thead><tr><th>metric</th><th>claim (b vs a)</th>'
        "<th>verdict</th><th class=num>lower bound</th><th class=num>upper bound</th>"
        "<th class=num>one-sided p</th><th>decided by</th></tr></thead>\n"
        f"<tbody>\n{chr(10).join(rows)}\n</tbody>\n</table></div>\n"
        '<p class="caption">One-sided paired-t bounds of b − a at level '
        f"{1 - float(info.get('alpha', 0.05)):.0%} (equivalence: both, the two one-sided tests).</p>"
    )
    return _section("margins", "Non-inferiority and equivalence", table)


def _slices_section(info: Mapping, per_slice: pd.DataFrame) -> str:
    """The slices whose change is significant after Benjamini–Hochberg ('' without slice tests)."""
    if per_slice is None or "p_bh" not in per_slice.columns or not per_slice["p_value"].notna().any():
        return ""
    alpha = float(info.get("alpha", 0.05))
    tested = per_slice[per_slice["p_value"].notna()]
    flagged = tested[tested["p_bh"] < alpha].sort_values(["p_bh", "dimension", "value", "metric"])
    if not len(flagged):
        return _section(
            "slices", "Slices that changed", _nodata(f"None of the {len(tested)} slice tests is significant.")
        )
    rows = [
        f"<tr><th scope=row>{_e(r['dimension'])}={_e(r['value'])}</th><td>{_e(r['metric'])}</td>"
        f"<td class=num>{_value(r, 'a')}</td><td class=num>{_value(r, 'b')}</td>"
        f"<td class=num>{_signed(r.get('delta'))}</td><td class=num>{_num(r.get('n_paired'), '–')}</td>"
        f"<td class=num>{_p(r.get('p_value'))}</td><td class=num>{_p(r.get('p_bh'))}</td></tr>"
        for r in _records(flagged)
    ]
    table = (
        '<div class="scroll"><table class="slices">\n<thead><tr><th>slice</th><th>metric</th>'
        "<th class=num>a</th><th class=num>b</th><th class=num>delta</th><th class=num>n</th>"
        "<th class=num>p</th><th class=num>p (BH)</th></tr></thead>\n"
        f"<tbody>\n{chr(10).join(rows)}\n</tbody>\n</table></div>\n"
        f'<p class="caption">{len(flagged)} of {len(tested)} slice tests significant after '
        f"Benjamini–Hochberg over every test of the report (p &lt; {alpha:g}).</p>"
    )
    return _section("slices", "Slices that changed", table)


def _test_cell(metric: Mapping) -> str:
    """The test's name; its note (how it was tested, or why not) folds out beneath it, without JS."""
    note = metric.get("test_note")
    if _is_null(note) or not note:
        return _text(metric.get("test"))
    test = _text(metric.get("test"), "not tested")
    return f'<details class="test-note"><summary>{test}</summary>{_e(note)}</details>'


def _plural(n: int, noun: str) -> str:
    if n == 1:
        return f"1 {noun}"
    if noun.endswith("y"):
        return f"{n} {noun[:-1]}ies"
    return f"{n} {noun}es" if noun.endswith(("s", "sh", "ch")) else f"{n} {noun}s"


def _flip_text(q: Mapping) -> str:
    flips = [q.get("refusal_flip"), q.get("groundedness_flip")]
    return ", ".join(_e(f) for f in flips if not _is_null(f) and f)


def _notable_queries(info: Mapping, queries: list[dict], max_rows: int) -> str:
    """Regressions, then losses, then wins; within each, the largest reciprocal-rank change first."""
    if info.get("run_a") is None:
        return _nodata("No baseline: no per-query verdicts.")
    order = {v: i for i, v in enumerate(_NOTABLE)}

    def rr(rank: object) -> float:
        return 0.0 if _is_null(rank) else 1.0 / float(rank)

    notable = sorted(
        (q for q in queries if q.get("verdict") in order),
        key=lambda q: (
            order[q["verdict"]],
            -abs(rr(q.get("b_rank")) - rr(q.get("a_rank"))),
            str(q["query_id"]),
        ),
    )
    if not notable:
        return _nodata("No regressions, losses or wins: every query is a draw or not scored.")
    fields = {str(g.get("query_id")): g.get("fields") or [] for g in info.get("gold_changed") or []}
    rows = []
    for q in notable[:max_rows]:
        qid = str(q["query_id"])
        gold = ""
        if not _is_null(q.get("gold_changed")) and bool(q.get("gold_changed")):
            changed = ", ".join(fields.get(qid, []))
            gold = f'<span class="badge gold" title="gold changed: {_e(changed)}">gold changed</span>'
        rows.append(
            f'<tr><td><code>{_e(qid)}</code></td><td><span class="badge {q["verdict"]}">'
            f"{_e(verdict_label(q['verdict'], info))}</span></td>"
            f"<td class=num>{_num(q.get('a_rank'), '–')}</td>"
            f"<td class=num>{_num(q.get('b_rank'), '–')}</td><td>{_text(q.get('category'))}</td>"
            f"<td>{_flip_text(q)}</td><td>{gold}</td><td>{_text(q.get('note'), '')}</td></tr>"
        )
    if len(notable) > max_rows:
        rows.append(
            f'<tr class="more"><td colspan="8">… {len(notable) - max_rows} more notable queries '
            "(see the per-query table of the comparison)</td></tr>"
        )
    tally = {v: sum(q["verdict"] == v for q in notable) for v in _NOTABLE}
    if info.get("cross_system"):  # neutral words are phrases, not nouns to pluralise
        counts = " · ".join(f"{verdict_label(v, info)}: {n}" for v, n in tally.items())
    else:
        counts = " · ".join(_plural(n, v) for v, n in tally.items())
    return (
        f'<p class="caption">{counts}; ranks are of the first relevant hit ("–": not found).</p>\n'
        '<div class="scroll"><table class="queries">\n<thead><tr><th>query</th><th>verdict</th>'
        "<th class=num>a rank</th><th class=num>b rank</th><th>category</th><th>answer flips</th>"
        f"<th>gold</th><th>note</th></tr></thead>\n<tbody>\n{chr(10).join(rows)}\n</tbody>\n</table></div>"
    )


def _suspect_gold(info: Mapping, queue: pd.DataFrame | None, max_rows: int) -> str:
    """b's unjudged hits above its first relevant hit in losses and regressions, worst first."""
    if info.get("run_a") is None:
        return _nodata("No baseline: no suspect gold.")
    if queue is None:
        return _nodata("This comparison was stored before the suspect-gold queue existed.")
    if len(queue) == 0:
        return _nodata("None: no loss or regression has an unjudged hit above b's first relevant hit.")
    rows = []
    for q in _records(queue.head(max_rows)):
        where = _text(q.get("doc_path") if not _is_null(q.get("doc_path")) else q.get("doc_id"), "")
        if not _is_null(q.get("line_start")):
            end = "" if _is_null(q.get("line_end")) else f"-{int(q['line_end'])}"
            where += f":{int(q['line_start'])}{end}"
        heading = q.get("heading_path")
        heading = " &gt; ".join(_e(h) for h in heading) if heading is not None and len(heading) else ""
        if _is_null(q.get("judge_relevant")):
            judge = "–"
        else:
            verdict = "relevant" if q["judge_relevant"] else "not relevant"
            score = "" if _is_null(q.get("judge_score")) else f" ({float(q['judge_score']):g}/5)"
            judge = f'<span title="{_text(q.get("judge_reasoning"), "")}">{verdict}{score}</span>'
        rows.append(
            f"<tr><td><code>{_e(q['query_id'])}</code></td><td>{_text(q.get('question'))}</td>"
            f'<td><span class="badge {_e(q["verdict"])}">{_e(verdict_label(q["verdict"], info))}</span></td>'
            f"<td class=num>{_num(q.get('a_rank'), '–')}</td>"
            f"<td class=num>{_num(q.get('b_rank'), '–')}</td>"
            f"<td class=num>{_num(q.get('hit_rank'), '–')}</td>"
            f"<td><code>{_text(q.get('chunk_id'), '')}</code></td>"
            f"<td>{where}</td><td>{heading}</td><td>{_text(q.get('snippet'), '')}</td><td>{judge}</td></tr>"
        )
    if len(queue) > max_rows:
        rows.append(
            f'<tr class="more"><td colspan="11">… {len(queue) - max_rows} more '
            "(see the JSON report)</td></tr>"
        )
    n_queries = int(queue["query_id"].nunique())
    return (
        f'<p class="caption">{_plural(len(queue), "unjudged hit")} in {_plural(n_queries, "query")}: hits of '
        f"<code>{_e(info.get('run_b'))}</code> ranked above its first relevant hit in a loss or regression "
        "that the golden set never judged. If they are relevant, the verdict reflects a gap in the gold; "
        f"<code>kebab-eval golden suggest {_e(info.get('run_b'))}</code> writes them as candidate supports."
        "</p>\n"
        '<div class="scroll"><table class="suspects">\n<thead><tr><th>query</th><th>question</th>'
        "<th>verdict</th><th class=num>a rank</th><th class=num>b rank</th><th class=num>hit rank</th>"
        "<th>chunk</th><th>where</th><th>heading</th><th>snippet</th><th>judge</th></tr></thead>\n"
        f"<tbody>\n{chr(10).join(rows)}\n</tbody>\n</table></div>"
    )


def _flips(info: Mapping, queries: list[dict]) -> str:
    if info.get("run_a") is None:
        return _nodata("No baseline: no answer flips.")
    counts = dict(info.get("flip_counts") or {})
    examples: dict[str, list[str]] = {}
    for q in queries:
        for column in ("refusal_flip", "groundedness_flip"):
            flip = q.get(column)
            if not _is_null(flip) and flip:
                examples.setdefault(str(flip), []).append(str(q["query_id"]))
                counts.setdefault(str(flip), 0)
    if not counts:
        return _nodata("No answer flips (neither run produced answers for the same queries).")
    rows = [
        f"<tr><th scope=row>{_e(flip)}</th><td class=num>{int(n)}</td>"
        f"<td>{_id_list(sorted(examples.get(flip, [])), 20)}</td></tr>"
        for flip, n in counts.items()
    ]
    return (
        '<p class="caption">Queries both runs answered whose refusal or rule-based groundedness '
        "changed.</p>\n"
        '<table class="flips">\n<thead><tr><th>flip</th><th class=num>queries</th><th>query ids</th></tr>'
        f"</thead>\n<tbody>\n{chr(10).join(rows)}\n</tbody>\n</table>"
    )


def _drift(info: Mapping) -> str:
    if info.get("run_a") is None:
        return _nodata("No baseline: no golden-set drift to report.")
    only_a, only_b = list(info.get("only_in_a") or []), list(info.get("only_in_b") or [])
    changed = info.get("gold_changed") or []
    if not (only_a or only_b or changed):
        return "<p>None: both runs scored the same queries with the same gold.</p>"
    parts = []
    if only_a:
        parts.append(f"<p><strong>Only in a</strong> ({len(only_a)}): {_id_list(only_a)}</p>")
    if only_b:
        parts.append(f"<p><strong>Only in b</strong> ({len(only_b)}): {_id_list(only_b)}</p>")
    if changed:
        rows = [
            f"<tr><td><code>{_e(g.get('query_id'))}</code></td>"
            f"<td>{', '.join(f'<code>{_e(f)}</code>' for f in g.get('fields') or [])}</td></tr>"
            for g in changed[:_MAX_LISTED_IDS]
        ]
        if len(changed) > _MAX_LISTED_IDS:
            rows.append(f'<tr class="more"><td colspan="2">… {len(changed) - _MAX_LISTED_IDS} more</td></tr>')
        parts.append(
            f"<p><strong>Gold changed</strong> ({len(changed)}): these queries are scored against "
            "different gold in the two runs, so their verdicts compare different questions.</p>\n"
            '<table class="gold">\n<thead><tr><th>query</th><th>changed fields</th></tr></thead>\n'
            f"<tbody>\n{chr(10).join(rows)}\n</tbody>\n</table>"
        )
    return "\n".join(parts)


def _footer(info: Mapping) -> str:
    bits = ["Generated by kebab-eval"]
    if info.get("seed") is not None:
        bits.append(f"paired tests seeded with {_e(info['seed'])}")
    if info.get("min_queries") is not None:
        bits.append(f"min_queries {_e(info['min_queries'])}")
    return f"<footer>{' · '.join(bits)}</footer>"


# ---------------------------------------------------------------------------------------------
# Charts


def _charts(info: Mapping, per_metric: pd.DataFrame, per_slice: pd.DataFrame, has_baseline: bool) -> str:
    no_baseline = "No baseline: nothing to compare."
    deltas = _delta_chart(per_metric) if has_baseline else None
    verdicts = _verdict_chart(info.get("verdict_counts") or {}, info) if has_baseline else None
    categories = _category_chart(per_slice) if has_baseline else None
    return "\n".join(
        [
            _figure(
                CHART_IDS[0],
                "Metric deltas (b − a) with 95% confidence intervals from the paired tests",
                deltas,
                no_baseline
                if not has_baseline
                else "No metric has a paired test (no queries scored by both runs).",
            ),
            _figure(
                CHART_IDS[1],
                "Per-query verdicts",
                verdicts,
                no_baseline if not has_baseline else "No per-query verdicts.",
            ),
            _figure(
                CHART_IDS[2],
                "Deltas (b − a) per category; green is better",
                categories,
                no_baseline if not has_baseline else "No per-category deltas (no query has a category).",
            ),
        ]
    )


def _figure(chart_id: str, caption: str, chart: tuple[str, str] | None, empty: str) -> str:
    """``chart`` is (svg, extra caption) or None for the no-data note."""
    if chart is None:
        return (
            f'<figure class="chart empty" id="{chart_id}">\n<figcaption>{_e(caption)}</figcaption>\n'
            f"{_nodata(empty)}\n</figure>"
        )
    svg, extra = chart
    note = f' <span class="extra">({_e(extra)})</span>' if extra else ""
    head = f'<figure class="chart" id="{chart_id}">\n<figcaption>{_e(caption)}{note}</figcaption>'
    return f"{head}\n{svg}\n</figure>"


def _new_figure(height_in: float):
    """A pyplot-free figure: its own Agg canvas, no global figure registry."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(_CHART_WIDTH_IN, height_in), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _draw(chart_id: str, height_in: float, draw) -> str:
    """Draw with ``draw(fig)`` under the report's rcParams and return the figure as inline SVG."""
    import matplotlib

    rc = {**_RC, "svg.hashsalt": f"kebab-eval-{chart_id}"}  # fixed salt: the same ids on every render
    with matplotlib.rc_context(rc), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_CJK_GLYPH_WARNING, category=UserWarning)
        fig = _new_figure(height_in)
        draw(fig)
        buf = io.StringIO()
        fig.savefig(buf, format="svg", metadata=_SVG_METADATA)
    return _inline_svg(buf.getvalue(), chart_id)


def _inline_svg(svg: str, prefix: str) -> str:
    """A standalone SVG document made fit to sit inside HTML next to other charts.

    Drops the XML prolog and DOCTYPE (the latter names an external DTD), the namespace
    declarations (the HTML parser supplies them) and matplotlib's global ``<style>`` (it would
    apply to the whole page; the page CSS carries it scoped); prefixes every id and reference with
    ``prefix`` because each matplotlib SVG numbers its ids from 1 (figure_1, patch_1, …).
    """
    svg = svg[svg.index("<svg") :]
    svg = _SVG_NAMESPACES.sub("", svg, count=2)
    svg = _SVG_DEFAULT_STYLE.sub("", svg, count=1)

    def prefix_ids(tag: re.Match) -> str:
        text = _SVG_ID.sub(lambda m: f'id="{prefix}-{m.group(1)}"', tag.group(0))
        text = _SVG_URL_REF.sub(lambda m: f"url(#{prefix}-{m.group(1)})", text)
        return _SVG_HREF.sub(lambda m: f'href="#{prefix}-{m.group(1)}"', text)

    # Inside tags only: a label that reads 'id="x"' is text and stays as written.
    svg = _SVG_TAG.sub(prefix_ids, svg)
    return svg.replace("<svg ", '<svg role="img" ', 1).strip()


def _metric_sort_key(name: str) -> tuple[int, int, int]:
    """The catalogue's headline metrics' families first, in headline order (hit, mrr, recall,
    precision, ndcg, refusal_correctness, …), then the rest in catalogue order; k ascending within
    a family (hit@3 before hit@10); unknown names last."""
    entry = catalogue.measure(name)
    if entry is None:
        return (2, 0, 0)
    k = catalogue.parse(name).k or 0
    stems = [catalogue.parse(n).stem for n in catalogue.headline_names()]
    if entry.name in stems:
        return (0, stems.index(entry.name), k)
    return (1, [e.name for e in catalogue.measures()].index(entry.name), k)


def _delta_chart(per_metric: pd.DataFrame) -> tuple[str, str] | None:
    """Forest plot of ``paired_delta`` with [ci_low, ci_high] for the testable metrics."""
    if per_metric is None or not len(per_metric) or "paired_delta" not in per_metric:
        return None
    testable = [m for m in _records(per_metric) if not _is_null(m.get("paired_delta"))]
    if not testable:
        return None
    testable.sort(key=lambda m: _metric_sort_key(str(m["metric"])))
    shown = testable[:_MAX_DELTA_ROWS]
    extra = (
        f"{len(testable) - len(shown)} more tested metrics in the table" if len(testable) > len(shown) else ""
    )

    delta = np.array([float(m["paired_delta"]) for m in shown])
    low = np.array([np.nan if _is_null(m.get("ci_low")) else float(m["ci_low"]) for m in shown])
    high = np.array([np.nan if _is_null(m.get("ci_high")) else float(m["ci_high"]) for m in shown])
    # Rounded CIs can sit a hair inside the rounded delta; error bars must not be negative.
    err = np.vstack([np.nan_to_num(delta - low).clip(0), np.nan_to_num(high - delta).clip(0)])
    span = float(np.nanmax(np.abs(np.concatenate([delta, low, high])))) or 0.05
    labels = [f"{m['metric']}  {m.get('significance') or ''}".rstrip() for m in shown]
    directions = [_direction(m) or "same" for m in shown]

    def draw(fig) -> None:
        from matplotlib.lines import Line2D

        ax = fig.add_subplot()
        y = np.arange(len(shown))
        for direction in ("better", "worse", "same"):
            sel = np.array([d == direction for d in directions])
            if sel.any():
                ax.errorbar(
                    delta[sel],
                    y[sel],
                    xerr=err[:, sel],
                    fmt="o",
                    color=_COLOURS[direction],
                    ecolor=_COLOURS[direction],
                    elinewidth=1.6,
                    capsize=3,
                    markersize=5,
                )
        ax.axvline(0, color="#57606a", linewidth=1)
        ax.set_yticks(y, labels=labels)
        ax.set_ylim(len(shown) - 0.5, -0.5)  # first metric on top
        ax.set_xlim(-1.15 * span, 1.15 * span)  # symmetric: left of zero reads as "b lower"
        ax.set_xlabel("paired delta b − a  (95% CI; * p<0.05, ** p<0.01, *** p<0.001)")
        ax.grid(axis="x", color="#d0d7de", linewidth=0.6)
        ax.set_axisbelow(True)
        ax.tick_params(axis="y", length=0)
        ax.spines["left"].set_visible(False)
        handles = [
            Line2D([], [], marker="o", linestyle="", color=_COLOURS[d], label=d)
            for d in ("better", "worse", "same")
            if d in directions
        ]
        # Above the plot, where it can never cover a row.
        ax.legend(
            handles=handles, loc="lower right", bbox_to_anchor=(1, 1), ncol=3, frameon=False, fontsize=9
        )

    return _draw(CHART_IDS[0], 0.9 + 0.28 * len(shown), draw), extra


def _verdict_chart(counts: Mapping[str, int], info: Mapping | None = None) -> tuple[str, str] | None:
    """Bars per verdict: win/loss/regression/draw always, the others when non-zero (named by
    :func:`~.systems.verdict_label`: neutral words in a comparison of two systems)."""
    shown = [v for v in VERDICTS if v in _MAIN_VERDICTS or counts.get(v, 0)]
    values = [int(counts.get(v, 0)) for v in shown]
    if not sum(values):
        return None
    names = [verdict_label(v, info or {}) for v in shown]

    def draw(fig) -> None:
        ax = fig.add_subplot()
        bars = ax.bar(names, values, color=[_COLOURS[v] for v in shown], width=0.6)
        ax.bar_label(bars, padding=3, fontsize=10)
        ax.set_ylabel("queries")
        ax.set_ylim(0, max(values) * 1.18)
        ax.grid(axis="y", color="#d0d7de", linewidth=0.6)
        ax.set_axisbelow(True)
        ax.tick_params(axis="x", length=0)

    return _draw(CHART_IDS[1], 2.6, draw), f"{sum(values)} queries"


def _category_metrics(names: Iterable[str]) -> list[str]:
    """The per-category table's metrics (hit@5, mrr, recall@5, refusal_correctness; the smallest
    k present when a cut-off is absent)."""
    return _present(names, catalogue.summary_names(families=catalogue.QUALITY_FAMILIES))


def _category_chart(per_slice: pd.DataFrame) -> tuple[str, str] | None:
    """Heatmap of deltas per category (rows) and metric (columns), the value written in each cell."""
    if per_slice is None or not len(per_slice):
        return None
    cat = per_slice[per_slice["dimension"] == "category"]
    columns = _category_metrics(cat["metric"].astype(str).unique())
    cat = cat[cat["metric"].isin(columns)].drop_duplicates(["value", "metric"])
    if not len(cat):
        return None
    grid = cat.pivot(index="value", columns="metric", values="delta").astype(float)
    grid = grid[[c for c in columns if c in grid.columns and grid[c].notna().any()]]
    if grid.empty or not grid.notna().any().any():
        return None
    # Queries per category: b's count (a's where b has none), the largest over the metrics shown.
    counts = pd.to_numeric(cat["n_b"], errors="coerce").astype(float)
    counts = counts.fillna(pd.to_numeric(cat["n_a"], errors="coerce").astype(float))
    n = counts.groupby(cat["value"]).max().fillna(0).to_dict()
    # The most populated categories when there are too many to read; then alphabetical.
    keep = sorted(grid.index, key=lambda v: (-n.get(v, 0), str(v)))[:_MAX_CATEGORY_ROWS]
    keep.sort(key=lambda v: (v == NO_VALUE, str(v)))  # "(none)" last
    extra = f"{len(grid) - len(keep)} smaller categories not shown" if len(grid) > len(keep) else ""
    grid = grid.loc[keep]
    values = grid.to_numpy()
    span = float(np.nanmax(np.abs(values))) or 0.05
    row_labels = [f"{v}  (n={int(n[v])})" if n.get(v) else str(v) for v in grid.index]

    def draw(fig) -> None:
        import matplotlib as mpl
        from matplotlib.colors import Normalize

        ax = fig.add_subplot()
        cmap = mpl.colormaps["RdYlGn"].with_extremes(bad="#f6f8fa")
        norm = Normalize(-span, span)
        # pcolormesh (vector quads), not imshow: imshow would embed a raster data: URL.
        ax.pcolormesh(np.ma.masked_invalid(values), cmap=cmap, norm=norm, edgecolors="white", linewidth=2)
        for (i, j), value in np.ndenumerate(values):
            if math.isnan(value):
                ax.text(j + 0.5, i + 0.5, "–", ha="center", va="center", color="#8c959f")
                continue
            value = 0.0 if round(value, 3) == 0 else value  # no "−0.000"
            r, g, b, _ = cmap(norm(value))
            dark = 0.299 * r + 0.587 * g + 0.114 * b < 0.5  # light text on dark cells
            ax.text(
                j + 0.5,
                i + 0.5,
                f"{value:+.3f}".replace("-", "−"),
                ha="center",
                va="center",
                color="white" if dark else "#1f2328",
                fontsize=10,
            )
        ax.set_xticks(np.arange(values.shape[1]) + 0.5, labels=list(grid.columns))
        ax.set_yticks(np.arange(values.shape[0]) + 0.5, labels=row_labels)
        ax.xaxis.tick_top()
        ax.set_ylim(values.shape[0], 0)  # first category on top
        ax.tick_params(length=0)
        for spine in ax.spines.values():
            spine.set_visible(False)

    return _draw(CHART_IDS[2], 0.7 + 0.36 * len(keep), draw), extra


_CSS = """
:root { --fg: #1f2328; --muted: #59636e; --border: #d1d9e0; --soft: #f6f8fa;
  --better: #1a7f37; --worse: #cf222e; }
* { box-sizing: border-box; }
body { margin: 0; color: var(--fg); background: #fff;
  font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", "Noto Sans CJK KR",
    "Helvetica Neue", Arial, sans-serif; }
main { max-width: 1040px; margin: 0 auto; padding: 28px 28px 56px; }
h1 { font-size: 24px; line-height: 1.3; margin: 0 0 2px; }
h2 { font-size: 18px; margin: 36px 0 12px; padding-bottom: 6px; border-bottom: 1px solid var(--border); }
code { font: 0.88em ui-monospace, SFMono-Regular, "DejaVu Sans Mono", Menlo, Consolas, monospace;
  background: var(--soft); padding: 1px 5px; border-radius: 4px; }
h1 code { font-size: 0.85em; }
a { color: #0969da; }
.subtitle, .meta, .caption, .muted, footer { color: var(--muted); }
.subtitle { margin: 0 0 8px; }
.note { margin: 4px 0; }
.meta { font-size: 13px; margin: 4px 0 0; }
.caption { font-size: 13px; margin: 6px 0 0; }
figcaption { font-size: 14px; font-weight: 600; color: var(--fg); margin: 0 0 6px; }
figcaption .extra { font-weight: 400; color: var(--muted); }
.warnings { background: #fff8c5; border: 1px solid #d4a72c; border-radius: 6px; padding: 10px 16px;
  margin: 20px 0 0; }
.warnings ul { margin: 6px 0 0; padding-left: 20px; }
.cards { display: flex; flex-wrap: wrap; gap: 12px; margin: 22px 0 0; }
.card { border: 1px solid var(--border); border-radius: 8px; padding: 8px 14px; min-width: 130px; }
.card .name { color: var(--muted); font-size: 13px; }
.card .value { font-size: 22px; font-weight: 600; font-variant-numeric: tabular-nums; }
.card .from, .card .delta { font-size: 13px; font-variant-numeric: tabular-nums; }
.card .from { color: var(--muted); }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; font-size: 14px; font-variant-numeric: tabular-nums; }
th, td { padding: 5px 10px; border-bottom: 1px solid var(--border); text-align: left; vertical-align: top; }
thead th { background: var(--soft); font-weight: 600; border-bottom: 1px solid #afb8c1; white-space: nowrap; }
tbody th { font-weight: 500; white-space: nowrap; }
.num { text-align: right; white-space: nowrap; }
td.sig { font-weight: 700; }
td.mark { color: #bc4c00; font-weight: 700; }
tr.diff td, tr.diff th { background: #fff1e5; }
tr.more td { color: var(--muted); font-style: italic; }
.null { color: var(--muted); }
.better { color: var(--better); } .worse { color: var(--worse); }
details.null-metrics { margin: 10px 0 0; font-size: 14px; }
details.null-metrics summary { cursor: pointer; color: var(--muted); }
details.null-metrics p { margin: 6px 0 0; line-height: 1.9; }
details.test-note { color: var(--muted); font-size: 12px; max-width: 240px; }
details.test-note summary { color: var(--fg); font-size: 14px; cursor: pointer; white-space: nowrap; }
table.metrics, table.queries { width: 100%; }
table.queries td:last-child { color: var(--muted); font-size: 13px; }
.badge { display: inline-block; padding: 0 8px; border-radius: 10px; font-size: 12px; font-weight: 600;
  white-space: nowrap; }
.badge.regression { background: #ffebe9; color: #a40e26; }
.badge.loss { background: #fff8c5; color: #7d4e00; }
.badge.win { background: #dafbe1; color: #116329; }
.badge.gold { background: #ddf4ff; color: #0550ae; }
figure.chart { margin: 18px 0 34px; }
figure.chart svg { display: block; max-width: 100%; height: auto; }
figure.chart svg * { stroke-linejoin: round; stroke-linecap: butt; }
.nodata { color: var(--muted); font-style: italic; margin: 0; padding: 14px 16px;
  border: 1px dashed var(--border); border-radius: 6px; }
footer { margin-top: 40px; font-size: 12px; }
"""
