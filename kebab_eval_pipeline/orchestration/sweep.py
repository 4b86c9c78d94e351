"""A configuration sweep in Dagster: its variants as run partitions, and its leaderboard as an asset.

- ``register_sweep`` (a job of one op): adds every variant's run id (``sweep-<name>-<variant>``)
  to the chain's run partitions. Launch it once, then select those partitions in the asset
  graph (or the job's partitions page) and launch a backfill: each partition is a normal run whose
  steps resolve the variant's settings from the partition key
  (:func:`~kebab_eval_pipeline.chain.run_overrides.variant_settings`; a backfill cannot tag each
  partition).
- ``sweep_leaderboard`` (unpartitioned, like ``run_ranking``): the stored variants ranked
  (:func:`~kebab_eval_pipeline.chain.pipeline.rank_sweep`), stored under
  ``{storage}/sweep_leaderboard/{sweep name}/`` with ``leaderboard.md`` and ``leaderboard.json``.

Built only when the config has a ``sweep:`` block; every name comes from :class:`ChainNames`.
"""

# No `from __future__ import annotations`: Dagster reads the context annotations at definition time.

import dagster as dg
from pydantic import Field

from kebab_eval_pipeline.chain import pipeline
from kebab_eval_pipeline.chain.settings import RunSettings
from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.orchestration.assets import STAGE, _table_metadata, input_failure
from kebab_eval_pipeline.orchestration.io import _location
from kebab_eval_pipeline.orchestration.names import DEFAULT_NAMES, ChainNames
from kebab_eval_pipeline.orchestration.run_config import refuse_ignored_run_config
from kebab_eval_pipeline.sweep.grid import expand
from kebab_eval_pipeline.sweep.leaderboard import render_json, render_markdown

ASSET = "sweep_leaderboard"
REGISTER_JOB = "register_sweep"
REGISTER_OP = "register_sweep_partitions"


class LeaderboardConfig(dg.Config):
    """Which variants the leaderboard ranks (set in the launchpad)."""

    outcome: str | None = Field(
        default=None,
        description="Rank only the variants that passed (system healthy, every blocking gate passed) or "
        "failed; the others are listed, not ranked. Empty: every stored variant.",
    )


def build_sweep_definitions(settings: RunSettings, names: ChainNames = DEFAULT_NAMES) -> dg.Definitions:
    """The sweep of ``settings`` (the code location's config) as Dagster definitions: the
    ``register_sweep`` job and the ``sweep_leaderboard`` asset, named by ``names``. Empty
    definitions when the config has no sweep."""
    sweep = settings.sweep
    if sweep is None:
        return dg.Definitions()
    run_ids = [v.run_id for v in expand(sweep.name, sweep.grid)]
    settings_key, storage_key = names.resource("eval_settings"), names.resource("artifact_storage")

    @dg.op(
        name=names.name(REGISTER_OP),
        description=f"Add the {len(run_ids)} run ids of sweep {sweep.name!r} to the run partitions "
        f"({names.partitions_name}); those already there are left alone.",
    )
    def register(context: dg.OpExecutionContext) -> None:
        existing = set(context.instance.get_dynamic_partitions(names.partitions_name))
        new = [r for r in run_ids if r not in existing]
        if new:
            context.instance.add_dynamic_partitions(names.partitions_name, new)
        context.log.info(
            f"sweep {sweep.name}: {len(new)} partition(s) added, {len(run_ids) - len(new)} already there"
        )
        context.add_output_metadata({"added": new, "partitions": run_ids})

    @dg.job(
        name=names.name(REGISTER_JOB),
        description=f"Register the variants of sweep {sweep.name!r} as run partitions "
        f"(sweep-{sweep.name}-…). Then select them in the asset graph and launch a backfill: "
        "every partition runs with its variant's settings.",
        tags={"kebab-eval/sweep": sweep.name},
    )
    def register_job() -> None:
        register()

    @dg.asset(
        key=names.key(ASSET),
        group_name=names.group,
        owners=settings.owners,
        deps=[names.key("run_metrics")],
        required_resource_keys={settings_key, storage_key},
        kinds={"python", "parquet"},
        tags={STAGE: "ranking"},
        description=f"The leaderboard of sweep {sweep.name!r}: its stored variant runs ranked on "
        f"{pipeline.sweep_metric(settings)} (means over the queries common to all, pairwise paired "
        "tests Holm-adjusted, letters of the variants not significantly different), each variant's "
        "swept settings, role and outcome (passed, or the checks that failed it) as columns. Variants "
        "not stored yet, and with `outcome` in its config those of the other outcome, are listed, not "
        "ranked.",
    )
    def sweep_leaderboard(
        context: dg.AssetExecutionContext, config: LeaderboardConfig
    ) -> dg.MaterializeResult:
        refuse_ignored_run_config(context)
        storage = getattr(context.resources, storage_key)
        store = storage.store()
        try:
            # The settings as the location loads them now (the launchpad may override them).
            current = getattr(context.resources, settings_key).load()
            board = pipeline.rank_sweep(store, current, config.outcome)
            files = {
                "leaderboard.md": render_markdown(board).encode("utf-8"),
                "leaderboard.json": render_json(board).encode("utf-8"),
            }
            info = {
                "sweep": board.name,
                "metric": board.metric,
                "best": board.best(),
                "missing": board.missing,
                "left_out": board.left_out,
                "outcome_filter": config.outcome,
            }
            attempt = store.write(
                ASSET,
                board.name,
                {"leaderboard": board.table, "pairs": board.pairs()},
                info,
                files=files,
                dagster_run_id=context.run.run_id,
            )
        except InputError as exc:  # no sweep, fewer than two stored variants, an unrankable metric
            raise input_failure(exc) from None
        for warning in board.ranking.info["warnings"]:
            context.log.warning(warning)
        folder = store.attempt_location(ASSET, board.name, attempt)
        best = board.table[board.table["rank"] == 1]
        top = float(best["mean"].iloc[0]) if len(best) else None
        return dg.MaterializeResult(
            metadata={
                "report": dg.MetadataValue.md(files["leaderboard.md"].decode("utf-8")),
                "metric": dg.MetadataValue.text(board.metric),
                "best_variant": dg.MetadataValue.text(", ".join(best["variant"])),
                "best_run_id": dg.MetadataValue.text(", ".join(best["run_id"])),
                "best_value": dg.MetadataValue.null() if top is None else dg.MetadataValue.float(top),
                "variants": _table_metadata(board.table.drop(columns=["row"])),
                "variants_ranked": dg.MetadataValue.int(len(board.table)),
                "variants_missing": dg.MetadataValue.json(board.missing),
                "variants_left_out": dg.MetadataValue.json(board.left_out),
                "queries_in_common": dg.MetadataValue.int(int(board.ranking.info["n_common"])),
                "warnings": dg.MetadataValue.json(board.ranking.info["warnings"]),
                "storage_path": folder,
                **{f"report_{n.rsplit('.', 1)[-1]}": _location(f"{folder}/{n}") for n in sorted(files)},
            }
        )

    return dg.Definitions(assets=[sweep_leaderboard], jobs=[register_job])
