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

Output is a single HTML document: inline CSS, inline SVG charts, no
JavaScript and no external resource (no URL at all that a browser could fetch), so the file can
be mailed, attached to a CI run or opened offline. Rendering the same input twice gives the same
bytes.

The markup is Jinja2 templates, package data in ``templates/`` (``page.html.j2`` the frame and
``report.css``, ``macros.html.j2`` the shared fragments, ``comparison.html.j2`` this page); this
module shapes what they show (rows chosen, ordered and capped, numbers formatted) as plain values,
the charts as geometry (:mod:`.chart_geometry`: where each bar, point, whisker, tick and label goes)
that ``charts.html.j2`` draws as SVG. Chart labels are SVG text, laid out by the browser in its own
fonts (Hangul included). The environment autoescapes: every user-provided string is HTML-escaped by
the template that prints it, never by hand.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import html
import math
import pickle
from collections.abc import Iterable, Mapping, Sequence
from types import SimpleNamespace

import jinja2
import jinja2.bccache
import numpy as np
import pandas as pd
from markupsafe import Markup

from kebab_eval_pipeline.compare import chart_geometry
from kebab_eval_pipeline.compare.report import ci_disagrees, mde_text
from kebab_eval_pipeline.compare.systems import verdict_label
from kebab_eval_pipeline.compare.verdicts import VERDICTS
from kebab_eval_pipeline.contract import VERSION_KEYS
from kebab_eval_pipeline.foundation.number_text import is_null as _is_null
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
    "gold_changed": "#8250df",
}


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
    (values) or "–" (untestable fields).
    The markup is ``templates/comparison.html.j2``; :func:`comparison_view` shapes what it shows.
    """
    view = comparison_view(
        info, per_metric, per_query, per_slice, max_query_rows=max_query_rows, suspect_gold=suspect_gold
    )
    return _template("comparison.html.j2").render(view)


def comparison_view(
    info: Mapping,
    per_metric: pd.DataFrame,
    per_query: pd.DataFrame,
    per_slice: pd.DataFrame,
    *,
    max_query_rows: int = 300,
    suspect_gold: pd.DataFrame | None = None,
) -> dict:
    """What ``comparison.html.j2`` renders, as plain values: numbers formatted, nulls as None or
    their placeholder, rows selected, ordered and capped, the charts as geometry. Strings
    are left unescaped — the template's autoescaping escapes them, once."""
    has_baseline = info.get("run_a") is not None
    metrics = _records(per_metric)
    queries = _records(per_query)
    return {
        "title": f"kebab-eval comparison: {info.get('run_b')} vs {info.get('run_a') or 'no baseline'}",
        "has_baseline": has_baseline,
        "max_ids": _MAX_LISTED_IDS,
        **_header(info),
        **_warnings(info),
        "cards": _cards(metrics, has_baseline),
        **_versions(info),
        "charts": _charts(info, per_metric, per_slice, has_baseline),
        **_metrics_table(metrics, has_baseline),
        **_margins(info),
        "slices": _slices(info, per_slice),
        "notable": _notable_queries(info, queries, max_query_rows),
        "suspect": _suspect_gold(info, suspect_gold, max_query_rows),
        "flips": _flips(info, queries),
        "drift": _drift(info),
        "footer": _footer(info),
    }


# ---------------------------------------------------------------------------------------------
# Templates


@functools.cache
def _environment() -> jinja2.Environment:
    """The report templates (package data beside this module), autoescaped: every value a template
    prints is HTML-escaped unless it is :class:`~markupsafe.Markup` (macro output, the charts'
    SVG included). Block tags take their own line and newline (trim/lstrip), so a template line is
    an output line; undefined names fail instead of printing nothing."""
    options = {
        "autoescape": True,
        "finalize": _escape,
        "trim_blocks": True,
        "lstrip_blocks": True,
        "keep_trailing_newline": True,
        "undefined": jinja2.StrictUndefined,
    }
    return jinja2.Environment(
        loader=jinja2.PackageLoader("kebab_eval_pipeline.compare", "templates"),
        bytecode_cache=_bytecode_cache(options),
        **options,
    )


