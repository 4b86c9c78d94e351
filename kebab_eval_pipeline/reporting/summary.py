"""The compact run summary: one small Markdown table a person reads first in the Dagster UI.

Who was evaluated (system, golden set, the versions that make runs comparable), the headline
metrics with their denominators, and each gate's bound and outcome beside the metric it guards.
The full run report (every metric, the breakdowns) stays in the ``report`` metadata entry.
"""

from __future__ import annotations

from kebab_eval_pipeline.foundation.markdown_text import md_cell, md_code, md_text
from kebab_eval_pipeline.foundation.number_text import shown as _value
from kebab_eval_pipeline.foundation.run_roles import role_of
from kebab_eval_pipeline.metrics.health import health_markdown
from kebab_eval_pipeline.reporting.gate_text import TALLY_WORDS, outcome, tally, tally_text
from kebab_eval_pipeline.reporting.not_measured import NOT_MEASURED, by_reason, not_measured
from kebab_eval_pipeline.reporting.repeats import auto_line, flakiness_line, noise_cell

_OPS = {"min": "≥", "max": "≤"}
SUMMARY_VERSIONS = ("chunker_version", "embedding_model", "prompt_template_version", "index_version")


def _row(cells: list[str]) -> str:
    return "|" + "|".join(cells) + "|"


def gate_outcome(gate: dict) -> str:
    """The word the CLI, the summary table and the gate's asset check use for a gate result (a
    ``GateResult.as_dict()``): pass, warn (a non-blocking gate missed), FAIL (a blocking one
    did) or skipped (:func:`.gate_text.outcome`, the one place that decides it)."""
    return outcome(gate)


def gate_tally(gates: list[dict]) -> dict[str, int]:
    """Counts of gate outcomes: passed, failed (blocking), warned (non-blocking), skipped — the
    :func:`.gate_text.tally` of the gates alone (the ``gates/…`` numbers of the UI)."""
    counts = tally(gates, None)
    return {TALLY_WORDS[k]: counts[k] for k in ("pass", "FAIL", "warn", "skipped")}


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
        # what the run is: an automatic baseline is a passing run of the same role family
        f"role **{md_text(role_of(run_id, info).label)}**",
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
        # Only for the metrics this table shows (headline and gated): the UI shows a Markdown entry
        # inline below 1,000 characters only; the run report lists the rest with their reasons.
        shown = set(headline) | {g["metric"] for g in gates}
        lines += [
            f"{NOT_MEASURED} ({md_text(reason)}): {md_text(', '.join(m for m in metrics if m in shown))}  "
            for reason, metrics in by_reason(info)
            if any(m in shown for m in metrics)
        ]
        others = len([m for m in unmeasured if m not in shown])
        if others:
            lines.append(f"{NOT_MEASURED}: {others} more (see report)  ")
        lines.append("")
    repeats = info.get("repeats")  # asked N > 1 times: a noise floor column and a flakiness line
    if repeats:
        lines += [f"{repeats['count']} repeats · {flakiness_line(repeats)}  ", ""]
        if auto_line(repeats):  # repeat: auto — why it stopped (the report has each metric's se)
            lines[-1:-1] = [f"{md_text(auto_line(repeats, detail=False))}  "]
    # Cells without padding: the UI shows the entry inline only below 1,000 characters (above it a
    # "[Show Markdown]" button hides the table), and padding is a tenth of the table's length.
    header = ["metric", "value", "n", *(["noise floor"] if repeats else []), "gate"]
    lines += [_row(header), "|---|---:|---:|" + ("---|" if repeats else "") + "---|"]
    by_metric: dict[str, list[dict]] = {}
    for gate in gates:
        by_metric.setdefault(gate["metric"], []).append(gate)

    def bounds(metric: str) -> str:
        return "; ".join(
            f"{_OPS.get(g['kind'], g['kind'])}{g['threshold']:g} {gate_outcome(g)}"
            for g in by_metric.get(metric, [])
        )

    def noise(metric: str) -> list[str]:
        return [noise_cell(repeats, metric)] if repeats else []

    for metric, value in headline.items():
        n = denominators.get(metric)
        shown = NOT_MEASURED if metric in unmeasured else _value(value)
        lines.append(
            _row([md_cell(metric), shown, "" if n is None else str(n), *noise(metric), bounds(metric)])
        )
    for metric in by_metric:
        if metric not in headline:
            value = by_metric[metric][0]["value"]
            lines.append(_row([md_cell(metric), _value(value), "", *noise(metric), bounds(metric)]))
    health = info.get("system_health")
    if gates or health:
        # the words every CI output and the CLI count checks in; the comparison's regression and
        # verdict gates are counted on comparison_report, which runs after this asset
        lines += ["", "Checks: " + tally_text(gates, health)]
    return "\n".join(lines) + "\n"
