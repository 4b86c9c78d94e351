"""``run_ranking``: several stored runs ranked, as an asset (what ``kebab-eval compare A B C …`` prints).

Not partitioned: a ranking is over a chosen set of run partitions, named in its config (the
launchpad's ``ops: run_ranking: config:``). It reads the runs from the run store the chain writes
(``artifact_storage``), ranks them with the compare settings of ``eval_settings``
(:func:`~kebab_eval_pipeline.chain.pipeline.rank_stored`), and stores the tables and the three files
(``ranking.md``, ``ranking.html``, ``ranking.json``) under ``{storage}/run_ranking/{name}/`` as the
chain's assets store theirs; the materialization links the files (``report_md``, ``report_html``,
``report_json``) and shows the Markdown (``report``).
"""

# No `from __future__ import annotations`: Dagster reads the config annotation at definition time.
import dagster as dg
from pydantic import Field

from kebab_eval_pipeline.chain import pipeline
from kebab_eval_pipeline.compare.ranking import DEFAULT_ALPHA, DEFAULT_METRICS
from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.orchestration.assets import STAGE, input_failure
from kebab_eval_pipeline.orchestration.io import _location
from kebab_eval_pipeline.orchestration.names import DEFAULT_NAMES, ChainNames
from kebab_eval_pipeline.orchestration.run_config import refuse_ignored_run_config

ASSET = "run_ranking"


class RankingConfig(dg.Config):
    """Which runs to rank and how (set in the launchpad)."""

    run_ids: list[str] = Field(
        default_factory=list,
        description="The stored runs to rank: two or more run ids (partitions). Empty: nothing is "
        "ranked and nothing materialized (so `--select '*'` over a partition leaves it alone).",
    )
    metrics: list[str] = Field(
        default_factory=list,
        description=f"Metrics to rank on; empty: {', '.join(DEFAULT_METRICS)} (those the runs have).",
    )
    alpha: float = Field(
        default=DEFAULT_ALPHA, description="Significance level for the Holm-adjusted pairwise p-values."
    )
    name: str = Field(
        default="latest",
        description="Where the ranking is stored: {storage}/run_ranking/{name}/ (a run-id-like name).",
    )
    strict_chunker_version: bool | None = Field(
        default=None,
        description="Refuse runs whose chunker versions differ (default: the config's compare setting).",
    )


def build_run_ranking(names: ChainNames = DEFAULT_NAMES) -> dg.AssetsDefinition:
    """The ``run_ranking`` asset of the chain named ``names``."""

    @dg.asset(
        name=ASSET,
        key_prefix=names.key_prefix() or None,
        group_name=names.group,
        required_resource_keys={names.resource("eval_settings"), names.resource("artifact_storage")},
        # Materialized only when runs are named: "materialize all" of a partition (the CI command,
        # `dagster asset materialize --select '*' --partition ID`) selects it too, with no config.
        output_required=False,
        kinds={"python", "parquet"},
        tags={STAGE: "ranking"},
        description="Several stored runs ranked on a few metrics: means over the queries common to all, "
        "every pairwise paired test (Holm-adjusted per metric), letters of the runs that are not "
        "significantly different. The runs are named in the config.",
    )
    def run_ranking(
        context: dg.AssetExecutionContext,
        config: RankingConfig,
    ):
        refuse_ignored_run_config(context)  # `ops: {run_ranking: …}` meant for another chain
        if not config.run_ids:
            context.log.info("run_ranking: no run_ids in its config, so nothing is ranked or materialized")
            return
        store = getattr(context.resources, names.resource("artifact_storage")).store()
        try:
            settings = getattr(context.resources, names.resource("eval_settings")).load()
            ranking = pipeline.rank_stored(
                store,
                config.run_ids,
                settings,
                metrics=config.metrics or None,
                alpha=config.alpha,
                strict_chunker_version=config.strict_chunker_version,
            )
            tables, info = ranking.to_tables()
            attempt = store.write(
                ASSET, config.name, tables, info, files=ranking.files, dagster_run_id=context.run.run_id
            )
        except InputError as exc:  # unknown runs or metrics, strict chunkers, a bad name: say which
            raise input_failure(exc) from None
        for warning in ranking.info["warnings"]:
            context.log.warning(warning)
        folder = store.attempt_location(ASSET, config.name, attempt)
        best = {
            metric: ", ".join(
                ranking.per_run.loc[
                    (ranking.per_run["metric"] == metric) & (ranking.per_run["rank"] == 1), "run_id"
                ]
            )
            for metric in ranking.info["metrics"]
        }
        meta = {
            "report": dg.MetadataValue.md(ranking.markdown),
            "runs": dg.MetadataValue.json(ranking.info["order"]),
            "metrics": dg.MetadataValue.json(ranking.info["metrics"]),
            "queries_in_common": dg.MetadataValue.int(int(ranking.info["n_common"])),
            "matching": dg.MetadataValue.text(str(ranking.info["matching"]["mode"])),
            "warnings": dg.MetadataValue.json(ranking.info["warnings"]),
            **{f"best/{metric}": dg.MetadataValue.text(runs) for metric, runs in best.items()},
            "storage_path": folder,
            **{
                f"report_{name.rsplit('.', 1)[-1]}": _location(f"{folder}/{name}")
                for name in sorted(ranking.files)
            },
        }
        yield dg.MaterializeResult(metadata=meta)

    return run_ranking


run_ranking = build_run_ranking(DEFAULT_NAMES)
