"""``kebab-eval runs add``, ``runs list`` and ``runs outputs``: run partitions, registered and
listed, and a stored run's CI outputs written again."""

from __future__ import annotations

import os
from datetime import UTC
from pathlib import Path
from typing import Annotated

import typer

from kebab_eval_pipeline.cli.address import ChainOption, ConfigOption, GateOption
from kebab_eval_pipeline.cli.ci_outputs import JunitOption, PrCommentOption, ReportUrlOption
from kebab_eval_pipeline.cli.console import out
from kebab_eval_pipeline.cli.instance import check_own_location, dagster_home, open_instance, open_store
from kebab_eval_pipeline.cli.show import print_runs_table


def runs_add(
    run_id: Annotated[
        str | None,
        typer.Argument(
            metavar="ID",
            help="Partition key (default: ci-<UTC time>-<commit> in CI, else <user>-<UTC time>).",
            show_default=False,
        ),
    ] = None,
    quiet: Annotated[
        bool,
        typer.Option("--quiet", "-q", help="Print only the run id (for RUN_ID=$(kebab-eval runs add -q))."),
    ] = False,
    chain: ChainOption = None,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            help="With --chain: the chain's own config file. (The package's own location reads "
            "$KEBAB_EVAL_CONFIG, as Dagster loads it.)",
        ),
    ] = None,
) -> None:
    """Register a run partition only (then `dagster asset materialize --partition ID`).

    Without ID a new one is made (`kebab-eval runs add -q` prints just that id). Also records the
    golden hash and index version the run will read (config from $KEBAB_EVAL_CONFIG, as the code
    location loads it). With --chain NAME and the chain's --config: a partition of a team's
    evaluation_chain(NAME, …) (NAME__eval_runs; then `dagster asset materialize -m <your project>
    --select 'NAME/*' --partition ID`).
    """
    from kebab_eval_pipeline.chain.settings import load_settings
    from kebab_eval_pipeline.cli.address import chain_names
    from kebab_eval_pipeline.definitions import CONFIG_ENV
    from kebab_eval_pipeline.foundation.errors import InputError, Offender
    from kebab_eval_pipeline.foundation.run_ids import check_run_id, new_run_id
    from kebab_eval_pipeline.orchestration.assets import observe_inputs

    if config is not None and chain is None:
        raise InputError(
            "--config without --chain",
            [
                Offender(
                    "--config",
                    "the package's own location reads $KEBAB_EVAL_CONFIG (as `dagster` loads it): "
                    "export it, or pass --chain NAME for a chain's partition",
                )
            ],
        )
    names = chain_names(chain, config)
    run_id = check_run_id(new_run_id() if run_id is None else run_id)
    instance = open_instance()
    if chain is None:
        check_own_location(instance, "runs add")
    observe_inputs(
        instance, load_settings(str(config) if chain else os.environ.get(CONFIG_ENV) or None), names
    )
    if instance.has_dynamic_partition(names.partitions_name, run_id):
        out.print(run_id if quiet else f"run {run_id} is already registered", highlight=False)
        return
    instance.add_dynamic_partitions(names.partitions_name, [run_id])
    home = os.environ["DAGSTER_HOME"]
    out.print(
        run_id if quiet else f"registered run {run_id} in {names.partitions_name} (DAGSTER_HOME={home})",
        soft_wrap=True,
        highlight=False,
    )


def runs_list(
    config: ConfigOption = None,
    chain: ChainOption = None,
    gate: GateOption = None,
) -> None:
    """Registered run partitions, oldest first, and whether their metrics are stored.

    `started` is the UTC time in a generated id, else the run's created_at; runs with neither
    follow in the order they were registered. With --chain: the chain's partitions
    (NAME__eval_runs) and its store; with --gate: the check's stored runs (a check's runs are not
    partitions).
    """
    from kebab_eval_pipeline.cli.tables import Field
    from kebab_eval_pipeline.foundation.run_ids import run_started, sort_run_ids
    from kebab_eval_pipeline.orchestration.registered_runs import partitions_name, registered_runs

    store = open_store(config, chain, gate)
    created = {m["run_id"]: m.get("info", {}).get("created_at") for m in store.runs("run_metrics")}
    if gate is not None:
        registered: list[str] = list(created)
    else:  # the registered ids straight from a default SQLite instance: no Dagster import for a listing
        registered = list(registered_runs(dagster_home()[0], open_instance, partitions_name(chain)))
    keys = sort_run_ids(registered, created)
    starts = [run_started(key, created.get(key)) for key in keys]
    shown = ["" if t is None else f"{t.astimezone(UTC):%Y-%m-%d %H:%M:%S}" for t in starts]
    print_runs_table(
        Field("run_id", keys),
        Field("started (UTC)", shown),
        labels=[Field("metrics stored", ["yes" if key in created else "no" for key in keys])],
    )


def runs_outputs(
    run_id: Annotated[str, typer.Argument(metavar="ID", help="The stored run.", show_default=False)],
    config: Annotated[
        Path | None, typer.Option("--config", help="The run's config (its storage and gates).")
    ] = None,
    chain: ChainOption = None,
    gate: GateOption = None,
    junit: JunitOption = None,
    pr_comment: PrCommentOption = None,
    github_summary: Annotated[
        bool,
        typer.Option(
            "--github-summary/--no-github-summary",
            help="Append the Markdown summary to $GITHUB_STEP_SUMMARY when it is set (default: off).",
        ),
    ] = False,
    report_url: ReportUrlOption = None,
) -> None:
    """Write a stored run's CI outputs again — JUnit XML, the PR comment, the job summary — as
    `kebab-eval run` wrote them, from what the run stored (nothing runs again). For when the run's
    own --junit/--pr-comment could not be written (a full disk) or went elsewhere."""
    from kebab_eval_pipeline.chain.settings import load_settings
    from kebab_eval_pipeline.cli import ci_outputs
    from kebab_eval_pipeline.foundation.errors import InputError, Offender

    outputs = ci_outputs.prepare(junit, pr_comment, github_summary, report_url)
    if not outputs.wanted:
        raise InputError(
            "no output asked for",
            [Offender("runs outputs", "give --junit PATH, --pr-comment PATH or --github-summary")],
        )
    store = open_store(config, chain, gate)
    if not store.exists("run_metrics", run_id):
        raise InputError(
            f"no stored metrics for run {run_id!r}",
            [Offender(str(store.base), "not stored (or not under this storage path: --config)")],
        )
    ci_outputs.run_outputs(outputs, store, run_id, load_settings(config), config)
