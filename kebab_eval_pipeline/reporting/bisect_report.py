"""A bisect (:mod:`kebab_eval_pipeline.compare.bisect`) as plain text, Markdown or JSON.

Text is for the terminal, Markdown for the Dagster UI and files, JSON for scripts (every row of
every table, flips uncapped). Text and Markdown show each change's flipped queries worst first, at
most ``max_flips`` of them, and say how many more there are. Run ids, version strings and query ids
go through :mod:`~kebab_eval_pipeline.foundation.markdown_text` in Markdown.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from kebab_eval_pipeline.compare.bisect import Bisect
from kebab_eval_pipeline.foundation.json_records import finite_json, json_records, json_text
from kebab_eval_pipeline.foundation.markdown_text import md_cell, md_code, md_text
from kebab_eval_pipeline.foundation.number_text import is_null, shown, signed

__all__ = [
    "FORMATS",
    "MAX_FLIPS",
    "bisect_document",
    "render",
    "render_json",
    "render_markdown",
    "render_text",
]

#: Flipped queries shown per change in text and Markdown (JSON has them all).
MAX_FLIPS = 10


def _p(p: Any) -> str:
    if is_null(p):
        return "–"
    return f"{float(p):.2g}" if float(p) < 0.001 else f"{float(p):.4f}"


def _value(x: Any, binary: bool) -> str:
    if binary and not is_null(x):
        return "found" if float(x) == 1.0 else "missed"
    return shown(x)


def _shown(x: Any) -> str:
    return "null" if is_null(x) else str(x)


def _method(info: dict) -> str:
    test = (
        "exact McNemar (0/1 per query)"
        if info["test_kind"] == "binary"
        else "sign-flip randomization of the mean difference"
    )
    correction = "Holm" if info["adjust"] == "holm" else "Benjamini–Hochberg"
    return (
        f"Paired tests between consecutive runs over the queries both scored: {test}, 95% CI by paired "
        f"bootstrap (seed {info['seed']}, {info['resamples']} resamples); p-values {correction}-adjusted "
        f"over the {info['n_tested']} tested steps; a change is adjusted p < {info['alpha']:g}."
    )


def _overall_line(info: dict) -> str:
    o = info["overall"]
    verdict = "significant" if o["significant"] else "not significant"
    line = (
        f"first vs last ({o['run_a']} → {o['run_b']}): delta {signed(o['delta'])} "
        f"[{shown(o['ci_low'])}, {shown(o['ci_high'])}], n {o['n_paired']}, p {_p(o['p_value'])} "
        f"({verdict}, raw p)"
    )
    if info.get("drift"):
        line += "; a drift: no single step is a change, but first and last differ"
    return line


def _runs(info: dict) -> list[tuple[str, str, str]]:
    """Each run's id, role and outcome (``failed (gate_mrr_min)``), oldest first; ``–`` where a
    bisect made without them does not know."""
    n = len(info["runs"])
    roles, outcomes = info.get("roles") or [None] * n, info.get("outcomes") or [None] * n
    failed = info.get("failed") or [[]] * n
    return [
        (
            run_id,
            role or "–",
            "–" if outcome is None else outcome + (f" ({', '.join(f)})" if f else ""),
        )
        for run_id, role, outcome, f in zip(info["runs"], roles, outcomes, failed, strict=True)
    ]


def _flips_of(b: Bisect, step: int) -> pd.DataFrame:
    return b.flips[b.flips["step"] == step]


def _diffs_of(b: Bisect, step: int) -> pd.DataFrame:
    return b.diffs[b.diffs["step"] == step]


def render_text(b: Bisect, max_flips: int = MAX_FLIPS) -> str:
    """The bisect for a terminal: what was compared, each change (settings changed, flipped queries
    worst first, capped at ``max_flips``), every step in one table, the first-vs-last test."""
    info = b.info
    binary = info["test_kind"] == "binary"
    lines = [
        f"bisect {info['metric']} over {len(info['runs'])} runs ({info['n_steps']} steps), "
        f"{'higher' if info['higher_is_better'] else 'lower'} is better",
        *[f"  {note}" for note in info.get("notes", [info.get("order", "")]) if note],
        "",
        _method(info),
        "",
    ]
    n = info["n_changes"]
    lines.append(
        f"{n} change{'s' if n != 1 else ''}" + (":" if n else " (no step's adjusted p is below alpha)")
    )
    for change in b.changes.to_dict("records"):
        lines += [
            "",
            f"step {change['step']}: {change['run_a']} → {change['run_b']}  {change['direction']}  "
            f"delta {signed(change['delta'])} [{shown(change['ci_low'])}, {shown(change['ci_high'])}]  "
            f"p {_p(change['p_raw'])}  adjusted {_p(change['p_adjusted'])}",
        ]
        if not is_null(change.get("caution")):
            lines.append(f"  caution: {change['caution']}")
        diffs = _diffs_of(b, change["step"])
        if len(diffs):
            lines.append("  settings changed:")
            lines += [
                f"    {d['field']}: {_shown(d['value_a'])} → {_shown(d['value_b'])}"
                for d in diffs.to_dict("records")
            ]
        else:
            lines.append("  settings changed: none recorded (same versions and system settings)")
        flips = _flips_of(b, change["step"])
        lines.append(
            f"  flipped queries: {change['n_flipped']} "
            f"({change['n_worse']} worse, {change['n_better']} better)"
            + (", worst first:" if len(flips) else "")
        )
        width = max((len(q) for q in flips["query_id"].head(max_flips)), default=0)
        for f in flips.head(max_flips).to_dict("records"):
            lines.append(
                f"    {f['query_id']:<{width}}  "
                f"{_value(f['value_a'], binary)} → {_value(f['value_b'], binary)}"
                + ("" if binary else f"  ({signed(f['delta'])})")
            )
        if len(flips) > max_flips:
            lines.append(f"    … and {len(flips) - max_flips} more")
    lines += ["", "runs (oldest first):"]
    listed = _runs(info)
    widths = [max(len(r[i]) for r in listed) for i in range(3)]
    lines += ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in listed]
    lines += ["", "steps (delta = b − a):"]
    header = (
        "step",
        "run_a",
        "run_b",
        "n",
        "mean_a",
        "mean_b",
        "delta",
        "p",
        "p_adj",
        "change",
        "settings changed",
    )
    rows = [
        (
            str(s["step"]),
            s["run_a"],
            s["run_b"],
            _shown(s["n_paired"]),
            shown(s["mean_a"]),
            shown(s["mean_b"]),
            signed(s["delta"]),
            _p(s["p_raw"]),
            _p(s["p_adjusted"]),
            "yes" if s["changed"] is True else "",
            ", ".join(s["changed_fields"]) or "–",
        )
        for s in b.steps.to_dict("records")
    ]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for r in [header, *rows]:
        lines.append("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    lines += ["", _overall_line(info)]
    return "\n".join(lines) + "\n"


def render_markdown(b: Bisect, max_flips: int = MAX_FLIPS) -> str:
    """The bisect as Markdown (the Dagster UI, ``--format md``): the same content as the text."""
    info = b.info
    binary = info["test_kind"] == "binary"
    n = info["n_changes"]
    lines = [
        f"# Bisect of {md_code(info['metric'])} over {len(info['runs'])} runs",
        "",
        f"**{n} change{'s' if n != 1 else ''}** in {info['n_steps']} steps "
        f"({'higher' if info['higher_is_better'] else 'lower'} is better).",
        "",
        *[f"- {md_text(note)}" for note in info.get("notes", [info.get("order", "")]) if note],
        "",
        md_text(_method(info)),
        "",
    ]
    for change in b.changes.to_dict("records"):
        lines += [
            f"## Step {change['step']}: {md_code(change['run_a'])} → {md_code(change['run_b'])} "
            f"({change['direction']})",
            "",
            f"delta {signed(change['delta'])} "
            f"(95% CI {shown(change['ci_low'])} to {shown(change['ci_high'])}), "
            f"p {_p(change['p_raw'])}, adjusted p {_p(change['p_adjusted'])}",
            "",
        ]
        if not is_null(change.get("caution")):
            lines += [f"> ⚠ **caution**: {md_text(change['caution'])}", ""]
        diffs = _diffs_of(b, change["step"])
        if len(diffs):
            lines += [
                f"| setting | {md_code(change['run_a'], in_table=True)} "
                f"| {md_code(change['run_b'], in_table=True)} |",
                "|---|---|---|",
            ]
            lines += [
                f"| {md_cell(d['field'])} | {md_cell(_shown(d['value_a']))} "
                f"| {md_cell(_shown(d['value_b']))} |"
                for d in diffs.to_dict("records")
            ]
        else:
            lines.append(
                "No recorded setting differs between these runs (same versions and system settings)."
            )
        flips = _flips_of(b, change["step"])
        lines += [
            "",
            f"**Flipped queries: {change['n_flipped']}** "
            f"({change['n_worse']} worse, {change['n_better']} better)"
            + (", worst first:" if len(flips) else "."),
            "",
        ]
        if len(flips):
            lines += ["| query | a | b | delta |", "|---|---:|---:|---:|"]
            lines += [
                f"| {md_code(f['query_id'], in_table=True)} | {_value(f['value_a'], binary)} | "
                f"{_value(f['value_b'], binary)} | {signed(f['delta'])} |"
                for f in flips.head(max_flips).to_dict("records")
            ]
            if len(flips) > max_flips:
                lines += ["", f"… and {len(flips) - max_flips} more."]
            lines.append("")
    lines += ["## Runs (oldest first)", "", "| run | role | outcome |", "|---|---|---|"]
    lines += [
        f"| {md_code(run_id, in_table=True)} | {md_cell(role)} | {md_cell(outcome)} |"
        for run_id, role, outcome in _runs(info)
    ]
    lines += [
        "",
        "## Steps (delta = b − a)",
        "",
        "| step | a | b | n | mean a | mean b | delta | p | adjusted p | change | settings changed |",
        "|---:|---|---|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for s in b.steps.to_dict("records"):
        lines.append(
            f"| {s['step']} | {md_code(s['run_a'], in_table=True)} | {md_code(s['run_b'], in_table=True)} | "
            f"{_shown(s['n_paired'])} | {shown(s['mean_a'])} | {shown(s['mean_b'])} | {signed(s['delta'])} | "
            f"{_p(s['p_raw'])} | {_p(s['p_adjusted'])} | {'**yes**' if s['changed'] is True else ''} | "
            f"{md_cell(', '.join(s['changed_fields'])) or '–'} |"
        )
    lines += ["", md_text(_overall_line(info))]
    return "\n".join(lines) + "\n"


def bisect_document(b: Bisect) -> dict[str, Any]:
    """The bisect as one JSON-ready document: ``info`` keys, then ``steps``, and ``changes`` each
    with its ``settings`` (field, value_a, value_b) and every flipped query."""
    changes = []
    for change in json_records(b.changes):
        step = change["step"]
        change["settings"] = json_records(_diffs_of(b, step)[["field", "value_a", "value_b"]])
        change["flips"] = json_records(
            _flips_of(b, step)[["query_id", "value_a", "value_b", "delta", "flip"]]
        )
        changes.append(change)
    doc = {**b.info, "steps": json_records(b.steps), "changes": changes}
    return finite_json(doc)[0]


def render_json(b: Bisect) -> str:
    """:func:`bisect_document` as indented JSON text (no NaN: null)."""
    return json_text(bisect_document(b))


#: Each format and how it is rendered (``max_flips`` is ignored by JSON, which has every flip).
_RENDERERS = {"text": render_text, "json": lambda b, max_flips: render_json(b), "md": render_markdown}
FORMATS = tuple(_RENDERERS)


def render(b: Bisect, fmt: str, max_flips: int = MAX_FLIPS) -> str:
    """The bisect in ``fmt`` (one of :data:`FORMATS`)."""
    if fmt not in _RENDERERS:
        raise ValueError(f"unknown format {fmt!r}; expected one of {FORMATS}")
    return _RENDERERS[fmt](b, max_flips)
