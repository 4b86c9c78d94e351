"""``kebab-eval bisect METRIC``: where a metric changed over the stored runs, and what changed with
it. A reading command: no Dagster instance is opened."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from kebab_eval_pipeline.cli.address import ChainOption, GateOption
from kebab_eval_pipeline.cli.instance import open_store
from kebab_eval_pipeline.cli.run_filters import OutcomeOption, RoleFilterOption
from kebab_eval_pipeline.foundation.errors import InputError, Offender


def bisect(
    metric: Annotated[
        str,
        typer.Argument(
            metavar="METRIC",
            help="A per-query metric to follow: mrr, hit@5, ndcg@10, recall@10, … (a wrong name lists them).",
            show_default=False,
        ),
    ],
    since: Annotated[
        str | None,
        typer.Option(
            "--since", help="From this run id, or this date/time (2026-11-27, 2026-11-27T09:30; UTC)."
        ),
    ] = None,
    until: Annotated[
        str | None,
        typer.Option("--until", help="Up to this run id, or this date/time (a bare date: the whole day)."),
    ] = None,
    golden: Annotated[
        str | None,
        typer.Option(
            "--golden",
            help="Only runs on this golden set: its name (all its versions) or the start of its sha256 "
            "(one version). Default: the latest run's golden set.",
        ),
    ] = None,
    alpha: Annotated[
        float, typer.Option("--alpha", help="Significance level of the adjusted p-values.")
    ] = 0.05,
    adjust: Annotated[
        str,
        typer.Option("--adjust", help="Correction over the steps: holm or bh (Benjamini–Hochberg)."),
    ] = "holm",
    tolerance: Annotated[
        float,
        typer.Option("--tolerance", help="A query flipped when its value moved by more than this."),
    ] = 0.0,
    fmt: Annotated[str, typer.Option("--format", help="text, md (Markdown) or json.")] = "text",
    max_flips: Annotated[
        int, typer.Option("--max-flips", help="Flipped queries shown per change in text and md (json: all).")
    ] = 10,
    config: Annotated[
        Path | None,
        typer.Option("--config", help="Run config: storage, and compare settings (seed, resamples)."),
    ] = None,
    role: RoleFilterOption = None,
    outcome: OutcomeOption = None,
    chain: ChainOption = None,
    gate: GateOption = None,
) -> None:
    """Find where METRIC changed over the stored runs on one golden set, oldest first.

    Each pair of consecutive runs gets the paired test `compare A B` runs (the queries both scored),
    with the p-values adjusted over all steps; a change is a step whose adjusted p is below --alpha.
    For each change: the recorded settings that differ between its two runs (versions, system
    settings, pipeline version, golden hash) and the queries whose value moved, worst first. Also
    a first-vs-last test (a slow drift). Runs are ordered by start time, run id breaking ties. Each
    run's role and outcome are listed; a change whose run before it failed its blocking checks, or
    whose runs are of two role families (a sweep variant beside a regular run), says so; --role and
    --outcome keep only some runs."""
    from kebab_eval_pipeline.chain.settings import load_settings
    from kebab_eval_pipeline.compare.bisect_stored import bisect_stored
    from kebab_eval_pipeline.reporting.bisect_report import FORMATS, render

    offenders = []
    if fmt not in FORMATS:
        offenders.append(Offender("--format", f"{fmt!r}: use {', '.join(FORMATS)}"))
    if max_flips < 0:
        offenders.append(Offender("--max-flips", f"{max_flips}: must be 0 or more"))
    if offenders:
        raise InputError("bad bisect options", offenders)
    settings = load_settings(config)
    result = bisect_stored(
        open_store(config, chain, gate),
        metric,
        since=since,
        until=until,
        golden=golden,
        alpha=alpha,
        adjust_by=adjust,
        tolerance=tolerance,
        options=settings.compare,
        roles=role or [],
        outcome=outcome,
    )
    sys.stdout.write(render(result, fmt, max_flips))
