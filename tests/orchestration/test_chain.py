"""The whole chain through a real Dagster instance: materializations, metadata, gates, comparison."""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest
from statsmodels.stats.multitest import multipletests

from kebab_eval_pipeline.chain.artifacts import ComparisonArtifact, RunMetricsArtifact
from kebab_eval_pipeline.definitions import JOB_NAME, build_definitions, run_settings
from kebab_eval_pipeline.foundation.demo import DEMO_CORPUS, DEMO_GOLDEN
from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.golden.load import GOLDEN_PARSER_VERSION, golden_content_sha256, load_golden
from kebab_eval_pipeline.orchestration.assets import observe_inputs
from kebab_eval_pipeline.store.runs import RunStore
from tests.conftest import write

VERSION_KEYS = (
    "chunker_version",
    "embedding_model",
    "prompt_template_version",
    "index_version",
    "parser_version",
)


def run_partition(instance, run_id: str, config: Path | None = None, overrides: dict | None = None):
    """What `kebab-eval run` does: register the partition, observe inputs, execute the job."""
    defs = build_definitions(config, overrides=overrides)
    instance.add_dynamic_partitions("eval_runs", [run_id])
    with contextlib.suppress(InputError):  # bad input: the run itself must report it
        observe_inputs(instance, run_settings(defs))
    result = defs.resolve_job_def(JOB_NAME).execute_in_process(
        partition_key=run_id, instance=instance, raise_on_error=False
    )
    return defs, result


def defs_scores_columns(defs, run_id: str) -> list[str]:
    """The stored query_scores columns of a run."""
    from kebab_eval_pipeline.store.runs import RunStore

    tables, _ = RunStore(defs.resources["artifact_storage"].base).read("query_scores", run_id)
    return list(tables["query_scores"].columns)


def materializations(result) -> dict[str, dg.AssetMaterialization]:
    return {
        e.asset_key.path[-1]: e.step_materialization_data.materialization
        for e in result.get_asset_materialization_events()
    }


def test_demo_chain_materializes_every_asset_with_versions(instance):
    defs, result = run_partition(instance, "r1")
    assert result.success
    mats = materializations(result)
    assert set(mats) == {
        "golden_set",
        "retrieval_results",
        "judge",  # off by default: materialized as disabled, no model loaded
        "query_scores",
        "run_metrics",
        "comparison_report",
    }
    golden = load_golden(DEMO_GOLDEN).golden
    for name in ("golden_set", "retrieval_results", "query_scores", "run_metrics"):
        meta = mats[name].metadata
        for key in VERSION_KEYS:
            assert key in meta, (name, key)
        assert meta["chunker_version"].value == "md-heading-2:size=800:overlap=0"
        assert meta["golden_sha256"].value == golden.sha256
        assert meta["golden_queries"].value == len(golden.queries)
        assert meta["system"].value == "reference" and meta["mode"].value == "lexical"
        assert meta["pipeline_version"].value.startswith("0.1.0")
    metrics_meta = mats["run_metrics"].metadata
    assert isinstance(metrics_meta["metric/mrr"].value, float)
    assert 0.0 < metrics_meta["metric/mrr"].value <= 1.0
    assert "# Evaluation run `r1`" in metrics_meta["report"].value
    assert len(mats["query_scores"].metadata["per_query"].value.records) == len(golden.queries)
    assert mats["judge"].metadata["enabled"].value is False
    assert not any(c.startswith("judge_") for c in defs_scores_columns(defs, "r1"))
    # the golden set's data version is its content hash; code versions are recorded
    assert mats["golden_set"].tags["dagster/data_version"].endswith(golden.sha256)
    assert mats["golden_set"].tags["dagster/code_version"] == GOLDEN_PARSER_VERSION

    store = RunStore(defs.resources["artifact_storage"].base)
    stored = RunMetricsArtifact.from_tables(*store.read("run_metrics", "r1"))
    assert stored.metrics["mrr"] == pytest.approx(metrics_meta["metric/mrr"].value)
    assert stored.info["versions"]["chunker_version"] == "md-heading-2:size=800:overlap=0"
    assert stored.denominators["refusal_correctness"] == sum(not q.answerable for q in golden.queries)
    comparison = ComparisonArtifact.from_tables(*store.read("comparison_report", "r1"))
    assert comparison.info["run_a"] is None and "no baseline" in comparison.markdown


