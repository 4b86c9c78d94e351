"""Render a comparison as Markdown (shown in the Dagster UI and written by the CLI)."""

from __future__ import annotations

import math

import pandas as pd

from kebab_eval_pipeline.compare.systems import verdict_label
from kebab_eval_pipeline.markdown_text import md_cell, md_code, md_text
from kebab_eval_pipeline.metrics import catalogue
from kebab_eval_pipeline.systems.identity import label as system_label

VERSION_KEYS = (
    "chunker_version",
    "embedding_model",
    "embedding_version",
    "prompt_template_version",
    "index_version",
    "parser_version",
)


def _fmt(x) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)) or x is pd.NA:
        return "null"
    if isinstance(x, float):
        return f"{x:.4f}"
    return str(x)


def _signed(x) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "null"
    return f"{x:+.4f}"


def _p(p) -> str:
    return "–" if p is None or pd.isna(p) else f"{p:.4g}"


def _ci(low, high) -> str:
    if low is None or high is None or pd.isna(low) or pd.isna(high):
        return "–"
    return f"[{low:+.4f}, {high:+.4f}]"


_ARROWS = {"better": "▲", "worse": "▼", "same": "="}


def _rescored(info: dict) -> str:
    """Which runs' numbers below were re-scored, and which are their own reports' (fallbacks only)."""
    rescored = info.get("rescored")
    if rescored is None or info.get("chunker_version_match") in (None, "exact"):
        return ""
    if not rescored:
        return "; both runs' own stored scores"
    kept = [r for r in ("a", "b") if r not in rescored]
    text = "; re-scored: " + ", ".join(f"run {r}" for r in rescored)
    return text + (f"; run {kept[0]}'s own stored scores" if kept else "")


