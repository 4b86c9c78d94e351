"""``kebab-eval run`` and ``rejudge``: a run's inputs checked before Dagster starts, then its
partition materialized in this process (:mod:`.driver`) and its stored numbers printed (:mod:`.show`)."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from kebab_eval_pipeline.cli import ci_outputs, interrupt
from kebab_eval_pipeline.cli.address import ChainOption, chain_names, check_chain
from kebab_eval_pipeline.cli.ci_outputs import (
    GithubSummaryOption,
    JunitOption,
    PrCommentOption,
    ReportUrlOption,
)
from kebab_eval_pipeline.cli.console import err
from kebab_eval_pipeline.cli.driver import cli_builder, drive
from kebab_eval_pipeline.cli.instance import check_own_location, dagster_home, open_instance
from kebab_eval_pipeline.cli.instance_sqlite import files_kept_open
from kebab_eval_pipeline.cli.show import print_run
from kebab_eval_pipeline.foundation.errors import InputError, Offender


def run(
    run_id: Annotated[
        str | None,
        typer.Option(
            "--run-id", help="Partition key (default: ci-<UTC time>-<commit> in CI, else <user>-<UTC time>)."
        ),
    ] = None,
    config: Annotated[
        Path | None, typer.Option("--config", help="Run config YAML (system, gates, storage, judge, …).")
    ] = None,
    golden: Annotated[
        str | None, typer.Option("--golden", help="Golden file (overrides the config).")
    ] = None,
    system: Annotated[
        str | None,
        typer.Option(
            "--system",
            help="reference | command | http | replay | python (its settings come from the config's "
            "system block).",
        ),
    ] = None,
    mode: Annotated[
        str | None,
        typer.Option("--mode", help="Retrieval mode of the reference system: lexical, vector or hybrid."),
    ] = None,
    answers: Annotated[
        bool | None, typer.Option("--answers/--no-answers", help="Ask for answers too.")
    ] = None,
    baseline: Annotated[
        str | None,
        typer.Option(
            "--baseline",
            help="auto (the golden set's pinned baseline, else previous) | previous (the most recent "
            "earlier run on the same golden sha256) | pinned | none | <run_id>.",
        ),
    ] = None,
    chunk_size: Annotated[int | None, typer.Option("--chunk-size", help="Reference chunker size.")] = None,
    judge: Annotated[
        bool | None,
        typer.Option(
            "--judge/--no-judge",
            help="Turn the LLM judge on (the config's judge: block, else the default local judge) or off.",
        ),
    ] = None,
    repeat: Annotated[
        str | None,
        typer.Option(
            "--repeat",
            metavar="N|auto",
            help="Ask every query N times (1-100; overrides the config's repeat:): the headline is the "
            "mean over repeats, and the run reports its noise floor and flaky queries. auto: repeat "
            "until each gated metric's standard error reaches repeat_target of its gate's margin "
            "(3 to repeat_max repeats; a deterministic system stops at 3).",
        ),
    ] = None,
    role: Annotated[
        str | None,
        typer.Option(
            "--role",
            help="What this run is: ci | nightly | system-change | golden-change | manual | team-check | "
            "experiment (default: ci when CI is set, else manual). An automatic baseline is a passing run "
            "of the same family: experiments are compared with experiments only.",
        ),
    ] = None,
    junit: JunitOption = None,
    pr_comment: PrCommentOption = None,
    github_summary: GithubSummaryOption = True,
    report_url: ReportUrlOption = None,
    chain: ChainOption = None,
) -> None:
    """Register a run partition and materialize the whole chain in-process.

    With --chain NAME (and the chain's --config): a run of a team's evaluation_chain(NAME, …), as
    its own job would make it — partition of NAME__eval_runs, stored in the chain's folder."""
    from kebab_eval_pipeline.foundation.run_ids import check_run_id, new_run_id
    from kebab_eval_pipeline.foundation.run_roles import check_role
    from kebab_eval_pipeline.systems.settings import SYSTEM_KINDS

    if system not in (None, *SYSTEM_KINDS):
        raise InputError(
            "unknown system kind",
            [Offender("--system", f"{system!r}: expected one of {', '.join(SYSTEM_KINDS)}")],
        )
    if role is not None:
        check_role(role)
    run_id = check_run_id(new_run_id() if run_id is None else run_id)
    overrides = {
        k: v
        for k, v in {
            "golden": golden,
            "system_kind": system,
            "mode": mode,
            "answers": answers,
            "baseline": baseline,
            "chunk_size": chunk_size,
            "judge": judge,
            "repeat": _repeat_option(repeat),
        }.items()
        if v is not None
    }
    outputs = ci_outputs.prepare(junit, pr_comment, github_summary, report_url)
    run_partition(config, overrides, run_id, outputs=outputs, role=role, chain=chain)


def _repeat_option(value: str | None) -> int | str | None:
    """``--repeat``'s value as the config's ``repeat:`` reads it: ``auto``, or a whole number
    (its range is checked with the config); anything else is refused (exit 2)."""
    if value is None or value == "auto":
        return value
    try:
        return int(value, 10)
    except ValueError:
        raise InputError(
            "Invalid value for '--repeat'",
            [
                Offender(
                    "--repeat",
                    f"{value!r} is not a number of repeats: give an integer from 1 to 100, or auto",
                )
            ],
        ) from None


@contextlib.contextmanager
def _start_up_uncollected() -> Iterator[None]:
    """A run's start-up — the imports (pandas, Dagster, SQLAlchemy), the inputs' checks (a golden
    set or a replayed trace: millions of objects at a million queries), the instance, the
    definitions — without Python's cyclic collector: it makes no cycles worth collecting, and the
    collector's full passes rescanned the growing heap (a tenth of a demo run's CPU; seconds at
    1M queries). Reference counting frees as usual. :func:`run_partition` gives the collector back
    for the chain's steps; on the way out the caller gets it back as it was, its heap unfrozen (a
    caller running several commands in one process: tests, a sweep's variants)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.unfreeze()
        if collecting:
            gc.enable()
        else:
            gc.disable()


@_start_up_uncollected()
def run_partition(
    config: Path | None,
    overrides: dict,
    run_id: str,
    *,
    storage: str | None = None,
    outputs: ci_outputs.CiOutputs | None = None,
    show: bool = True,
    role: str | None = None,
    chain: str | None = None,
    command: str = "run",
    golden_parses: dict | None = None,
) -> None:
    """``kebab-eval run``'s run of partition ``run_id`` (also each variant of ``kebab-eval
    sweep``): the settings of ``config`` with the CLI's ``overrides`` — a sweep variant's for a
    sweep run id (:func:`~kebab_eval_pipeline.chain.run_overrides.variant_settings`, as every step
    resolves them) — checked, the partition registered and the chain materialized in-process;
    ``storage`` replaces the config's storage; ``show`` prints the stored numbers, ``outputs``
    writes the CI outputs; ``role`` (checked by the caller) is the run's explicit role tag, else
    its trigger tag (``ci`` in CI, else ``cli``) decides it (:mod:`kebab_eval_pipeline.foundation.run_roles`);
    ``chain``: a run of that chain (its definitions built from ``config`` as
    ``evaluation_chain(chain, config=config)`` builds them); ``command`` names the command in
    messages; ``golden_parses``: a sweep's golden parses by input, shared by its variants (one
    parse for the sweep, and every variant scored on the same set). Raises what a run raises
    (InputError, GateFailure, …)."""
    from kebab_eval_pipeline.chain.run_overrides import settings_for_run, variant_settings
    from kebab_eval_pipeline.foundation.run_ids import TRIGGER_TAG, in_ci
    from kebab_eval_pipeline.foundation.run_roles import ROLE_TAG

    interrupt.set_note(f"run {run_id} had not started: nothing of it was stored")  # Ctrl-C from here
    check_chain(chain, config)
    dagster_home()  # anchors the default storage beside the instance (opened only once the inputs are good)
    # Fail fast on a bad config, bad golden input, a stale golden set, a missing source_root or
    # judge model, storage that cannot be reached — before any run exists, and before Dagster is
    # imported or an instance opened (seconds under load): the same settings the run will use.
    settings = variant_settings(settings_for_run(config, overrides), run_id)
    if storage is not None:
        settings = settings.model_copy(update={"storage": storage})
    _check_inputs(settings, config, chain, run_id, golden_parses)
    try:
        names = chain_names(chain, config)
        from kebab_eval_pipeline.chain.pipeline import headline
        from kebab_eval_pipeline.orchestration.assets import observe_inputs

        # the instance's SQLite files are opened once for the whole run (cli/instance_sqlite.py)
        with files_kept_open(dagster_home()[0]):
            instance = open_instance()
            if chain is None:
                check_own_location(instance, command)

            def shown(store) -> None:
                if show:
                    print_run(store, run_id, settings.k, headline, settings)
                if outputs is not None:
                    ci_outputs.run_outputs(
                        outputs, store, run_id, settings, config
                    )  # before a failed gate's exit 1

            def register() -> None:
                instance.add_dynamic_partitions(names.partitions_name, [run_id])
                from kebab_eval_pipeline.orchestration.run_context import handed_system

                observe_inputs(instance, settings, names, handed_system(run_id, settings))

            builder = cli_builder(config, storage, overrides, chain)
            defs = builder.definitions()
            # The start-up's heap (the imports, what the checks parsed — millions of objects at a
            # million queries —, the definitions) lives as long as the run: frozen, the collector,
            # back for the chain's steps, does not rescan it.
            gc.freeze()
            gc.enable()
            drive(
                defs,
                instance,
                run_id,
                builder=builder,
                tags={TRIGGER_TAG: "ci" if in_ci() else "cli", **({ROLE_TAG: role} if role else {})},
                prepare=register,
                show=shown,
                names=names,
            )
    finally:
        from kebab_eval_pipeline.orchestration.run_context import end_run

        end_run(run_id)  # what this process kept for the run (its context, an unused hand-over)


def _check_inputs(
    settings,
    config: Path | None,
    chain: str | None = None,
    run_id: str | None = None,
    golden_parses: dict | None = None,
) -> None:
    """The run's inputs checked before any run exists (InputError, exit 2): the config's gate names,
    the golden file (parsed once: the golden_set step stores this parse), the source root and judge
    model, the storage, the stale-golden check against the system (handed over to run ``run_id``'s
    plan step: checked once, :mod:`~kebab_eval_pipeline.orchestration.run_context`), and the
    regression gates' resolution against a baseline known before the run (a run id or a pin).
    Prints the warnings. Nothing parsed here is held by the caller: the hand-over keeps the golden parse until
    the golden_set step has stored it, and the system until the run's retrieval is collected;
    ``golden_parses`` (a sweep's) keeps it for the next run."""
    from kebab_eval_pipeline.chain.run_overrides import config_path
    from kebab_eval_pipeline.cli.progress_display import progress_interval
    from kebab_eval_pipeline.golden.load import load_golden

    # The config and golden files first: a typo'd key or a missing or bad golden file is refused
    # before even pandas is imported.
    golden_input = settings.golden_input()
    key = repr(golden_input)
    golden_file = golden_parses.get(key) if golden_parses is not None else None
    if golden_file is None:
        golden_file = load_golden(*golden_input)
        if golden_parses is not None:
            golden_parses[key] = golden_file

    from kebab_eval_pipeline.chain.pipeline import (
        check_gates_against_system,
        check_golden_against_system,
        check_run_inputs,
        load_golden_artifact,
        resolution_before_run,
    )
    from kebab_eval_pipeline.foundation.location import check_storage_reachable, run_storage
    from kebab_eval_pipeline.gates.evaluate import check_gate_names
    from kebab_eval_pipeline.store.runs import RunStore
    from kebab_eval_pipeline.systems.factory import build_system

    check_gate_names(settings, source=config_path(config) or "<defaults>")
    check_run_inputs(settings)
    check_storage_reachable(run_storage(settings.storage, chain=chain))
    progress_interval()  # a bad KEBAB_EVAL_PROGRESS_INTERVAL is exit 2 here, not after registering
    loaded = load_golden_artifact(settings, golden_file)
    # Regression gates finer than the golden set resolves, where the baseline is known already
    # (a run id, a pin): warned now — or refused, with compare.strict_resolution — not after the run.
    resolution = resolution_before_run(
        settings, RunStore(run_storage(settings.storage, chain=chain)), loaded.info.get("name")
    )
    system = build_system(settings)
    check_gates_against_system(settings, system, source=config_path(config) or "<defaults>")
    stale = check_golden_against_system(settings, loaded, system)
    if run_id is not None:
        from kebab_eval_pipeline.orchestration.run_context import InputChecks, hand_over_checks

        hand_over_checks(InputChecks(run_id, settings, loaded.sha256, stale, system, golden_file))
    for warning in [*settings.secret_mask().warnings(), *loaded.info["warnings"], *stale, *resolution]:
        err.print(f"[yellow]warning:[/yellow] {escape(warning)}", highlight=False)  # paths as written


def rejudge(
    run_id: Annotated[str, typer.Argument(help="A stored run (partition) to judge again.")],
    config: Annotated[
        Path | None,
        typer.Option(
            "--config", help="The run's config YAML; its judge: block is the judge (default: local)."
        ),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option("--model", help="Another judge model (a local path, or the endpoint's name)."),
    ] = None,
    prompt_version: Annotated[
        str | None,
        typer.Option(
            "--prompt-version",
            help="Another judge prompt version: v2 (the score alone), v2-alt, v1 (JSON with claims "
            "and reasoning), v1-alt.",
        ),
    ] = None,
    chain: ChainOption = None,
) -> None:
    """Judge a stored run again — with the current judge or another model or prompt version — from
    its stored golden set and results: the system under test is not called. Re-materializes judge,
    query_scores, run_metrics and comparison_report of the partition; cached judgements (same model
    digest, prompt version and input) cost no model call."""
    from kebab_eval_pipeline.chain.artifacts import JUDGED_ASSETS
    from kebab_eval_pipeline.chain.pipeline import check_run_inputs, headline
    from kebab_eval_pipeline.definitions import run_settings
    from kebab_eval_pipeline.foundation.run_ids import TRIGGER_TAG, check_run_id
    from kebab_eval_pipeline.foundation.run_roles import ROLE_TAG, SETTABLE_ROLES, role_of
    from kebab_eval_pipeline.store.runs import RunStore

    run_id = check_run_id(run_id)
    names = chain_names(chain, config)
    instance = open_instance()
    if chain is None:
        check_own_location(instance, "rejudge")
    overrides = {"judge": True, "judge_model": model, "judge_prompt_version": prompt_version}
    builder = cli_builder(config, None, {k: v for k, v in overrides.items() if v is not None}, chain)
    defs = builder.definitions()
    settings = run_settings(defs, names)
    check_run_inputs(settings)
    store = RunStore(defs.resources[names.resource("artifact_storage")].base)
    if not store.exists("retrieval_results", run_id) or not store.exists("run_metrics", run_id):
        raise InputError(
            "nothing to re-judge",
            [Offender(run_id, f"no stored results for this run under {store.base}", field="run_id")],
        )
    stored = store.read("run_metrics", run_id)[1]
    stored.setdefault("relevance_level", 1)  # runs stored before the level was recorded
    differs = [
        Offender(
            str(config or "<defaults>"),
            f"the run was scored with {key}={stored.get(key)!r}, this config says {getattr(settings, key)!r}",
            field=key,
        )
        for key in ("k", "mrr_cutoff", "match", "relevance_level")
        if key in stored and stored[key] != getattr(settings, key)
    ]
    if differs:
        raise InputError(f"run {run_id} was scored with other settings: pass the config it ran with", differs)
    # Judged again, the run stays what it was (a nightly run is not made a manual one).
    role = role_of(run_id, stored)
    drive(
        defs,
        instance,
        run_id,
        builder=builder,
        tags={TRIGGER_TAG: "rejudge", **({ROLE_TAG: role.role} if role.role in SETTABLE_ROLES else {})},
        asset_selection=[names.key(name) for name in JUDGED_ASSETS],
        show=lambda store: print_run(store, run_id, settings.k, headline, settings),
        names=names,
    )