def test_two_chunk_sizes_compare_with_both_chunker_versions(instance):
    _, first = run_partition(instance, "small-chunks", overrides={"chunk_size": 300})
    defs, second = run_partition(instance, "large-chunks", overrides={"chunk_size": 1200})
    assert first.success and second.success
    store = RunStore(defs.resources["artifact_storage"].base)
    report = ComparisonArtifact.from_tables(*store.read("comparison_report", "large-chunks"))
    assert report.info["run_a"] == "small-chunks"
    assert report.info["versions_a"]["chunker_version"] == "md-heading-2:size=300:overlap=0"
    assert report.info["versions_b"]["chunker_version"] == "md-heading-2:size=1200:overlap=0"
    assert "md-heading-2:size=300:overlap=0" in report.markdown and "size=1200" in report.markdown
    counts = report.info["verdict_counts"]
    golden = load_golden(DEMO_GOLDEN).golden
    assert sum(counts.values()) == len(golden.queries)
    assert counts["win"] + counts["loss"] + counts["regression"] + counts["draw"] > len(golden.queries) // 2
    # The demo golden set anchors by path + headings: both runs were scored by anchor (auto), which
    # depends on neither chunk ids nor chunk boundaries, so the comparison keeps it.
    assert report.info["chunker_version_match"] == "fallback_anchor"
    assert report.info["matching_criterion"] == "anchor"
    assert "both runs were scored by anchor" in report.info["fallback_note"]
    meta = materializations(second)["comparison_report"].metadata
    assert meta["verdict/win"].value == counts["win"] and meta["baseline_run"].value == "small-chunks"
    # What the comparison could detect is in the UI beside each headline delta and p.
    mde = report.per_metric.set_index("metric")["mde"]
    assert meta["mde/mrr"].value == pytest.approx(mde["mrr"]) and 0 < meta["mde/mrr"].value < 1
    assert meta["mde/hit@5"].value == pytest.approx(mde["hit@5"])
    a = RunMetricsArtifact.from_tables(*store.read("run_metrics", "small-chunks")).metrics
    b = RunMetricsArtifact.from_tables(*store.read("run_metrics", "large-chunks")).metrics
    # Neither run is re-scored: the a and b columns are each run's own report.
    assert report.info["rescored"] == []
    table = report.per_metric.set_index("metric")
    for name in ("n_queries", "mrr", "hit@1", "ndcg@10"):
        assert (table.loc[name, "a"], table.loc[name, "b"]) == (a[name], b[name]), name
    mrr = table.loc["mrr"]
    assert mrr["delta"] == pytest.approx(round(mrr["b"] - mrr["a"], 4))


def test_blocking_gate_fails_the_run_with_numbers(instance, tmp_path):
    cfg = write(tmp_path / "eval.yaml", "gates:\n  mrr: {min: 1.01}\n  hit@10: {min: 0.0, blocking: false}\n")
    _, result = run_partition(instance, "gated", config=cfg)
    assert not result.success
    evaluations = {
        e.event_specific_data.check_name: e.event_specific_data
        for e in result.all_events
        if e.event_type_value == "ASSET_CHECK_EVALUATION"
    }
    failed = evaluations["gate_mrr_min"]
    assert not failed.passed and failed.severity == dg.AssetCheckSeverity.ERROR
    assert failed.metadata["threshold"].value == 1.01
    value = failed.metadata["value"].value
    assert failed.metadata["delta"].value == pytest.approx(round(value - 1.01, 4))
    assert evaluations["gate_hit_at_10_min"].passed


def test_bad_golden_fails_fast_and_names_offenders(instance, tmp_path):
    bad = write(tmp_path / "g.yaml", "queries:\n  - {id: a, query: x}\n  - {id: a, query: y}\n")
    _, result = run_partition(instance, "bad", overrides={"golden": str(bad)})
    assert not result.success
    failure = next(e for e in result.all_events if e.is_step_failure)
    assert failure.step_key == "golden_set"
    text = str(failure.step_failure_data.error.to_string())
    assert "duplicate id" in text and str(bad) in text


