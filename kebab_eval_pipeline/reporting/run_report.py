"""The run report (``run.md``): what was evaluated, with which versions, every metric, the gates and
the category breakdown — rendered once, when the run's metrics are summarised, and stored with them."""

from __future__ import annotations

import pandas as pd

from kebab_eval_pipeline.compare.report import CATEGORY_METRICS
from kebab_eval_pipeline.foundation.markdown_text import md_cell, md_code, md_text
from kebab_eval_pipeline.foundation.number_text import is_null, value_text
from kebab_eval_pipeline.foundation.run_roles import role_of
from kebab_eval_pipeline.metrics.health import health_markdown
from kebab_eval_pipeline.metrics.matching_diagnostics import match_line
from kebab_eval_pipeline.reporting.calibration import (
    calibration_markdown,
    relevance_markdown,
    self_consistency_text,
)
from kebab_eval_pipeline.reporting.gate_text import outcome
from kebab_eval_pipeline.reporting.not_measured import NOT_MEASURED, by_reason, not_measured
from kebab_eval_pipeline.reporting.repeats import repeats_markdown
from kebab_eval_pipeline.reporting.spend import spend_parts, usd
from kebab_eval_pipeline.systems.identity import label as system_label


def _fmt(x, name: str = "") -> str:
    return usd(x) if name.endswith("_usd") and not is_null(x) else value_text(x)


def render_run_markdown(
    run_id: str,
    info: dict,
    metrics: dict,
    breakdowns: pd.DataFrame,
    gates: list[dict],
    denominators: dict | None = None,
) -> str:
    """The per-run report: versions, metrics, what the run spent (the system under test's answers
    and the judge, when either reported tokens or a cost), gates and the category breakdown."""
    lines = [f"# Evaluation run {md_code(run_id)}", ""]
    golden = info.get("golden", {})
    lines += [
        f"System **{md_text(system_label(info))}**, golden set "
        f"**{md_text(golden.get('name'))}** ({md_text(golden.get('queries'))} queries, sha256 "
        f"{md_code(str(golden.get('sha256'))[:12])}).",
        "",
    ]
    role = role_of(run_id, info)  # what the run is: an automatic baseline shares its role family
    lines += [f"Role **{md_text(role.label)}** ({md_text(role.source)}).", ""]
    lines += health_markdown(info.get("system_health") or {})
    lines += ["| version | value |", "|---|---|"]
    lines += [f"| {md_cell(k)} | {md_cell(_fmt(v))} |" for k, v in info.get("versions", {}).items()]
    lines += _matching_lines(info)
    if info.get("judged_warning"):  # much of the ranking was never judged (metrics.judged_coverage)
        lines += ["", f"> ⚠ **judgement coverage**: {md_text(info['judged_warning'])}"]
    for warning in info.get("judge_reply_warnings") or []:  # judge replies that say little (judge.metrics)
        lines += ["", f"> ⚠ **judge replies**: {md_text(warning)}"]
    unmeasured = not_measured(info)
    lines += ["", "## Metrics", "", "| metric | value |", "|---|---:|"]

    def value(k: str, v) -> str:
        if k in unmeasured:  # null because the run could not carry its inputs
            return NOT_MEASURED
        return _fmt(int(v) if k.startswith("n_") and v is not None else v, k)

    lines += [f"| {md_cell(k)} | {value(k, v)} |" for k, v in metrics.items()]
    if unmeasured:  # null because the run could not carry their inputs: say why, never 0
        lines += ["", "## Not measured", ""]
        lines += [
            f"- {md_text(reason)}: {', '.join(md_code(m) for m in metrics_)}"
            for reason, metrics_ in by_reason(info)
        ]
    lines += repeats_markdown(info.get("repeats"), list(metrics))
    spent = spend_parts(metrics, denominators or {})
    if spent:
        lines += ["", "## Spend", "", *[f"- {md_text(part)}" for part in spent]]
    lines += calibration_markdown(info.get("judge_calibration"))
    lines += relevance_markdown(info.get("judge_relevance_calibration"))
    if info.get("judge_self_consistency"):
        lines += [
            "",
            "## Judge self-consistency",
            "",
            md_text(self_consistency_text(info["judge_self_consistency"])) + ".",
        ]
    if gates:
        lines += [
            "",
            "## Gates",
            "",
            "| gate | result | value | threshold | reason |",
            "|---|---|---:|---:|---|",
        ]
        for g in gates:
            lines.append(
                f"| {md_cell(g['name'])} | {outcome(g)} | {_fmt(g['value'])} | {md_cell(g['threshold'])} "
                f"| {md_cell(g['reason'])} |"
            )
    if len(breakdowns):
        cat = breakdowns[breakdowns["dimension"] == "category"]
        if len(cat):
            pivot = cat.pivot_table(index="value", columns="metric", values="score", aggfunc="first")
            keep = [c for c in CATEGORY_METRICS if c in pivot.columns]
            if keep:
                lines += [
                    "",
                    "## By category",
                    "",
                    "| category | " + " | ".join(keep) + " |",
                    "|---|" + "---:|" * len(keep),
                ]
                for value, row in pivot[keep].iterrows():
                    lines.append(f"| {md_cell(value)} | " + " | ".join(_fmt(row[c]) for c in keep) + " |")
    return "\n".join(lines) + "\n"


def _matching_lines(info: dict) -> list[str]:
    """The run report's matching section: the criterion used and any matching warning."""
    line = match_line(info)
    if line is None:
        return []
    lines = ["", "## Matching", "", f"Hits matched to the golden set by: {md_code(line)}."]
    warnings = info.get("matching_warnings") or []
    if warnings:
        lines.append("")
        lines += [f"> ⚠ **{md_text(w['field'])}**: {md_text(w['message'])}" for w in warnings]
    return lines
