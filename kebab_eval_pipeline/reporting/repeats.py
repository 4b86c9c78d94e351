"""How a repeated run's repeats read in its reports: noise floor cells, the flakiness line and the
flakiest queries (the numbers come from :func:`kebab_eval_pipeline.metrics.repeats.repeats_info`,
stored in the run's metadata as ``info["repeats"]``)."""

from __future__ import annotations

from kebab_eval_pipeline.foundation.markdown_text import md_cell, md_code
from kebab_eval_pipeline.foundation.number_text import shown as _num


def noise_cell(repeats: dict | None, metric: str) -> str:
    """A metric's noise floor as one cell: ``±std (min–max)``; empty when the run was not repeated
    or the metric has no value in any repeat."""
    floor = ((repeats or {}).get("noise_floor") or {}).get(metric)
    if not floor or floor.get("min") is None:
        return ""
    std = floor.get("std")
    return f"±{_num(std) if std is not None else '?'} ({_num(floor['min'])}–{_num(floor['max'])})"


def flakiness_line(repeats: dict) -> str:
    """One sentence: ``deterministic: 0 flips in N repeats``, or how many queries flipped."""
    n = repeats["count"]
    if repeats.get("deterministic"):
        return f"deterministic: 0 flips in {n} repeats"
    flips = repeats.get("flips") or {}
    parts = ", ".join(
        f"{flips[k]} {k.replace('_', ' ')}"
        for k in ("rank_flips", "refusal_flips", "answer_flips")
        if k in flips
    )
    return f"flaky: {repeats['flaky_queries']} queries changed across {n} repeats ({parts})"


def repeats_markdown(repeats: dict | None, metrics: list[str]) -> list[str]:
    """A Markdown section (lines) for the run report: repeats, the headline rule, the flakiness
    line, the noise floor of ``metrics`` (std, min, max, spread) and the flakiest queries. No lines
    for a run asked once."""
    if not repeats:
        return []
    lines = [
        "",
        "## Repeats and noise floor",
        "",
        f"Each query was asked {repeats['count']} times; headline values are the "
        f"{md_cell(repeats['headline'])}. {flakiness_line(repeats)}.",
        "",
        "| metric | mean | std | min | max | spread |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    floor = repeats.get("noise_floor") or {}
    for m in metrics:
        f = floor.get(m)
        if f:
            lines.append(
                f"| {md_cell(m)} | {_num(f['mean'])} | {_num(f['std'])} | {_num(f['min'])} | "
                f"{_num(f['max'])} | {_num(f['spread'])} |"
            )
    top = repeats.get("flakiest") or []
    if top:
        lines += [
            "",
            "Flakiest queries:",
            "",
            "| query | flips | rank flips | ranks | best–worst | answer flips |",
            "|---|---:|---:|---:|---|---:|",
        ]
        for q in top:
            span = "" if q.get("rank_best") is None else f"{q['rank_best']}–{q['rank_worst']}"
            lines.append(
                f"| {md_code(q['query_id'])} | {q['flips']} | {q.get('rank_flips') or 0} | "
                f"{q.get('distinct_ranks') or ''} | {span} | {q.get('answer_flips') or 0} |"
            )
    return lines