class _QuietBytecodeCache(jinja2.FileSystemBytecodeCache):
    """Jinja2's cache of compiled templates in a folder of this user's own (``_jinja2-cache-<uid>``
    in the temporary folder, mode 0700, checked to be ours): a run that renders a report loads the
    templates' code instead of compiling them (~0.07 s of every comparison). Jinja2 keys an entry
    by the template's file and checks its source; the environment's options and the Jinja2 version
    (which the code also depends on) are in the file names (:func:`_bytecode_cache`), so an edited
    template, other options or another Jinja2 compile again. A folder that cannot be read or
    written only costs the compile."""

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        # An unreadable entry, or a damaged one (cut short: Jinja2 lets the error reading its
        # source checksum escape): compiled again.
        try:
            super().load_bytecode(bucket)
        except (OSError, EOFError, ValueError, TypeError, pickle.UnpicklingError):
            bucket.reset()

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        with contextlib.suppress(OSError):
            super().dump_bytecode(bucket)


def _bytecode_cache(options: dict[str, object]) -> jinja2.BytecodeCache | None:
    named = {k: getattr(v, "__qualname__", v) for k, v in sorted(options.items())}
    digest = hashlib.sha256(repr((jinja2.__version__, named)).encode()).hexdigest()[:16]
    try:
        return _QuietBytecodeCache(pattern=f"__jinja2_kebab-eval-report-{digest}-%s.cache")
    except (OSError, RuntimeError):  # no private folder can be made: compile every time
        return None


def _escape(value: object) -> object:
    """Each printed value escaped by :func:`html.escape` before autoescaping sees it (markup passes
    through): the same characters escaped as markupsafe, but spelled as the report always spelled
    them (``&quot;``, ``&#x27;``, not ``&#34;``, ``&#39;``), so reports stay byte-comparable."""
    return value if hasattr(value, "__html__") else Markup(html.escape(str(value), quote=True))


def _template(name: str) -> jinja2.Template:
    return _environment().get_template(name)


# ---------------------------------------------------------------------------------------------
# Formatting: values to text (plain strings; the templates escape them)


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


def _p_text(value: object) -> str:
    if _is_null(value):
        return "–"
    return "<0.0001" if float(value) < 0.0001 else f"{float(value):.4f}"


def _text(value: object, null: str = "–") -> str:
    """A user-provided string as text; nulls and empty strings become ``null`` (default "–")."""
    return null if _is_null(value) or value == "" else str(value)


def _str_or_none(value: object) -> str | None:
    return None if _is_null(value) else str(value)


def _records(frame: pd.DataFrame) -> list[dict]:
    return frame.to_dict("records") if frame is not None and len(frame) else []


def _plural(n: int, noun: str) -> str:
    if n == 1:
        return f"1 {noun}"
    if noun.endswith("y"):
        return f"{n} {noun[:-1]}ies"
    return f"{n} {noun}es" if noun.endswith(("s", "sh", "ch")) else f"{n} {noun}s"


# ---------------------------------------------------------------------------------------------
# Page sections: what each shows, as plain values


def _header(info: Mapping) -> dict:
    return {
        "run_a": info.get("run_a"),
        "run_b": info.get("run_b"),
        "cross_system": bool(info.get("cross_system")),
        "systems_note": str(info.get("systems_note")).capitalize(),
        "baseline_note": info.get("baseline_note") or "",
        "created_a": _text(info.get("created_at_a")),
        "created_b": _text(info.get("created_at_b")),
    }


def _warnings(info: Mapping) -> dict:
    only_a, only_b = info.get("only_in_a") or [], info.get("only_in_b") or []
    changed = info.get("gold_changed") or []
    drift = (
        {"only_a": _plural(len(only_a), "query"), "only_b": len(only_b), "changed": len(changed)}
        if only_a or only_b or changed
        else None
    )
    return {"warnings": list(info.get("warnings") or []), "drift_warning": drift}


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


