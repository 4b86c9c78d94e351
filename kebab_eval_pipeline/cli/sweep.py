"""``kebab-eval sweep CONFIG``: every variant of the config's ``sweep:`` grid run as a normal stored
run (``kebab-eval run --run-id sweep-<name>-<variant>``), then the leaderboard ranking them."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from kebab_eval_pipeline.cli.address import ChainOption
from kebab_eval_pipeline.cli.console import err
from kebab_eval_pipeline.foundation.errors import GateFailure, InputError, Offender, SystemHealthFailure
from kebab_eval_pipeline.foundation.number_text import value_text

FORMATS = ("text", "markdown", "json")


def sweep(
    config: Annotated[Path, typer.Argument(help="Run config YAML with a sweep: block.", show_default=False)],
    storage: Annotated[
        str | None,
        typer.Option("--storage", help="Artifact base path or fsspec URL (overrides the config's storage)."),
    ] = None,
    only: Annotated[
        list[str] | None,
        typer.Option(
            "--only",
            help="Run only this variant (repeatable): its slug, the slug without the hash, or its run id. "
            "The leaderboard still ranks every stored variant.",
        ),
    ] = None,
    rerun: Annotated[
        bool, typer.Option("--rerun", help="Run variants again even when their runs are stored.")
    ] = False,
    output: Annotated[str, typer.Option("--format", help="Leaderboard as text, markdown or json.")] = "text",
    outcome: Annotated[
        str | None,
        typer.Option(
            "--outcome",
            help="Rank only the variants that passed (system healthy, every blocking gate passed) or "
            "failed; the others are listed, not ranked. Default: every stored variant.",
        ),
    ] = None,
    chain: ChainOption = None,
) -> None:
    """Run every variant of the config's sweep (each a stored run with id sweep-<name>-<variant>;
    variants already stored are skipped), then print the leaderboard: the variants ranked on the
    sweep's metric with pairwise paired tests (Holm-adjusted) and their settings as columns.

    Each variant's role and outcome (passed, or the checks that failed it) are columns of the
    leaderboard. With --chain NAME (CONFIG being the chain's own config): the sweep of a team's
    evaluation_chain(NAME, …), its variants runs of that chain (NAME__eval_runs, its storage folder).

    Exit 1 when a variant's blocking gate or system health failed (the other variants still run),
    2 for a bad config or option."""
    from kebab_eval_pipeline.chain.run_overrides import settings_for_run
    from kebab_eval_pipeline.cli.address import check_chain
    from kebab_eval_pipeline.cli.instance import dagster_home
    from kebab_eval_pipeline.cli.run import run_partition
    from kebab_eval_pipeline.cli.run_filters import check_filters
    from kebab_eval_pipeline.foundation.location import check_storage, run_storage
    from kebab_eval_pipeline.sweep.grid import expand, select

    problems = []
    try:
        check_filters(None, outcome)
    except InputError as exc:
        problems += exc.offenders
    if output not in FORMATS:
        problems.append(Offender("--format", f"{output!r}: expected one of {', '.join(FORMATS)}"))
    if storage is not None:
        if "://" not in storage:  # a relative path is the caller's, not the config file's
            storage = str(Path(storage).expanduser().resolve())
        try:
            check_storage(storage, "--storage")
        except InputError as exc:
            problems += exc.offenders
    if problems:
        raise InputError("invalid options", problems)
    check_chain(chain, config)
    settings = settings_for_run(config)
    if settings.sweep is None:
        raise InputError(
            "no sweep to run", [Offender(str(config), "the config has no sweep: block", field="sweep")]
        )
    if storage is not None:
        settings = settings.model_copy(update={"storage": storage})
    variants = expand(settings.sweep.name, settings.sweep.grid)
    chosen, unknown = select(variants, only) if only else (variants, [])
    if unknown:
        known = ", ".join(v.slug for v in variants)
        raise InputError(
            "unknown variants",
            [
                Offender("--only", f"{w!r}: not a variant of sweep {settings.sweep.name!r} ({known})")
                for w in unknown
            ],
        )
    from kebab_eval_pipeline.chain.pipeline import rank_sweep, stored_variants, sweep_metric
    from kebab_eval_pipeline.store.runs import RunStore

    dagster_home()  # the default storage lies beside the instance
    store = RunStore(run_storage(settings.storage, chain=chain))
    metric = sweep_metric(settings)
    stored = {v.run_id for v in stored_variants(store, settings)[0]}
    failures: list[tuple[str, Exception]] = []
    golden_parses: dict = {}  # the variants' golden set, parsed once (3.5 s a variant at 100k queries)
    if chain is None and (rerun or any(v.run_id not in stored for v in chosen)):
        from kebab_eval_pipeline.cli.instance import check_own_location, open_instance

        check_own_location(open_instance(), "sweep")  # before the first variant, not inside it
    for i, variant in enumerate(chosen, 1):
        step = f"[{i}/{len(chosen)}] {variant.run_id} ({variant.label()})"
        if variant.run_id in stored and not rerun:
            err.print(f"{step}: stored, skipped (--rerun runs it again)", markup=False, highlight=False)
            continue
        err.print(f"{step}: running", markup=False, highlight=False)
        try:
            run_partition(
                config,
                {},
                variant.run_id,
                storage=storage,
                show=False,
                chain=chain,
                command="sweep",
                golden_parses=golden_parses,
            )
        except (GateFailure, SystemHealthFailure) as exc:  # stored; the other variants still run
            failures.append((variant.run_id, exc))
            err.print(f"{step}: {exc}", markup=False, highlight=False)
        value = store.stored_run(variant.run_id).metrics.metrics.get(metric)
        err.print(f"{step}: {metric} {value_text(value)}", markup=False, highlight=False)
    if len(stored_variants(store, settings)[0]) < 2:
        err.print("no leaderboard: fewer than two variants are stored", markup=False, highlight=False)
    else:
        try:
            board = rank_sweep(store, settings, outcome)
        except InputError as exc:
            if outcome is None or exc.summary != "nothing to rank":
                raise
            board = None  # the variants ran; too few of them have that outcome to rank
            reason = exc.offenders[0].reason
            err.print(f"no leaderboard: {reason}", markup=False, highlight=False)
        if board is not None:
            _print_leaderboard(board, output)
    if failures:
        kind = GateFailure if any(isinstance(e, GateFailure) for _, e in failures) else SystemHealthFailure
        raise kind(f"{len(failures)} variant(s) failed: " + "; ".join(f"{r}: {e}" for r, e in failures))


def _print_leaderboard(board, output: str) -> None:
    from kebab_eval_pipeline.sweep.leaderboard import render_json, render_markdown, render_text

    render = {"text": render_text, "markdown": render_markdown, "json": render_json}[output]
    sys.stdout.write(render(board))
