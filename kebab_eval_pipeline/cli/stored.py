"""``kebab-eval compare``, ``export`` and ``history``: what stored runs say, compared, exported and
followed across runs. Reading commands: no Dagster instance is opened."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from kebab_eval_pipeline.cli import ci_outputs
from kebab_eval_pipeline.cli.address import ChainOption, ConfigOption, GateOption
from kebab_eval_pipeline.cli.ci_outputs import (
    GithubSummaryOption,
    JunitOption,
    PrCommentOption,
    ReportUrlOption,
)
from kebab_eval_pipeline.cli.console import err, out
from kebab_eval_pipeline.cli.instance import open_store
from kebab_eval_pipeline.cli.run_filters import OutcomeOption, RoleFilterOption, check_filters
from kebab_eval_pipeline.cli.show import print_runs_table
from kebab_eval_pipeline.cli.write_failures import output_failure
from kebab_eval_pipeline.foundation import atomic
from kebab_eval_pipeline.foundation.errors import GateFailure, InputError, Offender
from kebab_eval_pipeline.foundation.number_text import value_text


def compare(
    runs: Annotated[
        list[str],
        typer.Argument(
            help="Run ids: two (A B: A is the baseline, delta = B − A) or three or more (a ranking).",
            show_default=False,
        ),
    ],
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    html: Annotated[
        Path | None, typer.Option("--html", help="Also write the standalone HTML report (with charts) here.")
    ] = None,
    out_dir: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="Also write the report's three files (comparison.md/.html/.json for two runs, "
            "ranking.md/.html/.json for more) into this folder.",
        ),
    ] = None,
    metric: Annotated[
        list[str] | None,
        typer.Option(
            "--metric",
            help="A ranking's metric (repeatable; default: mrr, ndcg@10 and hit@5, those the runs have).",
        ),
    ] = None,
    alpha: Annotated[
        float | None,
        typer.Option(
            "--alpha",
            help="A ranking's significance level for the Holm-adjusted p-values (default 0.05).",
        ),
    ] = None,
    strict_chunker_version: Annotated[
        bool,
        typer.Option(
            "--strict-chunker-version", help="Refuse (exit 2) when the runs' chunker versions differ."
        ),
    ] = False,
    config: Annotated[
        Path | None,
        typer.Option("--config", help="Run config: storage, compare settings and regression gates."),
    ] = None,
    chain: ChainOption = None,
    gate: GateOption = None,
    junit: JunitOption = None,
    pr_comment: PrCommentOption = None,
    github_summary: GithubSummaryOption = True,
    report_url: ReportUrlOption = None,
) -> None:
    """Compare two stored runs (delta = B − A): the same report as the comparison_report asset.
    Three or more: rank them, with every pairwise test (Holm-adjusted per metric) and letters
    (runs sharing a letter are not significantly different).

    Exit 1 when a blocking regression or verdict gate of --config fails (two runs only)."""
    if len(runs) < 2:
        raise InputError(
            "compare needs run ids",
            [Offender("RUNS", f"{len(runs)} given: two to compare (A B), three or more to rank")],
        )
    if len(runs) == 2 and (metric or alpha is not None):
        given = (["--metric"] if metric else []) + (["--alpha"] if alpha is not None else [])
        raise InputError(
            "options of a ranking given to a comparison of two runs",
            [Offender(name, "ranks three or more runs: give three or more run ids") for name in given],
        )
    if len(runs) > 2:
        if junit is not None or pr_comment is not None:
            given = (["--junit"] if junit else []) + (["--pr-comment"] if pr_comment else [])
            raise InputError(
                "CI outputs of a ranking",
                [Offender(name, "has gates to report only for two runs (compare A B)") for name in given],
            )
        _rank(runs, as_json, html, out_dir, metric, alpha, strict_chunker_version, config, chain, gate)
        return
    a, b = runs
    from kebab_eval_pipeline.chain.pipeline import compare_stored
    from kebab_eval_pipeline.chain.settings import load_settings
    from kebab_eval_pipeline.compare.document import render_json
    from kebab_eval_pipeline.gates.evaluate import check_gate_names

    settings = load_settings(config)
    check_gate_names(settings, str(config) if config else "<config>")
    outputs = ci_outputs.prepare(junit, pr_comment, github_summary, report_url)
    report = compare_stored(
        open_store(config, chain, gate), a, b, settings, strict_chunker_version=strict_chunker_version or None
    )
    gates = report.info["gates"]
    if html is not None:
        atomic.write_bytes(html, report.files["comparison.html"])
        err.print(f"wrote {html}", markup=False)
    _write_files(out_dir, report.files)
    if as_json:
        sys.stdout.write(render_json(report))
    else:
        out.print(report.markdown, markup=False, highlight=False)
    for g in gates:
        state = "skip" if g["skipped"] else "pass" if g["passed"] else ("FAIL" if g["blocking"] else "warn")
        err.print(f"gate {state:4} {g['name']}: {g['reason']}", markup=False, highlight=False)
    if gates:
        from kebab_eval_pipeline.reporting.gate_text import tally_text

        err.print(f"checks: {tally_text(gates, None)}", markup=False, highlight=False)
    if outputs.wanted:
        from kebab_eval_pipeline.reporting.ci_view import comparison_view

        ci_outputs.write(
            outputs,
            comparison_view(report),
            f"runs {a} and {b} are stored and unchanged; run `kebab-eval compare {a} {b}` again to write it",
        )
    failed = [g["name"] for g in gates if g["blocking"] and not g["passed"]]
    if failed:
        raise GateFailure(f"{len(failed)} blocking gate(s) failed: " + ", ".join(failed))


def _rank(
    runs: list[str],
    as_json: bool,
    html: Path | None,
    out_dir: Path | None,
    metric: list[str] | None,
    alpha: float | None,
    strict_chunker_version: bool,
    config: Path | None,
    chain: str | None = None,
    gate: str | None = None,
) -> None:
    """``compare A B C …``: the ranking, printed (Markdown or JSON) and written where asked."""
    from kebab_eval_pipeline.chain.pipeline import rank_stored
    from kebab_eval_pipeline.chain.settings import load_settings
    from kebab_eval_pipeline.compare.ranking import DEFAULT_ALPHA

    settings = load_settings(config)
    ranking = rank_stored(
        open_store(config, chain, gate),
        runs,
        settings,
        metrics=metric,
        alpha=DEFAULT_ALPHA if alpha is None else alpha,
        strict_chunker_version=strict_chunker_version or None,
    )
    if html is not None:
        atomic.write_bytes(html, ranking.files["ranking.html"])
        err.print(f"wrote {html}", markup=False)
    _write_files(out_dir, ranking.files)
    for warning in ranking.info["warnings"]:
        err.print(f"warning: {warning}", markup=False, highlight=False, soft_wrap=True)
    if as_json:
        sys.stdout.write(ranking.files["ranking.json"].decode("utf-8"))
    else:
        out.print(ranking.markdown, markup=False, highlight=False)


def _write_files(folder: Path | None, files: dict[str, bytes]) -> None:
    """The report's files into ``folder`` (made when missing), each written atomically."""
    if folder is None:
        return
    for name, content in files.items():
        atomic.write_bytes(folder / name, content)
    shown = ", ".join(str(folder / name) for name in files)
    err.print(f"wrote {shown}", markup=False, highlight=False, soft_wrap=True)


