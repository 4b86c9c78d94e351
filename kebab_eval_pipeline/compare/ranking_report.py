"""A ranking of N runs as files: Markdown (the Dagster UI, the terminal), JSON and standalone HTML.

``ranking.md``, ``ranking.html`` and ``ranking.json`` are written by ``kebab-eval compare A B C …
--out DIR`` and stored with the ``run_ranking`` asset, so a ranking reads the same wherever it was
made. Every run id, metric name, version string and warning passes through
:mod:`~kebab_eval_pipeline.foundation.markdown_text` (Markdown) or ``html.escape`` (HTML).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from kebab_eval_pipeline.compare.ranking import Ranking, direction_word
from kebab_eval_pipeline.foundation.json_records import json_records, json_text
from kebab_eval_pipeline.foundation.markdown_text import md_cell, md_code, md_text
from kebab_eval_pipeline.foundation.number_text import ci_text, is_null, shown, signed

__all__ = [
    "RANKING_FILES",
    "ranking_document",
    "ranking_files",
    "render_json",
    "render_markdown",
    "superscript",
]

RANKING_FILES = ("ranking.md", "ranking.html", "ranking.json")
_SUPERSCRIPT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


def superscript(rows: list[int]) -> str:
    """Rows as superscript digits (``[2, 3]`` → ``²³``); with ten or more runs a row number has
    several digits, so they are separated (``²˒¹⁰``)."""
    parts = [str(r).translate(_SUPERSCRIPT) for r in rows]
    return ("˒" if any(r >= 10 for r in rows) else "").join(parts)


def _p(p: Any) -> str:
    if is_null(p):
        return "–"
    return "< 0.0001" if float(p) < 0.0001 else f"{float(p):.4f}"


def cell(row: dict) -> str:
    """One run's cell for one metric: mean, (rank), letters, superscripts — plain text, no markup
    (``0.9130 (1) a ⁴``)."""
    rank = row.get("rank")
    parts = [shown(row.get("mean"))]
    if rank is not None and rank is not pd.NA:
        parts.append(f"({int(rank)})")
    if row.get("letters"):
        parts.append(str(row["letters"]))
    sup = superscript(list(row.get("better_than_rows") or []))
    if sup:
        parts.append(sup)
    return " ".join(parts)


def render_markdown(ranking: Ranking) -> str:
    """The ranking as Markdown: the table (row, run, system, chunker, then per metric the mean,
    its rank, its letters and superscripts), warnings, the pairwise tests per metric (delta, 95%
    CI, raw and Holm-adjusted p, the better run) and how to read it all."""
    info = ranking.info
    order: list[str] = info["order"]
    metrics: list[str] = info["metrics"]
    detail = info.get("runs_detail") or {}
    by = {(r["metric"], r["run_id"]): r for r in ranking.per_run.to_dict("records")}
    lines = [f"# Ranking of {len(order)} runs", ""]
    lines.append(
        f"{len(order)} runs ranked on {', '.join(md_code(m) for m in metrics)} over the "
        f"{info['n_common']} queries common to all runs (per metric, those of them it scores in every "
        "run: n in the pairwise tests). "
        f"Significance: paired tests at α = {info['alpha']:g}, p-values adjusted by "
        f"{md_text(info['family'])}; seed {info['seed']}, {info['resamples']} resamples."
    )
    lines.append("")
    warnings = info.get("warnings") or []
    if warnings:
        lines += ["**Warnings**", ""] + [f"- {md_text(w)}" for w in warnings] + [""]
    header = ["#", "run", "system", "chunker"] + [f"{md_cell(m)} ({direction_word(m)})" for m in metrics]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "|".join(["---:", "---", "---", "---"] + ["---"] * len(metrics)) + "|")
    for i, run in enumerate(order, start=1):
        d = detail.get(run, {})
        system = d.get("system") or {}
        label = " ".join(str(x) for x in (system.get("kind"), system.get("mode")) if x)
        cells = [
            str(i),
            md_code(run, in_table=True),
            md_cell(label),
            md_code(d.get("chunker_version") or "", True),
        ]
        # Numbers, generated letters and superscripts only: nothing to escape (md_text would
        # backslash the "." of a number that opens the cell).
        cells += [cell(by[(m, run)]) for m in metrics]
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "Each cell: the mean over the queries the metric scores in every run, (its rank: 1 is best, "
        "ties share a rank), its letters — runs sharing a letter are not significantly different "
        "(compact letter display, Piepho 2004) — and in superscript the rows (#) of the runs it is "
        "significantly better than.",
        "",
        "## Pairwise tests (delta = b − a)",
        "",
    ]
    for metric in metrics:
        pairs = ranking.pairs[ranking.pairs["metric"] == metric]
        tests = sorted({str(t) for t in pairs["test"].dropna()})
        n = next((int(x) for x in pairs["n"].dropna()), 0)
        lines.append(f"### {md_text(metric)} (n = {n}{', ' + ', '.join(tests) if tests else ''})")
        lines.append("")
        lines.append("| a | b | mean a | mean b | delta | 95% CI | p | p (Holm) | significantly better |")
        lines.append("|---|---|---:|---:|---:|---|---:|---:|---|")
        for p in pairs.to_dict("records"):
            better = p.get("better")
            better_text = md_code(better, True) if isinstance(better, str) and better else ""
            lines.append(
                f"| {md_code(p['run_a'], True)} | {md_code(p['run_b'], True)} | {shown(p['mean_a'])} | "
                f"{shown(p['mean_b'])} | {signed(p['delta'])} | {ci_text(p['ci_low'], p['ci_high'])} | "
                f"{_p(p['p_value'])} | {_p(p['p_adjusted'])} | {better_text} |"
            )
        lines.append("")
    lines.append(
        "p: exact McNemar for 0/1 scores, a sign-flip randomization test for graded ones; the CI "
        "of the delta is a paired bootstrap percentile interval. p (Holm): adjusted over the "
        f"{info['n_pairs']} pairs of the metric; significant when below α = {info['alpha']:g}."
    )
    matching = info.get("matching") or {}
    if matching:
        rescored = matching.get("rescored") or []
        lines += [
            "",
            f"Matching: {md_code(matching.get('mode'))}"
            + (" (each run's own stored scores)" if matching.get("mode") == "exact" else "")
            + (f"; re-scored: {', '.join(md_code(r) for r in rescored)}" if rescored else ""),
        ]
    dropped = {run: n for run, n in (info.get("dropped") or {}).items() if n}
    if dropped:
        lines += [
            "",
            "Queries not in every run (not ranked): "
            + ", ".join(f"{md_code(run)} {n}" for run, n in dropped.items())
            + ".",
        ]
    return "\n".join(lines) + "\n"


def ranking_document(ranking: Ranking) -> dict[str, Any]:
    """The ranking as one JSON-ready mapping: ``info``'s keys, then ``per_run`` and ``pairs`` as
    records (nulls as None; ``better_than`` lists)."""
    return {
        **{k: v for k, v in ranking.info.items()},
        "per_run": json_records(ranking.per_run),
        "pairs": json_records(ranking.pairs),
    }


def render_json(ranking: Ranking) -> str:
    """:func:`ranking_document` as indented strict JSON (no NaN: nulls)."""
    return json_text(ranking_document(ranking))


def ranking_files(ranking: Ranking) -> dict[str, bytes]:
    """:data:`RANKING_FILES` name → content (the Markdown is ``ranking.markdown``, rendered if unset)."""
    from kebab_eval_pipeline.compare.ranking_html import render_html

    markdown = ranking.markdown or render_markdown(ranking)
    return {
        "ranking.md": markdown.encode("utf-8"),
        "ranking.html": render_html(ranking).encode("utf-8"),
        "ranking.json": render_json(ranking).encode("utf-8"),
    }
