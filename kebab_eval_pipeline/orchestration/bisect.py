"""``regression_bisect``: where a metric changed over the stored runs (what ``kebab-eval bisect`` prints).

Not partitioned: it reads every stored run of the chain's run store (``artifact_storage``) on one
golden set, oldest first, and tests each pair of consecutive runs
(:func:`~kebab_eval_pipeline.compare.bisect_stored.bisect_stored`, the compare settings of
``eval_settings``). The metric, window, golden set and alpha come from its launchpad config
(``ops: regression_bisect: config:``). The tables (steps, changes, diffs, flips) and the report
(``bisect.md``, ``bisect.json``) are stored under ``{storage}/regression_bisect/{name}/`` as the
chain's assets store theirs; the materialization shows the Markdown report, the number of
changes, the change table and the per-step deltas.
"""

# No `from __future__ import annotations`: Dagster reads the config annotation at definition time.
import dagster as dg
from pydantic import Field

from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.orchestration.assets import STAGE, _number, _table_metadata, input_failure
from kebab_eval_pipeline.orchestration.io import _location
from kebab_eval_pipeline.orchestration.names import DEFAULT_NAMES, ChainNames
from kebab_eval_pipeline.orchestration.run_config import refuse_ignored_run_config

ASSET = "regression_bisect"
#: Columns of the per-step table shown in the UI (the stored table has them all).
STEP_SHOWN = ("step", "run_a", "run_b", "n_paired", "mean_a", "mean_b", "delta", "p_raw", "p_adjusted")
STEP_SHOWN += ("changed", "changed_fields", "outcome_a", "outcome_b", "role_a", "role_b")


class BisectConfig(dg.Config):
    """What to bisect (set in the launchpad)."""

    metric: str = Field(
        default="",
        description="The per-query metric to follow (mrr, hit@5, ndcg@10, …). Empty: nothing is "
        "bisected and nothing materialized (so `--select '*'` over a partition leaves it alone).",
    )
    since: str | None = Field(
        default=None, description="From this run id, or this date/time (2026-11-27, 2026-11-27T09:30; UTC)."
    )
    until: str | None = Field(default=None, description="Up to this run id, or this date/time.")
    golden: str | None = Field(
        default=None,
        description="Only runs on this golden set: its name, or the start of its sha256. "
        "Default: the latest run's golden set.",
    )
    alpha: float = Field(default=0.05, description="Significance level of the adjusted p-values.")
    adjust: str = Field(default="holm", description="Correction over the steps: holm or bh.")
    role: list[str] = Field(
        default=[],
        description="Only runs of these roles (ci, nightly, system-change, golden-change, manual, "
        "team-check, experiment, sweep-variant, unknown; regular; sweep:NAME). Empty: every run.",
    )
    outcome: str | None = Field(
        default=None, description="Only runs that passed or failed (system health and blocking gates)."
    )
    name: str = Field(
        default="latest",
        description="Where the bisect is stored: {storage}/regression_bisect/{name}/ (a run-id-like name).",
    )


def build_bisect_asset(names: ChainNames = DEFAULT_NAMES) -> dg.AssetsDefinition:
    """The ``regression_bisect`` asset of the chain ``names`` (its key, group and resource keys)."""
    settings_key = names.resource("eval_settings")
    storage_key = names.resource("artifact_storage")

    @dg.asset(
        key=names.key(ASSET),
        group_name=names.group,
        required_resource_keys={settings_key, storage_key},
        # Materialized only when a metric is named: "materialize all" of a partition selects it too.
        output_required=False,
        kinds={"python", "parquet"},
        tags={STAGE: "bisect"},
        description="Where a metric changed over the stored runs on one golden set: paired tests "
        "between consecutive runs (Holm-adjusted over the steps), and for each change the settings "
        "that differ between its two runs and the queries that flipped, worst first. The metric is "
        "named in the config.",
    )
    def regression_bisect(context: dg.AssetExecutionContext, config: BisectConfig):
        refuse_ignored_run_config(context)  # `ops: {regression_bisect: …}` meant for another chain
        if not config.metric:
            context.log.info(f"{ASSET}: no metric in its config, so nothing is bisected or materialized")
            return
        # imported by a step that bisects: not by every process that loads the definitions
        from kebab_eval_pipeline.compare.bisect_stored import bisect_stored
        from kebab_eval_pipeline.reporting.bisect_report import render_json, render_markdown

        store = getattr(context.resources, storage_key).store()
        try:
            settings = getattr(context.resources, settings_key).load()
            result = bisect_stored(
                store,
                config.metric,
                since=config.since,
                until=config.until,
                golden=config.golden,
                alpha=config.alpha,
                adjust_by=config.adjust,
                options=settings.compare,
                roles=config.role,
                outcome=config.outcome,
            )
            markdown = render_markdown(result)
            files = {
                "bisect.md": markdown.encode("utf-8"),
                "bisect.json": render_json(result).encode("utf-8"),
            }
            tables, info = result.to_tables()
            attempt = store.write(
                ASSET,
                config.name,
                tables,
                {**info, "markdown": markdown},
                files=files,
                dagster_run_id=context.run.run_id,
            )
        except InputError as exc:  # unknown metric, bad window, fewer than two runs: say which
            raise input_failure(exc) from None
        folder = store.attempt_location(ASSET, config.name, attempt)
        overall = result.info["overall"]
        yield dg.MaterializeResult(
            metadata={
                "report": dg.MetadataValue.md(markdown),
                "metric": dg.MetadataValue.text(config.metric),
                "changes": dg.MetadataValue.int(int(result.info["n_changes"])),
                "runs": dg.MetadataValue.int(len(result.info["runs"])),
                "change_table": _table_metadata(result.changes),
                "steps": _table_metadata(result.steps[list(STEP_SHOWN)]),
                "first_vs_last_delta": _number(overall["delta"]),
                "first_vs_last_p": _number(overall["p_value"]),
                "notes": dg.MetadataValue.json(result.info["notes"]),
                "storage_path": folder,
                **{f"report_{n.rsplit('.', 1)[-1]}": _location(f"{folder}/{n}") for n in sorted(files)},
            }
        )

    return regression_bisect
