"""Every YAML snippet of the documentation (the README and the site's pages) is run: config snippets
are loaded as run configs are (an
unknown key is an error, never ignored), launchpad snippets are launched against real
materializations — in the package's own code location as written, and in a chain under the names
their comments give (``<chain>__regression_bisect``) — and, under the package location's names,
refused by a chain, naming the chain's.

A new ``yaml`` block must be one of these kinds (:func:`kind`), or this test names it.
"""

from __future__ import annotations

import json
import re
import shutil
import textwrap
from pathlib import Path

import dagster as dg
import pytest
import yaml

from kebab_eval_pipeline.chain.settings import load_settings
from kebab_eval_pipeline.definitions import build_definitions
from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.foundation.location import run_storage
from kebab_eval_pipeline.orchestration import evaluation_chain
from kebab_eval_pipeline.orchestration.factory import chain_assets
from kebab_eval_pipeline.orchestration.names import DEFAULT_NAMES, ChainNames
from kebab_eval_pipeline.store.runs import RunStore
from tests import docs_pages
from tests.conftest import write

LAUNCHPAD_KEYS = {"ops", "resources"}


def yaml_blocks() -> list[tuple[str, str]]:
    """Every ```yaml block of the documentation, with its place (``page:line``)."""
    return [(s.where, s.text) for s in docs_pages.snippets("yaml")]


def kind(block: str) -> str:
    """``launchpad`` (run config of a Dagster launch: ops, resources), ``component`` (a ``defs.yaml``
    of Dagster's Components: ``tests/orchestration/test_component.py`` runs it), ``response`` (a ``response:``
    mapping of a system block, shown on its own), ``alternatives`` (one key given several ways, one
    per line), ``golden`` (a golden set: ``tests/test_docs.py`` loads it), ``instance`` (a Dagster
    instance's ``dagster.yaml`` part, or a launch's ``execution:``:
    ``tests/orchestration/test_k8s_executor.py`` loads them) or ``config`` (a run config file, or
    part of one)."""
    text = textwrap.dedent(block)
    keys = [line.split(":", 1)[0] for line in text.splitlines() if re.match(r"^[A-Za-z_]\w*:", line)]
    if len(keys) != len(set(keys)):
        return "alternatives"
    doc = yaml.safe_load(text)
    assert isinstance(doc, dict) and doc, f"a yaml block is not a mapping:\n{block}"
    if "queries" in doc:
        return "golden"
    if set(doc) <= {"run_launcher", "execution"}:
        return "instance"
    if set(doc) <= LAUNCHPAD_KEYS:
        return "launchpad"
    if set(doc) == {"type", "attributes"}:
        return "component"
    if set(doc) == {"response"}:
        return "response"
    return "config"


BLOCKS = yaml_blocks()
CONFIGS = [(where, block) for where, block in BLOCKS if kind(block) in ("config", "alternatives", "response")]
LAUNCHPADS = [yaml.safe_load(block) for _, block in BLOCKS if kind(block) == "launchpad"]


def test_the_documentation_has_config_and_launchpad_snippets():
    assert len(CONFIGS) >= 15
    assert sorted(sorted(d) for d in LAUNCHPADS) == [["ops"], ["ops"], ["resources"]]


@pytest.mark.parametrize(("where", "block"), CONFIGS, ids=[where for where, _ in CONFIGS])
def test_every_config_snippet_loads_as_a_run_config(where, block, tmp_path):
    """Loaded as a run config file is (keys checked against the schema: a misspelt or unknown key
    fails, naming it); a ``response:`` mapping inside an http system block."""
    text = textwrap.dedent(block)
    documents = {
        "config": [text],
        "alternatives": [ln for ln in text.splitlines() if ln.strip() and not ln.startswith(" ")],
        "response": [
            "system:\n  kind: http\n  search_url: http://127.0.0.1:9/search\n" + textwrap.indent(text, "  ")
        ],
    }[kind(block)]
    for i, doc in enumerate(documents):
        path = write(tmp_path / f"snippet-{i}.yaml", doc)
        try:
            load_settings(path)
        except InputError as exc:
            pytest.fail(f"{where}: the snippet does not load as a run config:\n{exc.render()}")


def test_a_misspelt_key_in_a_snippet_would_fail(tmp_path):
    """The check above can fail: the same loading refuses a key that does not exist."""
    [gates] = [b for _, b in CONFIGS if b.startswith("gates:\n  mrr: {min: 0.5}")]
    path = write(tmp_path / "typo.yaml", gates.replace("regression:", "regresion:"))
    with pytest.raises(InputError, match="regresion"):
        load_settings(path)


# -- launchpad snippets, launched ------------------------------------------------------------


def in_chain(snippet: dict, chain: str) -> dict:
    """The snippet under a chain's names, as each entry's comment says (``<chain>__name``)."""
    renamed = {}
    for section, entries in snippet.items():
        for name in entries:
            comment = re.search(
                rf"^\s+{re.escape(name)}:\s+# a chain's: <chain>__{re.escape(name)}\b",
                docs_pages.all_text(),
                re.M,
            )
            assert comment, f"the launchpad entry {section}.{name} does not give a chain's name"
        renamed[section] = {f"{chain}__{name}": value for name, value in entries.items()}
    return renamed


