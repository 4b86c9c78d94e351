"""Comparison reports end to end (SPEC §8, issue 7): real Dagster instances, real materializations.

1. two reference runs with different chunk sizes on a line-span golden set → ``fallback_span``
   (and on the anchor-only demo golden set → ``fallback_anchor``);
2. two runs differing only in retrieval mode → ``exact`` (needs the vectors extra);
3. a blocking verdict gate on queries tagged ``critical`` (replay traces);
4. ``compare.strict_chunker_version`` refuses a cross-chunker comparison in the asset;
5. golden-set drift between two runs on different golden files, shown in the Markdown.
"""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pytest
import yaml

from kebab_eval_pipeline.chain.artifacts import ComparisonArtifact, RunMetricsArtifact
from kebab_eval_pipeline.compare.fallback import rescore
from kebab_eval_pipeline.foundation.demo import DEMO_CORPUS, DEMO_GOLDEN
from kebab_eval_pipeline.golden.load import load_golden
from kebab_eval_pipeline.store.runs import RunStore
from tests.conftest import vectors_or_skip
from tests.orchestration.test_chain import materializations, run_partition
from tests.span_golden import build_span_golden

SIZE_300 = "md-heading-2:size=300:overlap=0"
SIZE_800 = "md-heading-2:size=800:overlap=0"
SIZE_1200 = "md-heading-2:size=1200:overlap=0"
REPORT_FILES = {
    "report_md": "comparison.md",
    "report_html": "comparison.html",
    "report_json": "comparison.json",
}


def store_of(defs) -> RunStore:
    return RunStore(defs.resources["artifact_storage"].base)


def stored_report(store: RunStore, run_id: str) -> ComparisonArtifact:
    return ComparisonArtifact.from_tables(*store.read("comparison_report", run_id))


def stored_metrics(store: RunStore, run_id: str) -> dict:
    return RunMetricsArtifact.from_tables(*store.read("run_metrics", run_id)).metrics


def per_metric(report: ComparisonArtifact, metric: str):
    return report.per_metric.set_index("metric").loc[metric]


def check_evaluations(result) -> dict:
    return {
        e.event_specific_data.check_name: e.event_specific_data
        for e in result.all_events
        if e.event_type_value == "ASSET_CHECK_EVALUATION"
    }


def strict_json(text: str):
    def no_constants(name: str):
        raise AssertionError(f"non-standard JSON constant {name}")

    return json.loads(text, parse_constant=no_constants)


