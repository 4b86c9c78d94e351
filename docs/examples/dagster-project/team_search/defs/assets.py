"""The team's own assets: ``search_index`` builds the index (team_search/index.py) and
``deploy_index`` publishes it. ``index_quality`` — the blocking evaluation check on
``search_index`` — is declared beside the production chain (``defs/production/defs.yaml``): a
failing gate keeps ``deploy_index`` from running in that run."""

import os
import shutil
from pathlib import Path

import dagster as dg

from kebab_eval_pipeline.foundation.demo import DEMO_CORPUS
from team_search.index import build_index

HERE = Path(__file__).resolve().parents[2]  # the project folder
INDEX_ROOT = Path(os.environ.get("TEAM_INDEX_ROOT") or HERE / ".index")


class IndexConfig(dg.Config):
    drop_headings: bool = False  # the chunker regression the evaluation check must stop


@dg.asset(
    group_name="search", description="The team's search index over the handbook (one chunk per section)."
)
def search_index(context: dg.AssetExecutionContext, config: IndexConfig) -> dg.MaterializeResult:
    folder = INDEX_ROOT / "builds" / context.run.run_id
    built = build_index(DEMO_CORPUS, folder, drop_headings=config.drop_headings)
    return dg.MaterializeResult(metadata={"index_path": dg.MetadataValue.path(str(folder)), **built})


@dg.asset(
    group_name="search", deps=[search_index], description="Publishes the index the search service serves."
)
def deploy_index(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    event = context.instance.get_latest_materialization_event(search_index.key)
    source = Path(event.asset_materialization.metadata["index_path"].value)
    live = INDEX_ROOT / "live"
    shutil.rmtree(live, ignore_errors=True)
    shutil.copytree(source, live)
    return dg.MaterializeResult(metadata={"live": dg.MetadataValue.path(str(live)), "from": str(source)})