def test_changed_golden_file_or_chunker_shows_as_stale(instance, tmp_path):
    # Dagster's own resolver behind the UI's "stale" badge (a private, test-only helper).
    from dagster._utils.test.data_versions import get_stale_status_resolver

    from kebab_eval_pipeline.orchestration.assets import EVAL_ASSETS, SOURCE_ASSETS

    def status(asset: str) -> str:
        resolver = get_stale_status_resolver(instance, [*SOURCE_ASSETS, *EVAL_ASSETS])
        return resolver.get_status(dg.AssetKey(asset), "s1").value

    golden = tmp_path / "golden.yaml"
    shutil.copy(DEMO_GOLDEN, golden)
    defs, result = run_partition(instance, "s1", overrides={"golden": str(golden)})
    assert result.success
    assert (status("golden_set"), status("retrieval_results")) == ("FRESH", "FRESH")

    # a new chunk size is a new index version: the system's results go stale, the golden set not
    observe_inputs(
        instance,
        run_settings(build_definitions(overrides={"golden": str(golden), "chunk_size": 300})),
    )
    assert (status("golden_set"), status("retrieval_results")) == ("FRESH", "STALE")

    golden.write_text(golden.read_text() + "\n# edited\n")
    observe_inputs(instance, run_settings(defs))
    assert status("golden_set") == "STALE"
    assert golden_content_sha256(golden) in str(
        instance.fetch_observations(dg.AssetKey("golden_file"), limit=1).records[0].asset_observation.tags
    )


def test_shared_corpus_runs_when_present(instance, tmp_path):
    from tests.conftest import SHARED_CORPUS

    if not SHARED_CORPUS.is_dir():
        pytest.skip(f"shared corpus not found at {SHARED_CORPUS} (only present in the project workspace)")
    golden = write(
        tmp_path / "g.yaml",
        """queries:
  - id: k1
    query: How does kebab compute the normalised RRF score?
    supports: [{rel_path: docs/components/search/README.md}]
  - id: k2
    query: What is the capital of Mongolia?
    answerable: false
""",
    )
    _, result = run_partition(
        instance,
        "shared",
        overrides={"golden": str(golden)},
        config=write(tmp_path / "c.yaml", f"system: {{corpus: {SHARED_CORPUS}}}\n"),
    )
    assert result.success
    assert DEMO_CORPUS.is_dir()