def launch(defs: dg.Definitions, instance, keys, run_config: dict, partition: str | None = None):
    """The launch the UI's asset graph makes: its implicit job, these assets, this run config."""
    job = defs.resolve_implicit_global_asset_job_def()
    return job.execute_in_process(
        instance=instance,
        asset_selection=list(keys),
        run_config=run_config,
        partition_key=partition,
        raise_on_error=False,
    )


def failure(result) -> str:
    return "\n".join(
        e.step_failure_data.user_failure_data.description
        for e in result.all_events
        if e.event_type_value == "STEP_FAILURE" and e.step_failure_data.user_failure_data
    )


def metadata(result, asset: str) -> dict:
    [event] = [e for e in result.get_asset_materialization_events() if e.asset_key.path[-1] == asset]
    return {k: v.value for k, v in event.event_specific_data.materialization.metadata.items()}


def test_the_launchpad_snippets_run_in_the_package_location_and_in_a_chain(instance, tmp_path):
    [resources] = [d for d in LAUNCHPADS if "resources" in d]
    [ranking] = [d for d in LAUNCHPADS if "run_ranking" in d.get("ops", {})]
    [bisect] = [d for d in LAUNCHPADS if "regression_bisect" in d.get("ops", {})]
    ranked = ranking["ops"]["run_ranking"]["config"]["run_ids"]
    own = build_definitions()
    partition_assets = [k for a in chain_assets(DEFAULT_NAMES).eval_assets for k in a.keys]

    # the package's own location, the snippets as written: the resources snippet on the first run
    instance.add_dynamic_partitions("eval_runs", ranked)
    first = launch(own, instance, partition_assets, resources, partition=ranked[0])
    assert first.success, failure(first)
    assert metadata(first, "run_metrics")["chunker_version"] == "md-heading-2:size=300:overlap=0"
    for run_id, size in zip(ranked[1:], (1200, 800), strict=True):
        config = {"resources": {"system_under_test": {"config": {"chunk_size": size}}}}
        assert launch(own, instance, partition_assets, config, partition=run_id).success
    base = RunStore(run_storage())
    assert "no baseline" in str(base.read("comparison_report", ranked[0])[1]["baseline_note"])
    result = launch(own, instance, [dg.AssetKey("run_ranking")], ranking)
    assert result.success, failure(result)
    assert sorted(json.loads(base.read_file("run_ranking", "chunkers", "ranking.json"))["runs"]) == sorted(
        ranked
    )
    result = launch(own, instance, [dg.AssetKey("regression_bisect")], bisect)
    assert result.success, failure(result)
    steps = json.loads(base.read_file("regression_bisect", "mrr", "bisect.json"))["steps"]
    assert len(steps) == 2

    # a chain: under the names the comments give, the same snippets materialize
    config = write(tmp_path / "staging.yaml", "k: [1, 5, 10]\nsystem: {kind: reference, mode: lexical}\n")
    chain = evaluation_chain("staging", config=config)
    names = ChainNames("staging")
    keys = [k for a in chain_assets(names).eval_assets for k in a.keys]
    instance.add_dynamic_partitions(names.partitions_name, [ranked[0]])
    # as written, the package location's names are refused, naming the chain's
    refused = launch(chain, instance, keys, resources, partition=ranked[0])
    assert not refused.success
    assert "resources.eval_settings: no resource of that name in this run, so Dagster would ignore it: " \
        "this run's resource is staging__eval_settings" in failure(refused)  # fmt: skip
    assert "resources.system_under_test" in failure(refused)
    first = launch(chain, instance, keys, in_chain(resources, "staging"), partition=ranked[0])
    assert first.success, failure(first)
    assert metadata(first, "run_metrics")["chunker_version"] == "md-heading-2:size=300:overlap=0"
    store = RunStore(run_storage(load_settings(config).storage, chain="staging"))
    for run_id in ranked[1:]:  # the other two runs, stored into the chain's folder as they are
        for asset in ("golden_set", "retrieval_results", "query_scores", "run_metrics"):
            shutil.copytree(Path(str(base.root)) / asset / run_id, Path(str(store.root)) / asset / run_id)
    for snippet, asset, stored in (
        (ranking, "run_ranking", "chunkers"),
        (bisect, "regression_bisect", "mrr"),
    ):
        wrong = launch(chain, instance, [names.key(asset)], snippet)
        assert not wrong.success
        assert f"ops.{asset}: no op of that name in this run, so Dagster would ignore it: this run's op is " \
            f"staging__{asset}" in failure(wrong)  # fmt: skip
        right = launch(chain, instance, [names.key(asset)], in_chain(snippet, "staging"))
        assert right.success, failure(right)
        assert store.exists(asset, stored)
    # the chain's bisect is over the chain's own three runs (its lex-300 made after the copies)
    chain_steps = json.loads(store.read_file("regression_bisect", "mrr", "bisect.json"))["steps"]
    assert [s["run_b"] for s in chain_steps] == ["hybrid-800", ranked[0]]
