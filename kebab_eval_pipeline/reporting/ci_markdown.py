"""One Markdown renderer for CI, in two sizes: the GitHub job summary (:data:`SUMMARY`) and the
PR comment (:data:`COMMENT`, which starts with :data:`MARKER` so a workflow can find and update
its own comment instead of adding one per push).

Both say, in this order: the verdict (blocking gates failed or not) with the checks' tally (the
gates and the system-health verdict, counted as JUnit counts its testcases), the
headline metrics (with the baseline, delta, adjusted p and significance marks when there is a
comparison), the gates, the queries that got worse, and a link to the full report. Every list is
capped and every user- or system-supplied text is escaped and cut
(:mod:`kebab_eval_pipeline.foundation.markdown_text`), so the output stays small whatever the
golden set holds: GitHub refuses a job summary over 1 MiB and a comment over 65,536 characters.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from kebab_eval_pipeline.compare.report import arrow_text, mde_text
from kebab_eval_pipeline.foundation.markdown_text import md_cell, md_code, md_text
from kebab_eval_pipeline.foundation.number_text import p_text, shown, signed
from kebab_eval_pipeline.reporting.ci_view import CiView
from kebab_eval_pipeline.reporting.gate_text import (
    configured_bound,
    exact,
    gate_title,
    health_outcome,
    health_title,
    outcome,
    tally,
    tally_text,
)
from kebab_eval_pipeline.reporting.not_measured import NOT_MEASURED

MARKER = "<!-- kebab-eval -->"
#: A cell's text is cut to this many characters (a note or query id can be any length).
CELL_CHARS = 160


@dataclass(frozen=True)
class Size:
    """How much one rendering shows: headline metrics, gate rows (``all_gates`` False lists only
    the gates that did not pass, the tally counts the rest) and worse queries."""

    max_metrics: int
    max_gates: int
    max_regressions: int
    all_gates: bool
    marker: bool


SUMMARY = Size(max_metrics=18, max_gates=60, max_regressions=10, all_gates=True, marker=False)
COMMENT = Size(max_metrics=6, max_gates=15, max_regressions=5, all_gates=False, marker=True)

_ICONS = {"pass": "✅ pass", "FAIL": "❌ FAIL", "error": "❌ error", "warn": "⚠️ warn", "skipped": "⏭️ skipped"}


def _cut(text: object) -> str:
    text = "" if text is None or text is pd.NA else str(text)
    return text if len(text) <= CELL_CHARS else text[: CELL_CHARS - 1] + "…"


def _health_failed(view: CiView) -> bool:
    return health_outcome(view.health) == "error"


def _headline(view: CiView) -> list[str]:
    counts = tally(view.gates, view.health)
    verdict = (
        f"❌ {counts['FAIL']} blocking gate(s) failed"
        if counts["FAIL"]
        else "❌ the system under test failed"
        if counts["error"]
        else "✅ no blocking gate failed"
    )
    what = f"run {md_code(_cut(view.run_id))}" + (
        f" vs baseline {md_code(_cut(view.baseline))}" if view.baseline else " (no baseline)"
    )
    lines = [f"### kebab-eval {md_text(view.command)}: {verdict}", "", what]
    if view.golden:
        lines[-1] += f" on golden set {md_code(_cut(view.golden))}"
    lines[-1] += f" — {tally_text(view.gates, view.health)}"
    if _health_failed(view):
        lines += ["", f"> ❌ {md_text(_cut(view.health.get('message')))}"]  # "system health: …"
    for note in view.notes:
        if note:
            lines += ["", f"> {md_text(_cut(note))}"]
    return lines


def _value(view: CiView, metric: str, value) -> str:
    """A value cell: ``not measured`` for a metric the run could not measure, else the number."""
    return NOT_MEASURED if metric in view.not_measured else shown(value)


def _not_measured_lines(view: CiView) -> list[str]:
    """One quoted line per reason: the metrics the run could not measure (null, never 0)."""
    groups: dict[str, list[str]] = {}
    for metric, reason in view.not_measured.items():
        groups.setdefault(reason, []).append(metric)
    return [
        line
        for reason, metrics in groups.items()
        for line in ("", f"> {NOT_MEASURED} ({md_text(_cut(reason))}): {md_text(_cut(', '.join(metrics)))}")
    ]


def _metric_lines(view: CiView, size: Size) -> list[str]:
    table = view.metrics.head(size.max_metrics)
    if not len(table):
        return _not_measured_lines(view)
    if view.baseline is None:
        lines = ["", "| metric | value | n |", "|---|---:|---:|"]
        for row in table.itertuples(index=False):
            n = "" if pd.isna(row.n) else str(row.n)
            lines.append(f"| {md_cell(row.metric)} | {_value(view, row.metric, row.b)} | {n} |")
        return lines + _not_measured_lines(view)
    lines = [
        "",
        "| metric | baseline | this run | delta | p (adjusted) | MDE | sig |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for row in table.itertuples(index=False):
        arrow = arrow_text(row)
        by = "" if pd.isna(row.adjusted_by) else f" ({'Holm' if row.adjusted_by == 'holm' else 'BH'})"
        p = p_text(row.p_adjusted) + (by if not pd.isna(row.p_adjusted) else "")
        sig = "" if pd.isna(row.significance) else str(row.significance).replace("*", "\\*")
        lines.append(
            f"| {md_cell(row.metric)} | {shown(row.a)} | {_value(view, row.metric, row.b)} "
            f"| {signed(row.delta)} {arrow} | {p} | {mde_text(row)} | {sig} |".replace("  |", " |")
        )
    lines += [
        "",
        "Marks: \\* p < 0.05, \\*\\* < 0.01, \\*\\*\\* < 0.001 on the adjusted p (Holm over the gated "
        "metrics, Benjamini–Hochberg over the rest); ▲ better, ▼ worse where significant; △ ▽ the "
        "delta's sense where not. MDE: the smallest true change the test would find 4 times in 5 "
        "(80% power) — a smaller one can pass unseen.",
    ]
    return lines + _not_measured_lines(view)


def _check_rows(view: CiView) -> list[tuple[str, str, str, str, str, str]]:
    """One row per check the tally counts — each gate result, then the system-health verdict —
    as ``(title, outcome, value, threshold, delta, reason)`` texts."""
    rows = [
        (gate_title(g), outcome(g), shown(g.get("value")), exact(configured_bound(g)), signed(g.get("delta")),
         str(g["reason"]))
        for g in view.gates
    ]  # fmt: skip
    state = health_outcome(view.health)
    if state is not None:
        h = view.health or {}
        rate, limit = h.get("error_rate"), h.get("max_error_rate")
        delta = None if rate is None or limit is None else round(float(rate) - float(limit), 4)
        reason = h.get("message") or f"{h.get('failed', 0)} of {h.get('queries', 0)} queries failed"
        rows.append((health_title(h), state, shown(rate), exact(limit), signed(delta), str(reason)))
    return rows


def _gate_lines(view: CiView, size: Size) -> list[str]:
    rows = [r for r in _check_rows(view) if size.all_gates or r[1] != "pass"]
    if not rows:
        return []
    order = {"FAIL": 0, "error": 0, "warn": 1, "skipped": 2, "pass": 3}
    rows = sorted(rows, key=lambda r: order[r[1]])  # stable: config order within each
    lines = [
        "",
        "#### Checks" if size.all_gates else "#### Checks that did not pass",
        "",
        "| check | outcome | value | threshold | delta | reason |",
        "|---|---|---:|---:|---:|---|",
    ]
    for title, state, value, threshold, delta, reason in rows[: size.max_gates]:
        lines.append(
            f"| {md_cell(_cut(title))} | {_ICONS[state]} | {value} | {threshold} | {delta} "
            f"| {md_cell(_cut(reason))} |"
        )
    if len(rows) > size.max_gates:
        lines.append(f"| … {len(rows) - size.max_gates} more in the JUnit report | | | | | |")
    return lines


def _regression_lines(view: CiView, size: Size) -> list[str]:
    if view.baseline is None:
        return []
    if not view.n_regressions:
        return ["", "No query got worse."]
    lines = [
        "",
        f"#### Queries that got worse ({view.n_regressions})",
        "",
        "| query | verdict | baseline rank | rank | note |",
        "|---|---|---:|---:|---|",
    ]
    for row in view.regressions.head(size.max_regressions).itertuples(index=False):
        a = "–" if pd.isna(row.a_rank) else str(row.a_rank)
        b = "–" if pd.isna(row.b_rank) else str(row.b_rank)
        query, note = md_cell(_cut(row.query_id)), md_cell(_cut(row.note))
        lines.append(f"| {query} | {md_cell(row.verdict)} | {a} | {b} | {note} |")
    if view.n_regressions > size.max_regressions:
        lines.append(f"| … {view.n_regressions - size.max_regressions} more in the full report | | | | |")
    return lines


def render_ci_markdown(view: CiView, size: Size, report_url: str | None = None) -> str:
    """Markdown of ``view`` at ``size`` (:data:`SUMMARY` or :data:`COMMENT`), ending with a link to
    ``report_url`` when given (already checked: :func:`.report_link.report_link`).
    At most a few kilobytes: every list and cell is capped."""
    lines = [MARKER] if size.marker else []
    lines += _headline(view)
    lines += _metric_lines(view, size)
    lines += _gate_lines(view, size)
    lines += _regression_lines(view, size)
    if report_url:
        lines += ["", f"[Full report]({report_url})"]
    return "\n".join(lines) + "\n"