def _cards(metrics: list[dict], has_baseline: bool) -> list[dict]:
    """The headline cards: b's value, and with a baseline a's value, the delta and its marks; a
    metric null in both runs has no card."""
    by_name = {m["metric"]: m for m in metrics}
    cards = []
    for name in _headline_names(list(by_name)):
        m = by_name[name]
        if _is_null(m.get("b")) and _is_null(m.get("a")):
            continue
        cards.append(
            {
                "name": name,
                "b": _num(m.get("b")),
                "a": _num(m.get("a")),
                "delta": _signed(m.get("delta")),
                "direction": _direction(m),
                "significance": m.get("significance") or "",
            }
        )
    return cards


def _versions(info: Mapping) -> dict:
    """Rows (key, a, b as text or None, differs) of the versions table and its caption's values."""
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
    versions = []
    for key, a, b in rows:
        a, b = _str_or_none(a), _str_or_none(b)
        versions.append({"key": key, "a": a, "b": b, "differs": a != b})
    return {
        "versions": versions,
        "chunker_version_match": _text(info.get("chunker_version_match"), "null"),
        "matching_criterion": _text(info.get("matching_criterion"), "null"),
    }


def _value(metric: Mapping, run: str) -> str:
    """A run's value of a metric; counts (``n_*``) as whole numbers."""
    value = metric.get(run)
    if str(metric["metric"]).startswith("n_") and not _is_null(value) and float(value).is_integer():
        return str(int(value))
    return _num(value)


def _direction(metric: Mapping) -> str:
    d = metric.get("direction")
    return d if d in ("better", "worse", "same") else ""


def _metrics_table(metrics: list[dict], has_baseline: bool) -> dict:
    """The metrics table's rows; with a baseline, the metrics null in both runs (empty
    denominators, e.g. answer metrics of retrieval-only runs) are named apart instead."""
    if not has_baseline:
        rows = [{"metric": m["metric"], "b": _value(m, "b")} for m in metrics]
        return {
            "has_metrics": bool(metrics),
            "metric_rows": rows,
            "null_metrics": [],
            "null_metrics_count": "",
        }
    null_both = [_is_null(m.get("a")) and _is_null(m.get("b")) for m in metrics]
    rows = []
    for m in (m for m, null in zip(metrics, null_both, strict=True) if not null):
        direction = _direction(m)
        ci_null = _is_null(m.get("ci_low")) or _is_null(m.get("ci_high"))
        p_adjusted = m.get("p_adjusted")
        note = m.get("test_note")
        rows.append(
            {
                "metric": m["metric"],
                "a": _value(m, "a"),
                "b": _value(m, "b"),
                "delta": _signed(m.get("delta")),
                "direction": direction,
                "relative": _percent(m.get("rel_change")),
                "relative_direction": "" if _is_null(m.get("rel_change")) else direction,
                "p": _p_text(m.get("p_value")),
                # The adjusted p and its family (H = Holm, BH); – for reports stored before adjustment.
                "p_adjusted": _p_text(p_adjusted),
                "adjusted_by": ""
                if _is_null(p_adjusted)
                else {"holm": "H", "bh": "BH"}.get(str(m.get("adjusted_by")), ""),
                "ci": "–"
                if ci_null
                else f"[{_signed(m['ci_low'])}, {_signed(m['ci_high'])}]"
                + ("‡" if ci_disagrees(SimpleNamespace(**m)) else ""),
                "mde": mde_text(SimpleNamespace(**m)),
                "significance": m.get("significance") or "",
                "n": _num(m.get("n_paired"), "–"),
                "test": None if _is_null(m.get("test")) or m.get("test") == "" else str(m["test"]),
                "test_note": None if _is_null(note) or not note else str(note),
            }
        )
    null_metrics = [str(m["metric"]) for m, null in zip(metrics, null_both, strict=True) if null]
    return {
        "has_metrics": bool(metrics),
        "metric_rows": rows,
        "null_metrics": null_metrics,
        "null_metrics_count": _plural(len(null_metrics), "metric"),
    }