def config(path: Path, doc: dict) -> Path:
    path.write_text(yaml.safe_dump(doc, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def span_golden(tmp_path_factory) -> Path:
    """The demo golden set with every support re-anchored to one line of its section."""
    out = tmp_path_factory.mktemp("span-golden") / "golden.yaml"
    return build_span_golden(DEMO_GOLDEN, DEMO_CORPUS, out, "demo-fermentation-spans")


# ---------------------------------------------------------------------------------------------
# 1. different chunkers: span fallback when the golden set has lines, doc fallback when not
# ---------------------------------------------------------------------------------------------


def test_span_golden_is_sane(span_golden):
    golden = load_golden(span_golden).golden
    demo = load_golden(DEMO_GOLDEN).golden
    assert [q.id for q in golden.queries] == [q.id for q in demo.queries]
    for ours, theirs in zip(golden.queries, demo.queries, strict=True):
        assert len(ours.supports) == len(theirs.supports), ours.id
        assert ours.answerable == theirs.answerable and ours.tags == theirs.tags
        for s, t in zip(ours.supports, theirs.supports, strict=True):
            assert s.rel_path == t.rel_path and s.heading_path is None
            assert s.line_start == s.line_end and s.line_start >= 1
    # a support of fact-001 lands on the line with its must_contain phrase
    fact = golden.by_id()["fact-001"]
    line = (
        (DEMO_CORPUS / fact.supports[0].rel_path)
        .read_text(encoding="utf-8")
        .split("\n")[fact.supports[0].line_start - 1]
    )
    assert fact.must_contain[0].lower() in line.lower()


def test_two_chunk_sizes_on_a_span_golden_compare_as_fallback_span(instance, tmp_path, span_golden):
    cfg = config(tmp_path / "eval.yaml", {"golden": str(span_golden), "answers": False})
    _, first = run_partition(instance, "span-300", cfg, overrides={"chunk_size": 300})
    defs, second = run_partition(instance, "span-1200", cfg, overrides={"chunk_size": 1200})
    assert first.success and second.success
    store = store_of(defs)

    # The span golden set is a sane one: a lexical run finds most of its gold lines.
    for run_id in ("span-300", "span-1200"):
        assert stored_metrics(store, run_id)["hit@10"] > 0.8, run_id

    report = stored_report(store, "span-1200")
    info = report.info
    assert info["run_a"] == "span-300" and info["run_b"] == "span-1200"
    assert info["chunker_version_match"] == "fallback_span"
    assert info["matching_criterion"] == "span"
    assert SIZE_300 in info["fallback_note"] and SIZE_1200 in info["fallback_note"]
    fallback_warnings = [w for w in info["warnings"] if w.startswith("fallback_span")]
    assert len(fallback_warnings) == 1
    assert SIZE_300 in fallback_warnings[0] and SIZE_1200 in fallback_warnings[0]
    assert "fallback_span" in report.markdown and SIZE_300 in report.markdown

    # Both runs were scored by span (auto): the comparison's a and b are their stored numbers,
    # which are what re-scoring by span gives.
    assert info["rescored"] == []
    a, b = store.stored_run("span-300"), store.stored_run("span-1200")
    assert a.scores.info["match_resolved"] == b.scores.info["match_resolved"] == "span"
    mrr = per_metric(report, "mrr")
    assert (mrr["a"], mrr["b"]) == (
        stored_metrics(store, "span-300")["mrr"],
        stored_metrics(store, "span-1200")["mrr"],
    )
    assert mrr["a"] == pytest.approx(rescore(a, "span")[1].metrics["mrr"])
    assert mrr["b"] == pytest.approx(rescore(b, "span")[1].metrics["mrr"])
    assert mrr["delta"] == pytest.approx(round(mrr["b"] - mrr["a"], 4))
    n_queries = len(load_golden(span_golden).golden.queries)
    counts = info["verdict_counts"]
    assert sum(counts.values()) == n_queries == len(report.per_query)
    assert counts["only_a"] == counts["only_b"] == 0
    assert counts["win"] + counts["loss"] + counts["regression"] + counts["draw"] > n_queries // 2

    # Dagster metadata links the three report files, which exist and agree with the stored report.
    meta = materializations(second)["comparison_report"].metadata
    assert meta["chunker_version_match"].value == "fallback_span"
    assert meta["baseline_run"].value == "span-300"
    assert meta["verdict/win"].value == counts["win"]
    paths = {key: Path(meta[key].value) for key in REPORT_FILES}
    for key, name in REPORT_FILES.items():
        assert paths[key].is_file() and paths[key].name == name, key
        assert str(paths[key]) == store.file_path("comparison_report", "span-1200", name)
    assert set(store.manifest("comparison_report", "span-1200")["files"]) == set(REPORT_FILES.values())
    document = strict_json(paths["report_json"].read_text(encoding="utf-8"))
    assert document["chunker_version_match"] == "fallback_span"
    assert len(document["per_query"]) == n_queries
    assert document["run_a"] == "span-300" and document["run_b"] == "span-1200"
    json_mrr = next(r for r in document["per_metric"] if r["metric"] == "mrr")
    assert json_mrr["a"] == pytest.approx(mrr["a"]) and json_mrr["b"] == pytest.approx(mrr["b"])
    assert "fallback_span" in paths["report_html"].read_text(encoding="utf-8")
    assert paths["report_md"].read_text(encoding="utf-8") == report.markdown


def test_two_chunk_sizes_on_the_anchor_only_demo_golden_compare_as_fallback_anchor(instance, tmp_path):
    cfg = config(tmp_path / "eval.yaml", {"answers": False})
    _, first = run_partition(instance, "demo-300", cfg, overrides={"chunk_size": 300})
    defs, second = run_partition(instance, "demo-1200", cfg, overrides={"chunk_size": 1200})
    assert first.success and second.success
    store = store_of(defs)
    report = stored_report(store, "demo-1200")
    info = report.info
    assert info["chunker_version_match"] == "fallback_anchor" and info["matching_criterion"] == "anchor"
    golden = load_golden(DEMO_GOLDEN).golden
    # every demo support is path + headings: both runs were scored by anchor, and keep their scores
    reason = "(both runs were scored by anchor); both runs keep their stored anchor scores"
    assert reason in info["fallback_note"] and info["rescored"] == []
    assert SIZE_300 in info["fallback_note"] and SIZE_1200 in info["fallback_note"]
    assert any(w.startswith("fallback_anchor") and reason in w for w in info["warnings"])
    assert sum(info["verdict_counts"].values()) == len(golden.queries)
    for run_id, column in (("demo-300", "a"), ("demo-1200", "b")):
        assert per_metric(report, "mrr")[column] == stored_metrics(store, run_id)["mrr"]
    assert materializations(second)["comparison_report"].metadata["chunker_version_match"].value == (
        "fallback_anchor"
    )


# ---------------------------------------------------------------------------------------------
# 2. same chunker, different retrieval mode: exact
# ---------------------------------------------------------------------------------------------


def test_lexical_vs_vector_compares_exact(instance):
    vectors_or_skip()
    _, first = run_partition(instance, "lexical", overrides={"mode": "lexical", "answers": False})
    # The retrieval mode is part of the reference system's identity: named, not chosen automatically.
    overrides = {"mode": "vector", "answers": False, "baseline": "lexical"}
    defs, second = run_partition(instance, "vector", overrides=overrides)
    assert first.success and second.success
    store = store_of(defs)
    report = stored_report(store, "vector")
    info = report.info
    assert info["run_a"] == "lexical" and info["chunker_version_match"] == "exact"
    assert info["cross_system"] is True
    assert info["systems_note"] == (
        "comparing two systems: reference demo corpus (lexical) vs reference demo corpus (vector)"
    )
    assert info["fallback_note"] == ""
    assert not any(w.startswith("fallback") for w in info["warnings"])
    a, b = store.stored_run("lexical"), store.stored_run("vector")
    assert info["matching_criterion"] == b.scores.info["match"] == a.scores.info["match"]
    va, vb = info["versions_a"], info["versions_b"]
    assert va["chunker_version"] == vb["chunker_version"] == SIZE_800
    assert va["embedding_model"] != vb["embedding_model"]
    assert "MiniLM" in str(vb["embedding_model"])
    assert (info["system_a"]["mode"], info["system_b"]["mode"]) == ("lexical", "vector")
    # exact: each side is the run's own stored number
    mrr = per_metric(report, "mrr")
    assert mrr["a"] == pytest.approx(stored_metrics(store, "lexical")["mrr"])
    assert mrr["b"] == pytest.approx(stored_metrics(store, "vector")["mrr"])
    assert sum(info["verdict_counts"].values()) == len(load_golden(DEMO_GOLDEN).golden.queries)
    versions = materializations(second)["comparison_report"].metadata["versions"].value
    assert versions["a"]["embedding_model"] == va["embedding_model"]
    assert versions["b"]["embedding_model"] == vb["embedding_model"]
    # the Markdown shows the versions side by side and flags the differing one
    row = next(line for line in report.markdown.splitlines() if line.startswith("| embedding_model"))
    assert "⚠" in row and str(vb["embedding_model"]) in row


# ---------------------------------------------------------------------------------------------
# Replay helpers: a tiny canonical golden set and kebab per_query.jsonl traces
# ---------------------------------------------------------------------------------------------

CHUNKER = "md-2:size=500"


def hit(rank: int, path: str, start: int, end: int) -> dict:
    """A flat kebab search_hit.v1 row; versions come from the hits."""
    return {
        "rank": rank,
        "chunk_id": f"{path}#{start}-{end}",
        "doc_id": path,
        "doc_path": path,
        "line_start": start,
        "line_end": end,
        "snippet": f"text of {path}",
        "score": 1.0 / rank,
        "chunker_version": CHUNKER,
        "index_version": "idx-1",
    }


def write_trace(path: Path, hits: dict[str, list[dict]]) -> Path:
    rows = [{"query_id": qid, "hits": h, "latency_ms": 5, "error": None} for qid, h in hits.items()]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def write_golden(path: Path, name: str, queries: list[dict]) -> Path:
    return config(path, {"schema_version": "1", "name": name, "queries": queries})


def query(qid: str, path: str, start: int, end: int, tags: list[str]) -> dict:
    return {
        "id": qid,
        "query": f"question {qid}?",
        "lang": "en",
        "category": "factual",
        "tags": tags,
        "supports": [{"rel_path": path, "line_start": start, "line_end": end}],
    }


def replay_config(path: Path, golden: Path, trace: Path, baseline: str, **extra) -> Path:
    doc = {
        "golden": str(golden),
        "system": {"kind": "replay", "path": str(trace), "format": "kebab"},
        "answers": False,
        "baseline": baseline,
        **extra,
    }
    return config(path, doc)


# ---------------------------------------------------------------------------------------------
# 3. verdict gates: any regression on a critical query blocks; losses only warn
# ---------------------------------------------------------------------------------------------

GATES = {
    "regression": {
        "regression[tag=critical]": {"max": 0},
        "loss": {"max": 0, "blocking": False},
    }
}
CRITICAL = "gate_regression_tag_critical_max"
LOSS = "gate_loss_max"


def test_regression_on_a_critical_query_blocks_the_run(instance, tmp_path):
    golden = write_golden(
        tmp_path / "golden.yaml",
        "gated",
        [
            query("crit-1", "docs/billing.md", 10, 12, ["critical", "billing"]),
            query("crit-2", "docs/login.md", 5, 6, ["critical"]),
            query("plain-1", "docs/faq.md", 1, 3, ["faq"]),
            query("plain-2", "docs/theme.md", 20, 25, ["faq"]),
        ],
    )
    found = {
        "crit-1": [hit(1, "docs/billing.md", 9, 14)],
        "crit-2": [hit(1, "docs/login.md", 5, 6)],
        "plain-1": [hit(1, "docs/faq.md", 1, 3)],
        "plain-2": [hit(1, "docs/theme.md", 20, 25)],
    }
    miss = hit(1, "docs/other.md", 1, 50)
    traces = {
        "base": found,
        # crit-1 missed (critical regression); plain-2 found at rank 2 instead of 1 (a loss)
        "cand": {**found, "crit-1": [miss], "plain-2": [miss, hit(2, "docs/theme.md", 20, 25)]},
        # only a non-critical query regresses
        "cand2": {**found, "plain-1": [miss]},
    }
    results = {}
    for run_id, hits in traces.items():
        trace = write_trace(tmp_path / f"{run_id}.jsonl", hits)
        baseline = "none" if run_id == "base" else "base"
        cfg = replay_config(tmp_path / f"{run_id}.yaml", golden, trace, baseline, gates=GATES)
        defs, results[run_id] = run_partition(instance, run_id, cfg)
    store = store_of(defs)

    base = check_evaluations(results["base"])
    assert results["base"].success
    # no baseline yet: the verdict gate could not run, so it yields no result (skipped, not passed)
    assert CRITICAL not in base and LOSS not in base

    cand, result = check_evaluations(results["cand"]), results["cand"]
    assert not result.success  # the blocking verdict gate fails the Dagster run
    assert "comparison_report" in materializations(result)  # the report itself is stored
    report = stored_report(store, "cand")
    assert report.info["chunker_version_match"] == "exact"
    verdicts = report.per_query.set_index("query_id")["verdict"].to_dict()
    assert verdicts == {"crit-1": "regression", "crit-2": "draw", "plain-1": "draw", "plain-2": "loss"}
    critical = cand[CRITICAL]
    assert not critical.passed and critical.severity == dg.AssetCheckSeverity.ERROR
    assert critical.metadata["value"].value == 1.0 and critical.metadata["threshold"].value == 0.0
    assert critical.metadata["blocking"].value is True
    reason = critical.metadata["reason"].value
    assert "crit-1" in reason and "critical" in reason and "plain" not in reason
    loss = cand[LOSS]
    assert not loss.passed and loss.severity == dg.AssetCheckSeverity.WARN
    assert loss.metadata["value"].value == 1.0 and "plain-2" in loss.metadata["reason"].value
    failure = next(e for e in result.all_events if e.is_step_failure)
    assert CRITICAL in str(failure.step_failure_data.error.to_string())

    cand2, result2 = check_evaluations(results["cand2"]), results["cand2"]
    assert stored_report(store, "cand2").info["verdict_counts"]["regression"] == 1  # plain-1
    assert cand2[CRITICAL].passed and cand2[CRITICAL].metadata["value"].value == 0.0
    assert cand2[LOSS].passed
    assert result2.success


# ---------------------------------------------------------------------------------------------
# 4. strict chunker version: the comparison refuses, the run's own assets are stored
# ---------------------------------------------------------------------------------------------


def test_strict_chunker_version_fails_the_comparison_step(instance, tmp_path):
    cfg = config(tmp_path / "eval.yaml", {"answers": False, "compare": {"strict_chunker_version": True}})
    _, first = run_partition(instance, "strict-300", cfg, overrides={"chunk_size": 300})
    assert first.success  # no baseline: nothing to refuse
    defs, second = run_partition(instance, "strict-1200", cfg, overrides={"chunk_size": 1200})
    assert not second.success
    failures = [e for e in second.all_events if e.is_step_failure]
    assert [e.step_key for e in failures] == ["comparison_report"]
    data = failures[0].step_failure_data
    text = (data.user_failure_data.description if data.user_failure_data else "") + data.error.to_string()
    assert SIZE_300 in text and SIZE_1200 in text and "strict-chunker-version" in text
    assert "input_error" in data.user_failure_data.metadata  # bad input: the CLI exits 2, not 3
    assert set(materializations(second)) == {
        "golden_set",
        "retrieval_results",
        "judge",
        "query_scores",
        "run_metrics",
    }
    store = store_of(defs)
    assert store.exists("run_metrics", "strict-1200")
    assert not store.exists("comparison_report", "strict-1200")


# ---------------------------------------------------------------------------------------------
# 5. golden-set drift through Dagster
# ---------------------------------------------------------------------------------------------


def test_golden_drift_is_listed_not_dropped(instance, tmp_path):
    old = write_golden(
        tmp_path / "v1.yaml",
        "drifting",
        [
            query("q1", "docs/a.md", 1, 2, []),
            query("q2", "docs/b.md", 3, 4, []),
            query("q3", "docs/c.md", 5, 6, []),
        ],
    )
    new = write_golden(
        tmp_path / "v2.yaml",
        "drifting",
        [
            query("q2", "docs/b.md", 3, 4, []),
            query("q3", "docs/c.md", 40, 41, []),  # the gold moved
            query("q4", "docs/d.md", 7, 8, []),
        ],
    )
    trace = write_trace(
        tmp_path / "trace.jsonl",
        {
            "q1": [hit(1, "docs/a.md", 1, 2)],
            "q2": [hit(1, "docs/b.md", 3, 4)],
            "q3": [hit(1, "docs/c.md", 5, 6)],
            "q4": [hit(1, "docs/d.md", 7, 8)],
        },
    )
    _, first = run_partition(instance, "drift-1", replay_config(tmp_path / "1.yaml", old, trace, "none"))
    defs, second = run_partition(
        instance, "drift-2", replay_config(tmp_path / "2.yaml", new, trace, "drift-1")
    )
    assert first.success and second.success
    report = stored_report(store_of(defs), "drift-2")
    info = report.info
    assert info["run_a"] == "drift-1"
    assert "configured explicitly" in info["baseline_note"] and "differ" in info["baseline_note"]
    assert info["only_in_a"] == ["q1"] and info["only_in_b"] == ["q4"]
    assert [c["query_id"] for c in info["gold_changed"]] == ["q3"]
    assert "supports" in info["gold_changed"][0]["fields"]
    verdicts = report.per_query.set_index("query_id")
    assert verdicts["verdict"].to_dict() == {
        "q1": "only_a",
        "q2": "draw",
        "q3": "gold_changed",  # the trace still points at the old lines: not a regression
        "q4": "only_b",
    }
    assert bool(verdicts.loc["q3", "gold_changed"])
    assert verdicts.loc["q3", "note"] == "gold changed (supports): not compared"
    assert any("golden sets differ" in w and "1 queries only in a" in w for w in info["warnings"])
    # the numbers are over q2 alone, the one query unchanged in both golden sets
    assert info["golden_restriction"]["n_compared"] == 1 and info["golden_restriction"]["n_dropped"] == 3
    assert report.per_metric.set_index("metric").loc["mrr", ["a", "b", "delta"]].tolist() == [1.0, 1.0, 0.0]

    md = report.markdown
    assert "## Golden-set drift" in md
    drift = md.split("## Golden-set drift", 1)[1]
    assert "only in `drift-1` (1): q1" in drift
    assert "only in `drift-2` (1): q4" in drift
    assert "gold changed (1): q3 (supports)" in drift
    meta = materializations(second)["comparison_report"].metadata
    assert meta["verdict/only_a"].value == 1 and meta["verdict/only_b"].value == 1
    assert meta["verdict/gold_changed"].value == 1 and meta["verdict/regression"].value == 0
    assert meta["golden/compared_queries"].value == 1 and meta["golden/dropped_queries"].value == 3
    assert "## Golden-set drift" in meta["report"].value