def test_regression_gate_on_comparison_report(instance, tmp_path):
    gates = (
        "gates:\n  mrr[lang=ko]: {min: 0.99, blocking: false}\n  mrr[lang=en]: {min: 0.1}\n"
        "  regression:\n    hit@1: {max_drop: 0.0}\n    hit@10: {max_drop: 0.1}\n"
        "    mrr: {max_p: 0.05}\n    hit@5: {max_p: 0.999999}\n"
    )
    cfg = write(tmp_path / "eval.yaml", gates)
    # Same chunker (an exact comparison), but the index loses the equipment folder.
    worse_cfg = write(
        tmp_path / "worse.yaml",
        gates + 'stale_golden: "off"\nsystem: {kind: reference, exclude: ["equipment/**"]}\n',
    )
    _, base = run_partition(instance, "base", config=cfg)
    assert base.success  # no baseline yet: the regression gate passes as skipped
    defs, worse = run_partition(instance, "worse", config=worse_cfg)
    evaluations = {
        e.event_specific_data.check_name: e.event_specific_data
        for e in worse.all_events
        if e.event_type_value == "ASSET_CHECK_EVALUATION"
    }
    store = RunStore(defs.resources["artifact_storage"].base)
    a = RunMetricsArtifact.from_tables(*store.read("run_metrics", "base")).metrics
    b = RunMetricsArtifact.from_tables(*store.read("run_metrics", "worse")).metrics
    assert b["hit@1"] < a["hit@1"] and a["hit@10"] - 0.1 < b["hit@10"] < a["hit@10"]
    report = ComparisonArtifact.from_tables(*store.read("comparison_report", "worse"))
    assert report.info["chunker_version_match"] == "exact"
    hit1 = evaluations["gate_hit_at_1_max_drop"]
    assert not hit1.passed and hit1.metadata["delta"].value == pytest.approx(
        round(b["hit@1"] - a["hit@1"], 4)
    )
    assert evaluations["gate_hit_at_10_max_drop"].passed
    assert not worse.success

    # Slice gates read the breakdowns: a warning on Korean MRR, a blocking gate on English that passes.
    slices = RunMetricsArtifact.from_tables(*store.read("run_metrics", "worse")).breakdowns
    ko = slices[(slices["dimension"] == "lang") & (slices["value"] == "ko") & (slices["metric"] == "mrr")]
    ko_check = evaluations["gate_mrr_lang_ko_min"]
    assert not ko_check.passed and ko_check.severity == dg.AssetCheckSeverity.WARN
    assert ko_check.metadata["value"].value == pytest.approx(float(ko["score"].iloc[0]))
    assert evaluations["gate_mrr_lang_en_min"].passed

    # Significance gates read the comparison's paired tests, Holm-adjusted over the 4 gated metrics.
    per_metric = ComparisonArtifact.from_tables(*store.read("comparison_report", "worse")).per_metric
    tests = per_metric.set_index("metric")
    gated = ["hit@1", "hit@10", "mrr", "hit@5"]
    holm = multipletests(tests.loc[gated, "p_value"], method="holm")[1]
    assert tests.loc[gated, "p_adjusted"].to_numpy() == pytest.approx(holm)
    assert (tests.loc[gated, "adjusted_by"] == "holm").all()
    for metric, max_p in (("mrr", 0.05), ("hit@5", 0.999999)):
        check = evaluations[f"gate_{metric.replace('@', '_at_')}_max_p"]
        p, delta = tests.loc[metric, "p_adjusted"], tests.loc[metric, "paired_delta"]
        assert check.metadata["p_raw"].value == pytest.approx(tests.loc[metric, "p_value"])
        assert 0.0 < p <= 1.0 and check.metadata["p_value"].value == pytest.approx(p)
        assert check.passed == (not (delta < 0 and p < max_p)), (metric, p, delta)  # higher is better
    assert tests.loc["hit@1", "test"] == "mcnemar_exact" and tests.loc["mrr", "test"] == "randomization"
    assert pd.isna(tests.loc["total_suite_ms", "p_value"])  # not a per-query mean: no test


def test_chunk_id_golden_falls_back_when_chunkers_differ(instance, tmp_path):

    from kebab_eval_pipeline.compare.runs import compare_runs
    from kebab_eval_pipeline.reference.index import ReferenceIndex

    index = ReferenceIndex.build(DEMO_CORPUS, chunk_size=800)
    entries = []
    for n, query in enumerate(
        ["kombucha second fermentation", "yogurt incubation temperature", "rye sourdough"]
    ):
        top = index.search(query, k=1)[0]
        entries.append(
            f"- id: k{n}\n  query: {query}\n  expected_doc_ids: [{top.doc_id}]\n"
            f"  expected_chunk_ids: [{top.chunk_id}]\n"
        )
    golden = write(tmp_path / "kebab.yaml", "".join(entries))
    run_partition(instance, "c800", overrides={"golden": str(golden), "chunk_size": 800})
    defs, _ = run_partition(instance, "c300", overrides={"golden": str(golden), "chunk_size": 300})
    store = RunStore(defs.resources["artifact_storage"].base)
    a, b = store.stored_run("c800"), store.stored_run("c300")
    # chunk ids of the 800-char chunker cannot match the 300-char run: exact matching would say "missed"
    assert b.scores.scores["first_relevant_rank"].isna().all()
    assert (a.scores.scores["first_relevant_rank"] == 1).all()
    report = compare_runs(a, b)
    assert report.info["chunker_version_match"] == "fallback_doc"
    assert report.info["verdict_counts"]["regression"] == 0  # by document, the 300-char run still finds them
    with pytest.raises(InputError, match="strict-chunker-version"):
        compare_runs(a, b, strict_chunker_version=True)