def _margins(info: Mapping) -> dict:
    """The non-inferiority / equivalence decisions of the regression gates' margins ([] when none)."""
    rows = []
    for m in info.get("margins") or []:
        claim = (
            f"no worse by more than {m['margin']:g}"
            if m["kind"] == "non_inferior"
            else f"within ±{m['margin']:g}"
        )
        rows.append(
            {
                "metric": m["metric"],
                "claim": claim,
                "verdict": m.get("verdict") or "no bound",
                "css": "better" if m.get("passed") else "worse",
                "bound_low": _signed(m.get("bound_low"), "–"),
                "bound_high": _signed(m.get("bound_high"), "–"),
                "p": _p_text(m.get("p_value")),
                "text": m.get("text"),
            }
        )
    return {"margins": rows, "margin_level": f"{1 - float(info.get('alpha', 0.05)):.0%}"}


def _slices(info: Mapping, per_slice: pd.DataFrame) -> dict | None:
    """The slices whose change is significant after Benjamini–Hochberg, most significant first
    (None without slice tests)."""
    if per_slice is None or "p_bh" not in per_slice.columns or not per_slice["p_value"].notna().any():
        return None
    alpha = float(info.get("alpha", 0.05))
    tested = per_slice[per_slice["p_value"].notna()]
    flagged = tested[tested["p_bh"] < alpha].sort_values(["p_bh", "dimension", "value", "metric"])
    rows = [
        {
            "dimension": r["dimension"],
            "value": r["value"],
            "metric": r["metric"],
            "a": _value(r, "a"),
            "b": _value(r, "b"),
            "delta": _signed(r.get("delta")),
            "n": _num(r.get("n_paired"), "–"),
            "p": _p_text(r.get("p_value")),
            "p_bh": _p_text(r.get("p_bh")),
        }
        for r in _records(flagged)
    ]
    return {"rows": rows, "tested": len(tested), "alpha": f"{alpha:g}"}


def _flip_list(q: Mapping) -> list[str]:
    flips = [q.get("refusal_flip"), q.get("groundedness_flip")]
    return [str(f) for f in flips if not _is_null(f) and f]


def _notable_queries(info: Mapping, queries: list[dict], max_rows: int) -> dict:
    """Regressions, then losses, then wins; within each, the largest reciprocal-rank change first;
    at most ``max_rows`` (``more``: how many beyond). ``empty``: the note when there are none."""
    if info.get("run_a") is None:
        return {"empty": "No baseline: no per-query verdicts."}
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
        return {"empty": "No regressions, losses or wins: every query is a draw or not scored."}
    fields = {str(g.get("query_id")): g.get("fields") or [] for g in info.get("gold_changed") or []}
    rows = []
    for q in notable[:max_rows]:
        qid = str(q["query_id"])
        changed = not _is_null(q.get("gold_changed")) and bool(q.get("gold_changed"))
        rows.append(
            {
                "query_id": qid,
                "verdict": q["verdict"],
                "label": verdict_label(q["verdict"], info),
                "a_rank": _num(q.get("a_rank"), "–"),
                "b_rank": _num(q.get("b_rank"), "–"),
                "category": _text(q.get("category")),
                "flips": _flip_list(q),
                "gold_fields": list(fields.get(qid, [])) if changed else None,
                "note": _text(q.get("note"), ""),
            }
        )
    tally = {v: sum(q["verdict"] == v for q in notable) for v in _NOTABLE}
    if info.get("cross_system"):  # neutral words are phrases, not nouns to pluralise
        counts = " · ".join(f"{verdict_label(v, info)}: {n}" for v, n in tally.items())
    else:
        counts = " · ".join(_plural(n, v) for v, n in tally.items())
    return {"empty": None, "rows": rows, "more": max(len(notable) - max_rows, 0), "counts": counts}


