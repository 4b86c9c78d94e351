"""A team's Dagster project: its own index asset, gated by an evaluation check, and two
evaluation chains side by side.

- ``search_index`` (the team's code: team_search/index.py) builds the index; ``index_quality``
  evaluates the golden set against it on every materialization. It is blocking, so a failing gate
  keeps ``deploy_index`` from running in that run.
- ``staging/…`` and ``production/…``: two whole evaluation chains (run partitions, gates,
  comparisons) of two chunker settings of the reference system, without key clashes.

Each chain's and the check's whole configuration is its own file under ``eval/``, so the
``kebab-eval`` CLI finds their runs from that file: ``--chain staging --config eval/staging.yaml``,
``--gate search_index --config eval/gate.yaml``.
"""

import os
import shutil
from pathlib import Path

import dagster as dg

from kebab_eval_pipeline.demo import DEMO_CORPUS
from kebab_eval_pipeline.orchestration import evaluation_chain, evaluation_check
from team_search.index import build_index

HERE = Path(__file__).resolve().parent.parent
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


index_quality = evaluation_check(
    search_index,
    config=HERE / "eval" / "gate.yaml",  # the demo golden set, the gates, match: anchor
    # the system the asset describes: the team's search over the index just built
    system=lambda meta: {
        "kind": "python",
        # one system across builds (each build's index path differs): the baseline is the last build
        "name": "team-search",
        "callable": "team_search.search:IndexSearch",
        "args": {"index": meta["index_path"]},
        "path": [str(HERE)],
    },
    name="index_quality",
)


defs = dg.Definitions.merge(
    dg.Definitions(assets=[search_index, deploy_index], asset_checks=[index_quality]),
    # staging tries a smaller chunker than production runs, and a chunking sweep (eval/staging.yaml)
    evaluation_chain("staging", config=HERE / "eval" / "staging.yaml"),
    evaluation_chain("production", config=HERE / "eval" / "production.yaml"),
)
