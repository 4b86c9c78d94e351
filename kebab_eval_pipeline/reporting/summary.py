"""The compact run summary: one small Markdown table a person reads first in the Dagster UI.

Who was evaluated (system, golden set, the versions that make runs comparable), the headline
metrics with their denominators, and each gate's bound and outcome beside the metric it guards.
The full run report (every metric, the breakdowns) stays in the ``report`` metadata entry.
"""

from __future__ import annotations

import math

from kebab_eval_pipeline.markdown_text import md_cell, md_code, md_text
from kebab_eval_pipeline.metrics.health import health_markdown
from kebab_eval_pipeline.reporting.not_measured import NOT_MEASURED, by_reason, not_measured
from kebab_eval_pipeline.reporting.repeats import flakiness_line, noise_cell

_OPS = {"min": "≥", "max": "≤"}
SUMMARY_VERSIONS = ("chunker_version", "embedding_model", "prompt_template_version", "index_version")


def _value(x: float | None) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "null"
    return f"{x:.4f}"


def gate_outcome(gate: dict) -> str:
    """The word the CLI, the summary table and the gate's asset check use for a gate result (a
    ``GateResult.as_dict()``): pass, warn (a non-blocking gate missed), FAIL (a blocking one
    did) or skipped."""
    if gate["skipped"]:
        return "skipped"
    if gate["passed"]:
        return "pass"
    return "FAIL" if gate["blocking"] else "warn"


def gate_tally(gates: list[dict]) -> dict[str, int]:
    """Counts of gate outcomes: passed, failed (blocking), warned (non-blocking), skipped."""
    tally = {"passed": 0, "failed": 0, "warned": 0, "skipped": 0}
    for gate in gates:
        if gate["skipped"]:
            tally["skipped"] += 1
        elif gate["passed"]:
            tally["passed"] += 1
        else:
            tally["failed" if gate["blocking"] else "warned"] += 1
    return tally


def _matching(info: dict) -> list[str]:
    """The match criterion used, and each matching warning (they explain a run of zeros)."""
    from kebab_eval_pipeline.metrics.matching_diagnostics import match_line

    used = match_line(info)
    if used is None:  # stored before the criterion was recorded
        return []
    lines = [f"match {md_code(used)}  "]
    lines += [
        f"⚠ matching ({md_text(w['field'])}): {md_text(w['message'])}  "
        for w in info.get("matching_warnings") or []
    ]
    return lines


def render_run_summary(
    run_id: str,
    info: dict,
    headline: dict[str, float | None],
    denominators: dict[str, int],
    gates: list[dict],
) -> str:
    """Markdown: a header line (run, system, golden set), the key versions, the match criterion
    used (per-criterion query counts) with any matching warning, and one table of the
    headline metrics — value, denominator n (queries the metric averages over; a null value means
    n = 0) and the gates on that metric — followed by the gate tally and any gate on a metric
    outside the headline (slices such as ``mrr[lang=ko]`` included)."""
    system, golden, versions = info.get("system", {}), info.get("golden", {}), info.get("versions", {})
    # Short lines, one fact each: the UI shows this in a narrow metadata column.
    lines = [
        # User- and system-supplied values only through md_* (reporting/markdown.py).
        f"**{md_code(run_id)}** · {md_text(system.get('kind'))} "
        f"({md_text(system.get('mode') or 'default mode')})",
        "",
        f"golden **{md_text(golden.get('name'))}** · {md_text(golden.get('queries'))} queries · "
        f"{md_code(str(golden.get('sha256'))[:12])}",
        "",
        *[
            f"{key.removesuffix('_version')} {md_code(versions.get(key) or 'none')}  "
            for key in SUMMARY_VERSIONS
        ],
        *_matching(info),
        *(
            [f"⚠ judgement coverage: {md_text(info['judged_warning'])}  "]
            if info.get("judged_warning")
            else []
        ),
        "",
        *health_markdown(info.get("system_health") or {}),
    ]
    unmeasured = not_measured(info)
    if unmeasured:  # null because the run could not carry their inputs: why, before the numbers
        lines += [
            f"{NOT_MEASURED} ({md_text(reason)}): {md_text(', '.join(metrics))}  "
            for reason, metrics in by_reason(info)
        ] + [""]
    repeats = info.get("repeats")  # asked N > 1 times: a noise floor column and a flakiness line
    if repeats:
        lines += [f"{repeats['count']} repeats · {flakiness_line(repeats)}  ", ""]
        lines += ["| metric | value | n | noise floor | gate |", "|---|---:|---:|---|---|"]
    else:
        lines += ["| metric | value | n | gate |", "|---|---:|---:|---|"]
    by_metric: dict[str, list[dict]] = {}
    for gate in gates:
        by_metric.setdefault(gate["metric"], []).append(gate)

    def bounds(metric: str) -> str:
        return "; ".join(
            f"{_OPS.get(g['kind'], g['kind'])}{g['threshold']:g} {gate_outcome(g)}"
            for g in by_metric.get(metric, [])
        )

    for metric, value in headline.items():
        n = denominators.get(metric)
        noise = f" {noise_cell(repeats, metric)} |" if repeats else ""
        shown = NOT_MEASURED if metric in unmeasured else _value(value)
        lines.append(f"| {md_cell(metric)} | {shown} | {'' if n is None else n} |{noise} {bounds(metric)} |")
    for metric in by_metric:
        if metric not in headline:
            value = by_metric[metric][0]["value"]
            noise = f" {noise_cell(repeats, metric)} |" if repeats else ""
            lines.append(f"| {md_cell(metric)} | {_value(value)} | |{noise} {bounds(metric)} |")
    if gates:
        tally = gate_tally(gates)
        lines += ["", "Gates: " + " · ".join(f"{n} {what}" for what, n in tally.items() if n)]
    return "\n".join(lines) + "\n"