def _suspect_gold(info: Mapping, queue: pd.DataFrame | None, max_rows: int) -> dict:
    """b's unjudged hits above its first relevant hit in losses and regressions, worst first; at
    most ``max_rows``. ``empty``: the note when there is no table to show."""
    if info.get("run_a") is None:
        return {"empty": "No baseline: no suspect gold."}
    if queue is None:
        return {"empty": "This comparison was stored before the suspect-gold queue existed."}
    if len(queue) == 0:
        return {"empty": "None: no loss or regression has an unjudged hit above b's first relevant hit."}
    rows = []
    for q in _records(queue.head(max_rows)):
        where = _text(q.get("doc_path") if not _is_null(q.get("doc_path")) else q.get("doc_id"), "")
        if not _is_null(q.get("line_start")):
            end = "" if _is_null(q.get("line_end")) else f"-{int(q['line_end'])}"
            where += f":{int(q['line_start'])}{end}"
        heading = q.get("heading_path")
        judge = None
        if not _is_null(q.get("judge_relevant")):
            score = "" if _is_null(q.get("judge_score")) else f" ({float(q['judge_score']):g}/5)"
            judge = ("relevant" if q["judge_relevant"] else "not relevant") + score
        rows.append(
            {
                "query_id": q["query_id"],
                "question": _text(q.get("question")),
                "verdict": q["verdict"],
                "label": verdict_label(q["verdict"], info),
                "a_rank": _num(q.get("a_rank"), "–"),
                "b_rank": _num(q.get("b_rank"), "–"),
                "hit_rank": _num(q.get("hit_rank"), "–"),
                "chunk_id": _text(q.get("chunk_id"), ""),
                "where": where,
                "heading": [str(h) for h in heading] if heading is not None else [],
                "snippet": _text(q.get("snippet"), ""),
                "judge": judge,
                "judge_reasoning": _text(q.get("judge_reasoning"), ""),
            }
        )
    return {
        "empty": None,
        "rows": rows,
        "more": max(len(queue) - max_rows, 0),
        "hits": _plural(len(queue), "unjudged hit"),
        "queries": _plural(int(queue["query_id"].nunique()), "query"),
    }


def _flips(info: Mapping, queries: list[dict]) -> dict:
    """Each answer flip with its count (the stored ``flip_counts``, plus any flip the queries show)
    and its query ids, sorted."""
    if info.get("run_a") is None:
        return {"empty": "No baseline: no answer flips."}
    counts = dict(info.get("flip_counts") or {})
    examples: dict[str, list[str]] = {}
    for q in queries:
        for flip in _flip_list(q):
            examples.setdefault(flip, []).append(str(q["query_id"]))
            counts.setdefault(flip, 0)
    if not counts:
        return {"empty": "No answer flips (neither run produced answers for the same queries)."}
    rows = [{"flip": flip, "n": int(n), "ids": sorted(examples.get(flip, []))} for flip, n in counts.items()]
    return {"empty": None, "rows": rows}


def _drift(info: Mapping) -> dict:
    """The queries only in a, only in b, and with changed gold (query id, changed fields)."""
    if info.get("run_a") is None:
        return {"empty": "No baseline: no golden-set drift to report."}
    changed = [
        {"query_id": g.get("query_id"), "fields": list(g.get("fields") or [])}
        for g in info.get("gold_changed") or []
    ]
    return {
        "empty": None,
        "only_a": list(info.get("only_in_a") or []),
        "only_b": list(info.get("only_in_b") or []),
        "changed": changed,
    }


def _footer(info: Mapping) -> list[str]:
    bits = ["Generated by kebab-eval"]
    if info.get("seed") is not None:
        bits.append(f"paired tests seeded with {info['seed']}")
    if info.get("min_queries") is not None:
        bits.append(f"min_queries {info['min_queries']}")
    return bits


# ---------------------------------------------------------------------------------------------
# Charts


