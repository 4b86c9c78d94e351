"""What the CLI prints of a stored run: the headline table, matching, system health, gates, and
where its reports are — read from what the run stored, never computed again."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.markup import escape
from rich.table import Table

from kebab_eval_pipeline.cli.console import err, out
from kebab_eval_pipeline.foundation.number_text import value_text
from kebab_eval_pipeline.reporting.repeats import auto_line, flakiness_line, noise_cell
from kebab_eval_pipeline.reporting.spend import spend_line

if TYPE_CHECKING:  # the store pulls in pandas: the CLI imports it only in commands that read
    from kebab_eval_pipeline.store.runs import RunStore


def print_health(info: dict) -> None:
    """The system-health verdict when any query failed: red when it fails the run, else yellow."""
    verdict = info.get("system_health")
    if not verdict or not verdict["failed"]:
        return
    from kebab_eval_pipeline.metrics.health import failed_run

    if failed_run(verdict):
        state, colour = "FAIL", "red"
    else:
        state, colour = "warn", "yellow"
    out.print(
        f"  [{colour}]{state:4}[/{colour}] {escape(verdict['message'])} (see `kebab-eval export`)",
        highlight=False,
    )


def print_matching(info: dict) -> None:
    """The criterion that matched the hits to the golden set, and why matching may score 0."""
    from kebab_eval_pipeline.metrics.matching_diagnostics import match_line

    line = match_line(info)
    if line is not None:
        out.print(f"  match: {escape(line)}", highlight=False)
    for w in info.get("matching_warnings") or []:
        # escape(): user and system text is never rich markup (a "[/x]" in it would crash the print).
        out.print(
            f"  [yellow]warning[/yellow] matching ({escape(w['field'])}): {escape(w['message'])}",
            highlight=False,
        )


def print_run(store: RunStore, run_id: str, ks: list[int], headline, settings=None) -> None:
    """A stored run: its headline metrics, matching, system health, every check — its gates (as
    ``run_metrics`` and this run's comparison stored them, or not evaluated: the CI outputs' view,
    :func:`~kebab_eval_pipeline.cli.ci_outputs.stored_view`) and their tally, the words and counts
    of the JUnit file and the Markdown summaries — its comparison's note and warnings, and where
    its reports are: copies of the stored ``run.md`` and ``comparison.md`` in ``reports/<run_id>/``
    of a local base."""
    from kebab_eval_pipeline.chain.artifacts import REPORT_FILE
    from kebab_eval_pipeline.cli.ci_outputs import stored_view
    from kebab_eval_pipeline.compare.systems import verdict_count_text
    from kebab_eval_pipeline.reporting.gate_text import tally_text
    from kebab_eval_pipeline.systems.label import system_label

    run = store.stored_run(run_id)
    metrics = run.metrics
    # A line of its own, not the table's title: a title wraps to the (narrow) table's width.
    out.print(
        f"run {run_id} — {metrics.info['golden']['name']} "
        f"({metrics.info['golden']['queries']} queries, {system_label(metrics.info['system'])})",
        markup=False,
        highlight=False,
        style="italic",
    )
    table = Table()
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("n", justify="right")
    repeats = metrics.info.get("repeats")  # asked N > 1 times: the noise floor beside each value
    if repeats:
        table.add_column("noise floor", justify="right")
    from kebab_eval_pipeline.reporting.not_measured import NOT_MEASURED, not_measured, not_measured_lines

    unmeasured = not_measured(metrics.info)
    for name, value in headline(metrics.metrics, ks).items():
        shown = NOT_MEASURED if name in unmeasured else value_text(value)
        row = [name, shown, str(metrics.denominators.get(name, ""))]
        table.add_row(*row, *([noise_cell(repeats, name)] if repeats else []))
    out.print(table)
    if repeats:
        out.print(f"repeats: {repeats['count']} — {flakiness_line(repeats)}", markup=False, highlight=False)
        if auto_line(repeats):  # repeat: auto — why it stopped after this many
            out.print(auto_line(repeats), markup=False, highlight=False, soft_wrap=True)
        for q in repeats.get("flakiest") or []:
            span = "" if q.get("rank_best") is None else f", ranks {q['rank_best']}–{q['rank_worst']}"
            out.print(
                f"  flaky {q['query_id']}: {q['flips']} flips{span}, "
                f"{q.get('answer_flips') or 0} answer flips",
                markup=False,
                highlight=False,
            )
    spent = spend_line(metrics.metrics, metrics.denominators)  # the system's answers beside the judge
    if spent is not None:
        out.print(spent, markup=False, highlight=False)
    for line in not_measured_lines(metrics.info):  # null with the reason, never 0
        out.print(f"  {line}", markup=False, highlight=False, soft_wrap=True)
    print_matching(metrics.info)
    if metrics.info.get("judged_warning"):
        out.print(
            f"  [yellow]warning[/yellow] judgement coverage: {escape(metrics.info['judged_warning'])}",
            highlight=False,
        )
    for warning in metrics.info.get("judge_reply_warnings") or []:
        out.print(f"  [yellow]warning[/yellow] judge: {escape(warning)}", highlight=False, soft_wrap=True)
    print_health(metrics.info)
    from kebab_eval_pipeline.reporting.calibration import relevance_text, self_consistency_text

    judge_lines = []  # the relevance judge against the golden set; the judge's flips on reordered evidence
    if metrics.info.get("judge_relevance_calibration"):
        judge_lines.append(relevance_text(metrics.info["judge_relevance_calibration"]))
    if metrics.info.get("judge_self_consistency"):
        judge_lines.append(self_consistency_text(metrics.info["judge_self_consistency"]))
    for line in judge_lines:
        out.print(f"  {line}", markup=False, highlight=False, soft_wrap=True)
    view = stored_view(store, run_id, settings)
    for g in view.gates:
        state = "skip" if g["skipped"] else "pass" if g["passed"] else ("FAIL" if g["blocking"] else "warn")
        colour = {"pass": "green", "FAIL": "red", "warn": "yellow", "skip": "dim"}[state]
        word = "check" if g.get("check") else "gate"  # judge_calibration is a check, counted with the gates
        out.print(f"  {word} [{colour}]{state:4}[/{colour}] {escape(g['name'])}: {escape(g['reason'])}")
    out.print(f"  checks: {tally_text(view.gates, view.health)}", markup=False, highlight=False)
    reports = {REPORT_FILE: store.read_file("run_metrics", run_id, REPORT_FILE).decode("utf-8")}
    comparison = run.comparison()
    if comparison is not None:
        reports["comparison.md"] = comparison.markdown
        counts = verdict_count_text(comparison.info)  # neutral words for two systems
        out.print(
            f"comparison: {escape(str(comparison.info.get('baseline_note')))}"
            + (f"; verdicts: {counts}" if counts else "")
        )
        for warning in comparison.info.get("warnings", []):
            out.print(f"  [yellow]warning[/yellow] {escape(warning)}", highlight=False)
    folder = store.write_reports(run_id, reports)
    if comparison is not None:
        html = store.file_path("comparison_report", run_id, "comparison.html")
        if html is not None:
            out.print(f"comparison report: {html}", soft_wrap=True, highlight=False, markup=False)
    where = (
        folder / REPORT_FILE if folder is not None else store.file_path("run_metrics", run_id, REPORT_FILE)
    )
    out.print(f"report: {where}", soft_wrap=True, highlight=False, markup=False)


def print_runs_table(run_id, time, labels=(), numbers=()) -> None:
    """A table of runs fitted to the terminal (tables.py: never an id split; piped: never wrapped)."""
    from kebab_eval_pipeline.cli.tables import fit_runs_table

    fitted = fit_runs_table(out, run_id, time, labels, numbers, width=out.width if out.is_terminal else None)
    out.print(fitted.renderable, soft_wrap=fitted.soft_wrap)
    if fitted.dropped:
        out.print(
            f"({', '.join(fitted.dropped)}: not shown at this width)",
            markup=False,
            highlight=False,
            style="dim",
        )


def print_probe(kind: str, probe) -> None:
    """The system check of `golden validate --config`: checked, warnings, not checked, failure."""
    out.print(f"system check ({kind}):", highlight=False)
    for line in probe.checked:
        out.print(f"  checked: {line}", markup=False, highlight=False, soft_wrap=True)
    for line in probe.warnings:
        out.print(f"  [yellow]warning[/yellow] {escape(line)}", highlight=False, soft_wrap=True)
    for line in probe.not_checked:
        out.print(f"  not checked: {line}", markup=False, highlight=False, soft_wrap=True)
    if probe.error is not None:
        err.print(f"error: system check failed: {probe.error}", markup=False, highlight=False)