def export(
    run_id: Annotated[str, typer.Argument(help="The stored run to export.")],
    fmt: Annotated[str, typer.Option("--format", help="json or trec.")] = "json",
    out_path: Annotated[
        Path | None, typer.Option("--out", help="File to write (json: default stdout).")
    ] = None,
    config: ConfigOption = None,
    chain: ChainOption = None,
    gate: GateOption = None,
) -> None:
    """Export a stored run as JSON (its metrics, gates, versions and per-query scores) or a TREC run
    file + qrels (a repeated run: per-query means over the repeats and the noise floor in JSON, one
    TREC run file per repeat)."""
    from kebab_eval_pipeline.foundation.json_records import finite_json
    from kebab_eval_pipeline.reporting.export import export_json, export_trec
    from kebab_eval_pipeline.reporting.export_repeats import export_trec_repeats, repeat_count

    store = open_store(config, chain, gate)
    repeats = repeat_count(store, run_id)
    if repeats > 1 and fmt == "trec":  # one run file per repeat, never one repeat as the run
        for run_file, qrels, _ in export_trec_repeats(store, run_id, out_path or Path(f"{run_id}.trec")):
            err.print(f"wrote {run_file} and {qrels}", markup=False)
        return
    if fmt == "json":
        doc, nulled = finite_json(export_json(store, run_id))
        if nulled:  # an older run stored impossible numbers: JSON has no inf/NaN, so null + say so
            shown = ", ".join(nulled[:5]) + (", …" if len(nulled) > 5 else "")
            err.print(
                f"warning: run {run_id} stored {len(nulled)} non-finite number(s), written as null: {shown}",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
        text = json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
        if out_path:
            try:
                atomic.write_text(out_path, text)
            except OSError as exc:  # a full disk, /dev/full: named with the option (the run is stored)
                raise output_failure(
                    "--out", out_path, exc, f"run {run_id} is stored and unchanged"
                ) from None
            err.print(f"wrote {out_path}", markup=False)
        else:
            sys.stdout.write(text)
    elif fmt == "trec":
        target = out_path or Path(f"{run_id}.trec")
        try:
            run_file, qrels, docnos = export_trec(store, run_id, target)
        except OSError as exc:
            shown = exc.filename or target
            raise output_failure("--out", shown, exc, f"run {run_id} is stored and unchanged") from None
        err.print(f"wrote {run_file}, {qrels} and {docnos} (what each docno stands for)", markup=False)
    else:
        raise InputError("unknown export format", [Offender("--format", f"{fmt!r}: use json or trec")])


def history(
    metric: Annotated[
        list[str] | None, typer.Option("--metric", help="Metric(s) to show (repeatable).")
    ] = None,
    config: ConfigOption = None,
    chain: ChainOption = None,
    gate: GateOption = None,
    as_csv: Annotated[
        bool, typer.Option("--csv", help="Print CSV (for scripts and CI) instead of a table.")
    ] = False,
    role: RoleFilterOption = None,
    outcome: OutcomeOption = None,
) -> None:
    """Headline metrics across stored runs, oldest first, with each run's role and outcome."""
    roles, outcome = check_filters(role, outcome)
    from kebab_eval_pipeline.reporting.history import metric_history

    frame = metric_history(open_store(config, chain, gate), metric, roles=roles, outcome=outcome)
    if as_csv:
        sys.stdout.write(frame.to_csv(index=False, na_rep="null"))
        return
    if frame.empty:
        out.print("no stored runs" + (" match the filters" if roles or outcome else ""))
        return
    from kebab_eval_pipeline.cli.tables import Field
    from kebab_eval_pipeline.reporting.history import RUN_COLUMNS

    def cells(column: str) -> list[str]:
        return [value_text(v) for v in frame[column]]

    # a failed run names what failed it: "failed (gate_mrr_min)"
    outcomes = [o if not f else f"{o} ({f})" for o, f in zip(frame["outcome"], frame["failed"], strict=True)]
    print_runs_table(
        Field("run_id", cells("run_id")),
        Field("created_at", cells("created_at")),
        labels=[
            *(Field(c, cells(c)) for c in ("golden", "chunker_version", "role")),
            Field("outcome", outcomes),
        ],
        numbers=[Field(str(c), cells(c)) for c in frame.columns if c not in RUN_COLUMNS],
    )