def _charts(
    info: Mapping, per_metric: pd.DataFrame, per_slice: pd.DataFrame, has_baseline: bool
) -> list[dict]:
    """The three figures: id, kind (``forest``, ``bars`` or ``heatmap``: the macro of
    ``charts.html.j2`` that draws it), caption, geometry (:mod:`.chart_geometry`'s output, or None
    for the no-data note ``empty``), extra."""
    no_baseline = "No baseline: nothing to compare."
    charts = (
        (
            "forest",
            "Metric deltas (b − a) with 95% confidence intervals from the paired tests",
            _delta_chart(per_metric) if has_baseline else None,
            "No metric has a paired test (no queries scored by both runs).",
        ),
        (
            "bars",
            "Per-query verdicts",
            _verdict_chart(info.get("verdict_counts") or {}, info) if has_baseline else None,
            "No per-query verdicts.",
        ),
        (
            "heatmap",
            "Deltas (b − a) per category; green is better",
            _category_chart(per_slice) if has_baseline else None,
            "No per-category deltas (no query has a category).",
        ),
    )
    return [
        {
            "id": chart_id,
            "kind": kind,
            "caption": caption,
            "geometry": None if chart is None else chart[0],
            "extra": "" if chart is None else chart[1],
            "empty": empty if has_baseline else no_baseline,
        }
        for chart_id, (kind, caption, chart, empty) in zip(CHART_IDS, charts, strict=True)
    ]


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


def _delta_chart(per_metric: pd.DataFrame) -> tuple[dict, str] | None:
    """Forest plot of ``paired_delta`` with [ci_low, ci_high] for the testable metrics (headline
    order, at most ``_MAX_DELTA_ROWS``), coloured by direction, symmetric about zero."""
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

    def num(value: object) -> float:
        return math.nan if _is_null(value) else float(value)

    rows = []
    for m in shown:
        delta, low, high = num(m["paired_delta"]), num(m.get("ci_low")), num(m.get("ci_high"))
        direction = _direction(m) or "same"
        ci = "" if math.isnan(low) or math.isnan(high) else f" [{_signed(low)}, {_signed(high)}]"
        sig = f" {m['significance']}" if m.get("significance") else ""
        title = f"{m['metric']}: {_signed(delta)}{ci}{sig} ({direction})"
        rows.append(chart_geometry.Interval(delta, low, high, _COLOURS[direction], title=title))
    ends = [abs(v) for r in rows for v in (r.value, r.low, r.high) if not math.isnan(v)]
    span = max(ends) or 0.05
    directions = [_direction(m) or "same" for m in shown]
    geometry = chart_geometry.forest(
        [f"{m['metric']}  {m.get('significance') or ''}".rstrip() for m in shown],
        # Symmetric: left of zero reads as "b lower" whichever side the data lean.
        [chart_geometry.Panel(rows, (-1.15 * span, 1.15 * span), zero_line=True)],
        axis_label="paired delta b − a  (95% CI; * p<0.05, ** p<0.01, *** p<0.001)",
        legend=[(d, _COLOURS[d]) for d in ("better", "worse", "same") if d in directions],
    )
    return geometry, extra


def _verdict_chart(counts: Mapping[str, int], info: Mapping | None = None) -> tuple[dict, str] | None:
    """Bars per verdict: win/loss/regression/draw always, the others when non-zero (named by
    :func:`~.systems.verdict_label`: neutral words in a comparison of two systems)."""
    shown = [v for v in VERDICTS if v in _MAIN_VERDICTS or counts.get(v, 0)]
    values = [int(counts.get(v, 0)) for v in shown]
    if not sum(values):
        return None
    names = [verdict_label(v, info or {}) for v in shown]
    geometry = chart_geometry.bars(names, values, [_COLOURS[v] for v in shown], axis_label="queries")
    return geometry, f"{sum(values)} queries"


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
    geometry = chart_geometry.heatmap(row_labels, list(grid.columns), values.tolist(), span=span)
    return geometry, extra
