"""The health report as people and programs read it: a line per check, Markdown tables of the
offenders (the Dagster UI) and one JSON document (``kebab-eval golden health --format json``)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from kebab_eval_pipeline.foundation.json_records import json_records
from kebab_eval_pipeline.foundation.markdown_text import md_cell
from kebab_eval_pipeline.golden_health.findings import CHECK_KINDS, HealthReport

#: What each check reports, in a few words (check descriptions, the text output).
CHECK_TITLES: dict[str, str] = {
    "unsupported_answerable": "answerable queries with no relevant support",
    "stale_supports": "supports the index no longer holds",
    "near_duplicates": "duplicate question pairs",
    "leakage": "questions quoting the corpus verbatim",
    "small_slices": "slices too small to conclude on",
    "suspect_gold_queue": "suspect-gold hits of the latest comparison",
}
#: The finding columns a check's table shows (the others are always null for its kinds).
CHECK_COLUMNS: dict[str, tuple[str, ...]] = {
    "unsupported_answerable": ("query_id", "detail"),
    "stale_supports": ("query_id", "document", "detail"),
    "near_duplicates": ("kind", "query_id", "other_query_id", "score", "detail"),
    "leakage": ("query_id", "document", "score", "detail"),
    "small_slices": ("slice", "score", "detail"),
    "suspect_gold_queue": ("query_id", "score", "detail"),
}


def outcome(report: HealthReport, check: str) -> str:
    """``ok``, ``warn``, ``fail`` (the blocking check) or ``not checked``."""
    passed = report.passed(check)
    if passed is None:
        return "not checked"
    if passed:
        return "ok"
    blocking = check == "unsupported_answerable" and report.settings.unsupported_answerable == "fail"
    return "fail" if blocking else "warn"


def markdown_table(report: HealthReport, check: str, limit: int) -> str:
    """The check's findings as a Markdown table, at most ``limit`` rows (a line says how many more)."""
    rows = report.of_check(check)
    if rows.empty:
        return "No findings."
    columns = CHECK_COLUMNS[check]
    shown = rows.head(limit)
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for record in shown.to_dict("records"):
        cells = []
        for c in columns:
            value = record[c]
            if c == "score" and not pd.isna(value):
                value = f"{value:g}"
            cells.append(md_cell("" if pd.isna(value) else value))
        lines.append("| " + " | ".join(cells) + " |")
    if len(rows) > limit:
        lines.append(
            f"\n… and {len(rows) - limit} more (the full table: `kebab-eval golden health --format json`)."
        )
    return "\n".join(lines)


def summary_lines(report: HealthReport, golden: dict[str, Any]) -> list[str]:
    """A header naming the golden version, then a line per check: outcome, count, what it counts."""
    lines = [
        f"golden set {golden.get('name') or '(unnamed)'} sha256 {str(golden.get('sha256', ''))[:12]}: "
        f"{report.summary['queries']} queries"
    ]
    for check, title in CHECK_TITLES.items():
        count = report.summary[check]
        shown = "–" if count is None else str(count)
        lines.append(f"  {outcome(report, check):<11} {check}: {shown} — {title}")
    return lines


def text_lines(report: HealthReport, golden: dict[str, Any]) -> list[str]:
    """The text report: :func:`summary_lines`, each check's findings (all of them), the notes."""
    lines = summary_lines(report, golden)
    for check in CHECK_KINDS:
        rows = report.of_check(check)
        if rows.empty:
            continue
        lines.append(f"\n{check}:")
        for r in rows.itertuples(index=False):  # output formatting only, one line per finding
            who = r.slice if pd.isna(r.query_id) else r.query_id
            if not pd.isna(r.other_query_id):
                who = f"{who} ~ {r.other_query_id}"
            where = "" if pd.isna(r.document) else f" [{r.document}]"
            lines.append(f"  {who}{where}: {r.detail}")
    lines += [f"note: {n}" for n in report.notes.values()]
    return lines


def json_document(report: HealthReport, golden: dict[str, Any]) -> dict[str, Any]:
    """``{"golden": {name, sha256, source}, "summary": {...}, "checks": {check: outcome},
    "blocking_failure", "findings": [row, ...], "notes": {check: why not checked}}``: every
    finding, nulls as null."""
    return {
        "golden": golden,
        "summary": report.summary,
        "checks": {check: outcome(report, check) for check in CHECK_KINDS},
        "blocking_failure": report.blocking_failure,
        "findings": json_records(report.findings),
        "notes": report.notes,
    }
