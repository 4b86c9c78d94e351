"""The CI outputs of ``kebab-eval run`` and ``compare``: JUnit XML (``--junit``), the GitHub job
summary (appended to ``$GITHUB_STEP_SUMMARY`` when it is set, unless ``--no-github-summary``) and
a PR-comment Markdown file (``--pr-comment``, linking ``--report-url`` or the CI job's page).

Where they go is checked before any work starts (:func:`prepare`: an unwritable path is exit 2,
named); they are written after the results are stored and printed and before a failed gate ends
the command (exit 1), so a failing build still has its reports. Each file is written atomically;
the job summary is appended to, never overwritten (other steps write theirs there too).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kebab_eval_pipeline.cli.console import err
from kebab_eval_pipeline.cli.write_failures import output_failure, output_problem
from kebab_eval_pipeline.foundation import atomic
from kebab_eval_pipeline.foundation.errors import InputError, Offender
from kebab_eval_pipeline.foundation.net.secrets import mask_text

if TYPE_CHECKING:
    from kebab_eval_pipeline.reporting.ci_view import CiView

JunitOption = Annotated[
    Path | None,
    typer.Option("--junit", help="Also write the gates as JUnit XML here (one testcase per gate)."),
]
PrCommentOption = Annotated[
    Path | None,
    typer.Option(
        "--pr-comment",
        help="Also write a short Markdown PR comment here (headline metrics, gates, worst queries, "
        "a link to the full report; starts with <!-- kebab-eval -->).",
    ),
]
GithubSummaryOption = Annotated[
    bool,
    typer.Option(
        "--github-summary/--no-github-summary",
        help="Append a Markdown summary to $GITHUB_STEP_SUMMARY when it is set (default: on).",
    ),
]
ReportUrlOption = Annotated[
    str | None,
    typer.Option(
        "--report-url",
        help="The full report's URL for the PR comment and summary (default: the GitHub Actions "
        "run page, or GitLab's $CI_JOB_URL, when set).",
    ),
]

SUMMARY_VARIABLE = "GITHUB_STEP_SUMMARY"


@dataclass(frozen=True)
class CiOutputs:
    """Where the CI outputs go (None: not written) and when the command started."""

    junit: Path | None
    pr_comment: Path | None
    summary: Path | None
    report_url: str | None
    started: datetime
    clock: float

    @property
    def wanted(self) -> bool:
        return any(p is not None for p in (self.junit, self.pr_comment, self.summary))


def _unwritable(path: Path) -> str | None:
    """Why ``path`` cannot be written (None: it can). A missing folder is fine (it is made) as
    long as its nearest existing ancestor is a writable folder."""
    if path.is_dir():
        return "is a folder"
    if path.exists():
        return None if os.access(path, os.W_OK) else "not writable"
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        return f"{parent} is not a folder"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"folder {parent} is not writable"
    return None


def prepare(
    junit: Path | None,
    pr_comment: Path | None,
    github_summary: bool,
    report_url: str | None,
    environ: dict[str, str] | os._Environ | None = None,
) -> CiOutputs:
    """The outputs asked for, every path and the report URL checked now (InputError, exit 2,
    naming each bad option and why) — before a run that may take hours."""
    from kebab_eval_pipeline.reporting.report_link import report_link

    environ = os.environ if environ is None else environ
    summary = Path(environ[SUMMARY_VARIABLE]) if github_summary and environ.get(SUMMARY_VARIABLE) else None
    offenders = []
    for option, path in (
        ("--junit", junit),
        ("--pr-comment", pr_comment),
        (f"${SUMMARY_VARIABLE}", summary),
    ):
        why = None if path is None else (_unwritable(path) or output_problem(path))
        if why is not None:
            offenders.append(Offender(str(path), f"cannot be written: {why}", field=option))
    if offenders:
        raise InputError("CI output path(s) cannot be written", offenders)
    link = report_link(report_url, environ) if (pr_comment or summary) else None
    return CiOutputs(junit, pr_comment, summary, link, datetime.now(UTC), time.monotonic())


def write(outputs: CiOutputs, view: CiView, again: str | None = None) -> None:
    """Write the outputs of ``view`` where ``outputs`` says, naming each on stderr. One that cannot
    be written (a full disk, /dev/full) does not stop the others: then InputError (exit 2) names
    each option, path and reason, and ``again`` — how to write them again from what is stored."""
    from kebab_eval_pipeline.reporting.ci_markdown import COMMENT, SUMMARY, render_ci_markdown
    from kebab_eval_pipeline.reporting.junit import render_junit

    failed: list[InputError] = []

    def attempt(option: str, path: Path, write_it) -> None:
        try:
            write_it()
        except OSError as exc:
            failed.append(output_failure(option, path, exc))

    if outputs.junit is not None:
        seconds = time.monotonic() - outputs.clock
        junit = outputs.junit
        attempt(
            "--junit", junit, lambda: atomic.write_bytes(junit, render_junit(view, outputs.started, seconds))
        )
        if not failed:
            err.print(f"wrote {junit}", markup=False, highlight=False, soft_wrap=True)
    if outputs.pr_comment is not None:
        comment, before = outputs.pr_comment, len(failed)
        text = render_ci_markdown(view, COMMENT, outputs.report_url)
        attempt("--pr-comment", comment, lambda: atomic.write_text(comment, text))
        if len(failed) == before:
            err.print(f"wrote {comment}", markup=False, highlight=False, soft_wrap=True)
    if outputs.summary is not None:
        summary, before = outputs.summary, len(failed)
        text = render_ci_markdown(view, SUMMARY, outputs.report_url)

        def append() -> None:
            summary.parent.mkdir(parents=True, exist_ok=True)
            # Appended, never replaced: the step summary file collects every step's Markdown.
            with open(summary, "a", encoding="utf-8") as fh:
                fh.write(mask_text(text) + "\n")

        attempt(f"${SUMMARY_VARIABLE}", summary, append)
        if len(failed) == before:
            err.print(f"appended the job summary to ${SUMMARY_VARIABLE}", markup=False, highlight=False)
    if failed:
        lines = [str(f) for f in failed] + ([again] if again else [])
        raise InputError("\n".join(lines))


def stored_view(store, run_id: str, settings) -> CiView:
    """A stored run as its CI outputs and ``kebab-eval run``'s text show it: its gates, health
    and — when this same Dagster run stored it — its comparison (a blocking check can stop the
    chain before the comparison; an older attempt's comparison is then not this run's, and its
    regression gates show as not evaluated)."""
    from kebab_eval_pipeline.reporting.ci_view import run_view

    stored = store.stored_run(run_id)
    comparison = stored.comparison()
    writer = (store.manifest("run_metrics", run_id) or {}).get("dagster_run_id")
    if (
        comparison is not None
        and (store.manifest("comparison_report", run_id) or {}).get("dagster_run_id") != writer
    ):
        comparison = None
    return run_view(run_id, stored.metrics, comparison, settings)


def run_outputs(outputs: CiOutputs, store, run_id: str, settings, config: Path | None = None) -> None:
    """The CI outputs of a stored run (:func:`stored_view`); one that cannot be written says how
    to write it again (``kebab-eval runs outputs``) — the run's results are stored."""
    if outputs.wanted:
        options = " ".join(
            f"{option} PATH"
            for option, path in (("--junit", outputs.junit), ("--pr-comment", outputs.pr_comment))
            if path
        )
        again = (
            f"the results of run {run_id} are stored; write its CI outputs again with "
            f"`kebab-eval runs outputs {run_id}{f' --config {config}' if config else ''} {options}`".rstrip()
            + (" (the job summary: --github-summary)" if outputs.summary else "")
        )
        write(outputs, stored_view(store, run_id, settings), again)
