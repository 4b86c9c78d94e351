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


#: How each stop reason of ``repeat: auto`` reads (chain/auto_repeat.py).
STOPPED_TEXT = {
    "deterministic": "deterministic (every query's outcome the same in every repeat)",
    "reached_target": "reached target (every watched metric's standard error at most its target)",
    "hit_max": "hit repeat_max (a watched metric's standard error still above its target)",
}


def auto_line(repeats: dict | None, detail: bool = True) -> str:
    """One sentence on why a ``repeat: auto`` run stopped and, with ``detail``, each watched metric's
    standard error against its target (``hit@1 se 0.0041 ≤ 0.0050``); empty for a fixed count."""
    auto = (repeats or {}).get("auto")
    if not auto:
        return ""
    parts = []
    for metric, m in (auto.get("metrics") or {}).items() if detail else ():
        se = "n/a" if m.get("se") is None else f"{m['se']:.4f}"
        parts.append(f"{metric} se {se} {'≤' if m.get('met') else '>'} {m['target']:.4f}")
    reason = STOPPED_TEXT.get(auto.get("stopped"), str(auto.get("stopped")))
    watched = f": {', '.join(parts)}" if parts else ""
    bounds = f"min {auto['min']}, max {auto['max']}"
    return f"repeat auto: stopped after {auto['repeats']} repeats ({bounds}), {reason}{watched}"


def auto_markdown(repeats: dict | None) -> list[str]:
    """The run report's lines on a ``repeat: auto`` run: why it stopped and, per watched metric, its
    standard error, target and the target's basis; the gated metrics not watched, with the reason."""
    auto = (repeats or {}).get("auto")
    if not auto:
        return []
    reason = STOPPED_TEXT.get(auto.get("stopped"), str(auto.get("stopped")))
    lines = [
        "",
        f"Repeat auto: stopped after {auto['repeats']} repeats (min {auto['min']}, max {auto['max']}): "
        f"{md_cell(reason)}. Standard error = std / √n over the repeats.",
        "",
        "| watched metric | se | target | basis | met |",
        "|---|---:|---:|---|---|",
    ]
    for metric, m in (auto.get("metrics") or {}).items():
        se = "" if m.get("se") is None else f"{m['se']:.4f}"
        lines.append(
            f"| {md_cell(metric)} | {se} | {m['target']:.4f} | {md_cell(m['basis'])} | "
            f"{'yes' if m.get('met') else 'no'} |"
        )
    for metric, why in (auto.get("not_watched") or {}).items():
        lines.append(f"| {md_cell(metric)} |  |  | not watched: {md_cell(why)} |  |")
    return lines


def repeats_markdown(repeats: dict | None, metrics: list[str]) -> list[str]:
    """A Markdown section (lines) for the run report: repeats, the headline rule, the flakiness
    line, the noise floor of ``metrics`` (std, se, min, max, spread), why a ``repeat: auto`` run
    stopped (:func:`auto_markdown`) and the flakiest queries. No lines for a run asked once."""
    if not repeats:
        return []
    lines = [
        "",
        "## Repeats and noise floor",
        "",
        f"Each query was asked {repeats['count']} times; headline values are the "
        f"{md_cell(repeats['headline'])}. {flakiness_line(repeats)}.",
        "",
        "| metric | mean | std | se | min | max | spread |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    floor = repeats.get("noise_floor") or {}
    for m in metrics:
        f = floor.get(m)
        if f:
            se = _num(f["se"]) if f.get("se") is not None else ""  # runs stored before se: none
            lines.append(
                f"| {md_cell(m)} | {_num(f['mean'])} | {_num(f['std'])} | {se} | {_num(f['min'])} | "
                f"{_num(f['max'])} | {_num(f['spread'])} |"
            )
    lines += auto_markdown(repeats)
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