def render_markdown(
    info: dict,
    per_metric: pd.DataFrame,
    verdicts: pd.DataFrame,
    per_slice: pd.DataFrame | None = None,
    max_rows: int = 25,
) -> str:
    """A self-contained Markdown report (rendered in the Dagster UI, written by the CLI):
    warnings, versions side by side, the matching mode, per-query verdicts and answer flips,
    metric deltas with paired p-values, CIs and significance marks, per-category deltas,
    notable queries and golden-set drift."""
    a, b = info["run_a"], info["run_b"]
    # Every value below that a user or a system supplied goes through md_* (reporting/markdown.py).
    if info.get("cross_system"):  # two systems: which did better, not what regressed (compare/systems.py)
        lines = [
            f"# Comparison of two systems: {md_code(b)} vs {md_code(a)}",
            "",
            f"**{md_text(str(info.get('systems_note')).capitalize())}.** The differences below are "
            "between two systems, not regressions of one.",
            "",
        ]
    else:
        lines = [f"# Comparison: {md_code(b)} vs baseline {md_code(a)}", ""]
    lines += [md_text(info.get("baseline_note")), ""]
    for warning in info.get("warnings", []):
        lines.append(f"> ⚠ {md_text(warning)}")
    if info.get("warnings"):
        lines.append("")
    lines += [
        "## Versions",
        "",
        f"| | {md_code(a, in_table=True)} | {md_code(b, in_table=True)} |",
        "|---|---|---|",
    ]
    va, vb = info.get("versions_a", {}), info.get("versions_b", {})
    for key in VERSION_KEYS:
        marker = "" if va.get(key) == vb.get(key) else " ⚠"
        lines.append(f"| {key}{marker} | {md_cell(_fmt(va.get(key)))} | {md_cell(_fmt(vb.get(key)))} |")
    sa, sb = info.get("system_a", {}), info.get("system_b", {})
    lines.append(
        f"| system{' ⚠' if info.get('cross_system') else ''} | {md_cell(system_label({'system': sa}))} "
        f"| {md_cell(system_label({'system': sb}))} |"
    )
    ga, gb = info.get("golden_a", {}), info.get("golden_b", {})
    lines.append(
        f"| golden sha256 | {md_cell(str(ga.get('sha256'))[:12])} | {md_cell(str(gb.get('sha256'))[:12])} |"
    )
    lines += [
        "",
        f"**chunker_version_match:** {md_code(info['chunker_version_match'])} "
        f"(per-query matching criterion: {md_code(info.get('matching_criterion'))}" + _rescored(info) + ")",
        "",
    ]
    counts = info["verdict_counts"]
    lines += [
        "## Per-query verdicts",
        "",
        " · ".join(
            f"**{verdict_label(k, info)}** {v}"
            for k, v in counts.items()
            if v or k in ("win", "loss", "regression", "draw")
        ),
        "",
    ]
    flips = {k: v for k, v in info.get("flip_counts", {}).items() if v}
    if flips:
        lines += ["Answer flips: " + " · ".join(f"**{k}** {v}" for k, v in flips.items()), ""]
    lines += [
        "## Metrics (delta = b − a)",
        "",
        f"Paired tests over the queries both runs scored (seed {info.get('seed', 0)}{_resamples(info)}): "
        "exact McNemar "
        "for 0/1 scores, sign-flip randomization otherwise; 95% CI by paired bootstrap. "
        "Significance: \\* p < 0.05, \\*\\* p < 0.01, \\*\\*\\* p < 0.001; "
        "▲ better / ▼ worse; † fewer paired queries than min_queries.",
        "",
        "| metric | a | b | delta | relative | p (paired) | 95% CI | sig | test |",
        "|---|---:|---:|---:|---:|---:|---|---|---|",
    ]
    min_queries = info.get("min_queries")
    for row in per_metric.itertuples(index=False):
        arrow = _ARROWS.get(row.direction, "") if not pd.isna(row.direction) else ""
        few = (
            "†"
            if min_queries is not None and not pd.isna(row.n_paired) and row.n_paired < min_queries
            else ""
        )
        sig = str(row.significance).replace("*", "\\*") if not pd.isna(row.significance) else ""
        cells = [
            md_cell(row.metric),
            _fmt(row.a),
            _fmt(row.b),
            f"{_signed(row.delta)} {arrow}".strip(),
            _signed(row.rel_change),
            _p(row.p_value) + few,
            _ci(row.ci_low, row.ci_high),
            sig,
            "–" if pd.isna(row.test) else md_cell(row.test),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines += _category_lines(per_slice)
    notable = verdicts[verdicts["verdict"].isin(["regression", "loss", "win"])]
    order = {"regression": 0, "loss": 1, "win": 2}
    notable = notable.sort_values(
        ["verdict", "query_id"], key=lambda s: s.map(order) if s.name == "verdict" else s
    )
    if len(notable):
        lines += [
            "",
            "## Notable queries",
            "",
            "| query | verdict | a rank | b rank | note |",
            "|---|---|---:|---:|---|",
        ]
        for row in notable.head(max_rows).itertuples(index=False):
            lines.append(
                f"| {md_cell(row.query_id)} | {md_cell(verdict_label(row.verdict, info))} "
                f"| {_fmt(row.a_rank)} | {_fmt(row.b_rank)} | {md_cell(row.note)} |"
            )
        if len(notable) > max_rows:
            lines.append(f"| … | {len(notable) - max_rows} more in the per-query table | | | |")
    flipped = verdicts[verdicts["refusal_flip"].notna() | verdicts["groundedness_flip"].notna()]
    if len(flipped):
        lines += ["", "## Answer flips", "", "| query | refusal | groundedness |", "|---|---|---|"]
        for row in flipped.head(max_rows).itertuples(index=False):
            lines.append(
                f"| {md_cell(row.query_id)} "
                f"| {'' if pd.isna(row.refusal_flip) else md_cell(row.refusal_flip)} "
                f"| {'' if pd.isna(row.groundedness_flip) else md_cell(row.groundedness_flip)} |"
            )
        if len(flipped) > max_rows:
            lines.append(f"| … | {len(flipped) - max_rows} more in the per-query table | |")
    drift_a, drift_b = info.get("only_in_a", []), info.get("only_in_b", [])
    changed = info.get("gold_changed", [])
    if drift_a or drift_b or changed:
        lines += ["", "## Golden-set drift", ""]
        if drift_a:
            lines.append(f"- only in {md_code(a)} ({len(drift_a)}): {_capped(drift_a, max_rows)}")
        if drift_b:
            lines.append(f"- only in {md_code(b)} ({len(drift_b)}): {_capped(drift_b, max_rows)}")
        if changed:
            lines.append(
                f"- gold changed ({len(changed)}): "
                + _capped(
                    [f"{c['query_id']} ({', '.join(c['fields'])})" for c in changed[: max_rows + 1]],
                    max_rows,
                    total=len(changed),
                )
            )
    return "\n".join(lines) + "\n"


def _capped(items: list[str], max_rows: int, total: int | None = None) -> str:
    """The first ``max_rows`` of ``items`` (Markdown-escaped), then how many more: a golden-set
    drift of a million queries must not become a million-name line in the UI."""
    total = len(items) if total is None else total
    text = ", ".join(map(md_text, items[:max_rows]))
    return text + (f", … {total - max_rows} more (the JSON report lists all)" if total > max_rows else "")


def _resamples(info: dict) -> str:
    n = info.get("resamples")
    return f", {n:,} resamples for the randomization tests and the bootstrap" if n else ""


#: Metrics shown in the per-category tables, when the runs have them: the catalogue's summary
#: list without operational rates (a category is about the quality of its answers).
CATEGORY_METRICS: tuple[str, ...] = tuple(catalogue.summary_names(families=catalogue.QUALITY_FAMILIES))


def _category_lines(per_slice: pd.DataFrame | None) -> list[str]:
    if per_slice is None or len(per_slice) == 0:
        return []
    cat = per_slice[(per_slice["dimension"] == "category") & per_slice["metric"].isin(CATEGORY_METRICS)]
    if len(cat) == 0:
        return []
    keep = [m for m in CATEGORY_METRICS if m in set(cat["metric"])]
    pivot = cat.pivot_table(index="value", columns="metric", values="delta", aggfunc="first", dropna=False)
    lines = [
        "",
        "## Delta by category",
        "",
        "| category | " + " | ".join(keep) + " |",
        "|---|" + "---:|" * len(keep),
    ]
    for value, row in pivot.iterrows():
        lines.append(f"| {md_cell(value)} | " + " | ".join(_signed(_float(row.get(m))) for m in keep) + " |")
    return lines


def _float(x) -> float | None:
    return None if x is None or pd.isna(x) else float(x)
