"""Sharded retrieval_results and judge (kebab_eval_pipeline/chain/shards.py): a run cut into many shards,
each its own Dagster step, stores byte for byte what one shard stores. Real Dagster instance,
in-process executor; the judge is the scripted judge behind a real HTTP endpoint on 127.0.0.1.

The system under test is a replay of a demo run (its latencies are the recorded ones) and every
judgement is a cache hit (the cache keeps each reply's latency), so nothing in the stored Parquet
depends on the clock: the files of both runs must be equal, not just close.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from kebab_eval_pipeline.chain import pipeline
from kebab_eval_pipeline.chain.settings import load_settings
from kebab_eval_pipeline.chain.shards import shard_bounds
from kebab_eval_pipeline.contract import SystemInfo
from kebab_eval_pipeline.golden.tables import typed_frame
from kebab_eval_pipeline.orchestration.assets import SHARD_RETRY, SYSTEM_POOL, judge, retrieval_results
from kebab_eval_pipeline.reporting.export import export_json
from kebab_eval_pipeline.store.runs import RunStore
from kebab_eval_pipeline.systems.base import CITATION_COLUMNS, HIT_COLUMNS, OUTCOME_COLUMNS
from kebab_eval_pipeline.systems.outcome import QueryOutcome
from kebab_eval_pipeline.systems.runner import MAX_WARNINGS, RetrievalPiece, _outcome_row, merge_pieces
from tests.conftest import demo_golden_subset, write
from tests.judge.scripted import MODEL, scripted_endpoint
from tests.orchestration.test_chain import materializations, run_partition

KEY_ENV = "KEBAB_TEST_JUDGE_KEY"
COMPARED = ("retrieval_results", "judge", "query_scores", "run_metrics")


def _config(folder: Path, name: str, golden: Path, system: dict, base_url: str, **top) -> Path:
    judge = {
        "backend": "openai_compatible",
        "model": MODEL,
        "base_url": base_url,
        "api_key_env": KEY_ENV,
        "cache_dir": str(folder / "judge-cache"),
        "retries": 0,
        "spot_check_rate": 0.2,
    }
    # system_health off: the replayed runs fail 10 of 40 queries on purpose
    doc = {"golden": str(golden), "system": system, "judge": judge, "baseline": "none", "system_health": None}
    doc.update(top)
    return write(folder / f"{name}.yaml", yaml.safe_dump(doc))


def _steps(result, prefix: str) -> list[str]:
    return sorted(
        {e.step_key for e in result.all_events if e.is_step_success and e.step_key.startswith(prefix)}
    )


def _trace_of_a_judged_run(folder: Path, config: Path) -> Path:
    """The run of ``config`` made by the chain's functions (no Dagster: the fixture, not the subject),
    judged (which fills the judge cache) and exported as a replay trace."""
    settings = load_settings(config)
    golden = pipeline.load_golden_artifact(settings)
    retrieval = pipeline.retrieve(settings, golden)
    store = RunStore(folder / "ref-store")
    judged = pipeline.judge(settings, golden, retrieval, store)
    scores = pipeline.score(settings, golden, retrieval, judged)
    metrics = pipeline.summarize("ref", settings, golden, retrieval, scores, judged)
    for asset, art in (
        ("golden_set", golden),
        ("retrieval_results", retrieval),
        ("query_scores", scores),
        ("run_metrics", metrics),
    ):
        store.write(asset, "ref", *art.to_tables())
    trace = folder / "trace.json"
    trace.write_text(json.dumps(export_json(store, "ref")), encoding="utf-8")
    return trace


def test_many_shards_store_exactly_what_one_shard_stores(instance, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(KEY_ENV, "jk-shards-test")
    # The trace: a judged demo run of queries 10…44. The replayed golden set is queries 0…39, so
    # queries 0…9 are missing from the trace (error rows: the first shard of 7 fails entirely) and
    # 40…44 are trace queries the golden set does not have (one run-level warning).
    traced = demo_golden_subset(tmp_path / "traced.yaml", slice(10, 45), name="traced")
    replayed = demo_golden_subset(tmp_path / "replayed.yaml", slice(0, 40), name="replayed")
    with scripted_endpoint() as endpoint:
        url = endpoint.base_url
        trace = _trace_of_a_judged_run(tmp_path, _config(tmp_path, "ref", traced, {"kind": "reference"}, url))
        system = {"kind": "replay", "path": str(trace), "format": "export"}
        # the replayed answers are the traced run's: every judgement is in the cache already
        runs = {
            "one": _config(tmp_path, "one", replayed, system, url),
            "many": _config(tmp_path, "many", replayed, system, url, shard_queries=7),
        }
        results = {}
        for run_id, config in runs.items():
            defs, results[run_id] = run_partition(instance, run_id, config)
            assert results[run_id].success, run_id
    store = RunStore(defs.resources["artifact_storage"].base)

    n = 40
    shards = len(shard_bounds(n, 7))
    assert shards == 6
    many, one = results["many"], results["one"]
    assert _steps(one, "retrieval_results.retrieve_shard") == ["retrieval_results.retrieve_shard[shard_0000]"]
    assert len(_steps(many, "retrieval_results.retrieve_shard")) == shards
    assert len(_steps(many, "judge.judge_shard")) > 1
    assert materializations(many)["retrieval_results"].metadata["shards"].value == shards

    for asset in COMPARED:
        a, b = store.manifest(asset, "one"), store.manifest(asset, "many")
        assert a["tables"] == b["tables"]
        for table in a["tables"]:
            left = Path(store.table_path(asset, "one", table)).read_bytes()
            right = Path(store.table_path(asset, "many", table)).read_bytes()
            assert left == right, f"{asset}/{table} differs between one shard and {shards}"
        skip = {"run_id", "created_at"}  # the run's own id and time
        assert {k: v for k, v in a["info"].items() if k not in skip} == {
            k: v for k, v in b["info"].items() if k not in skip
        }, asset

    outcomes = pq.read_table(store.table_path("retrieval_results", "many", "outcomes")).to_pandas()
    assert len(outcomes) == n and outcomes["query_id"].is_unique
    first = outcomes.iloc[:10]
    assert (first["error_class"] == "missing_in_trace").all()  # a whole shard of failures: rows
    info = store.manifest("retrieval_results", "many")["info"]
    unknown = [w for w in info["adapter_warnings"] if "not in the golden set" in w]
    assert len(unknown) == 1  # once per run, not once per shard
    assert unknown[0].startswith("the trace has 5 queries not in the golden set (ignored): ")
    judge_info = store.manifest("judge", "many")["info"]
    assert judge_info["model_calls"] == 0 and judge_info["cache_hits"] > 0
    assert judge_info["judged_queries"] > 7 and len(judge_info["spot_check_queries"]) > 0
    # the run's shard values live beside its artifacts, under the storage base
    assert (Path(defs.resources["artifact_storage"].base) / "_shards" / "many").is_dir()


def test_shard_steps_retry_on_their_own_and_claim_the_pool() -> None:
    """The per-shard ops carry the retry policy; the ops that call the system under test claim the
    ``kebab_eval_system`` pool (and only those: the judge calls no system under test)."""
    ops = {
        node.name: node.definition
        for asset in (retrieval_results, judge)
        for node in asset.node_def.nodes  # type: ignore[union-attr]
    }
    assert set(ops) == {
        "plan_retrieval",
        "retrieve_shard",
        "collect_retrieval",
        "plan_judging",
        "judge_shard",
        "collect_judgements",
    }
    assert ops["retrieve_shard"].retry_policy == ops["judge_shard"].retry_policy == SHARD_RETRY
    assert SHARD_RETRY.max_retries >= 1
    assert {name for name, op in ops.items() if op.pool == SYSTEM_POOL} == {
        "plan_retrieval",
        "retrieve_shard",
    }
    assert all(ops[name].retry_policy is None for name in ops if not name.endswith("_shard"))


def test_shard_bounds_cover_every_query_once() -> None:
    assert shard_bounds(15, 7) == [(0, 7), (7, 14), (14, 15)]
    assert shard_bounds(7, 7) == [(0, 7)]
    assert shard_bounds(0, 7) == [(0, 0)]  # an empty run still has its one shard
    with pytest.raises(ValueError, match="≥ 1"):
        shard_bounds(3, 0)


def test_merged_warnings_are_the_whole_runs_first_ones() -> None:
    """Each piece keeps its first MAX_WARNINGS per-query warnings and counts the rest: the merge lists
    exactly the first MAX_WARNINGS of the whole run, run-level warnings once, and counts the others."""

    def piece(qids: list[str], run_warnings: list[str]) -> RetrievalPiece:
        warnings = [f"{q}: odd hit {i}" for q in qids for i in range(30)]
        return RetrievalPiece(
            outcomes=typed_frame(
                [_outcome_row(QueryOutcome(query_id=q), False) for q in qids], OUTCOME_COLUMNS
            ),
            hits=typed_frame([], HIT_COLUMNS),
            citations=typed_frame([], CITATION_COLUMNS),
            known_chunks=typed_frame({"chunk_id": []}, {"chunk_id": "string"}),
            system=SystemInfo(kind="replay"),
            run_warnings=run_warnings,
            warnings=warnings[:MAX_WARNINGS],
            warnings_dropped=max(0, len(warnings) - MAX_WARNINGS),
        )

    whole = merge_pieces([piece(["a", "b", "c"], ["trace: 2 unknown"])])
    sharded = merge_pieces([piece(["a"], ["trace: 2 unknown"]), piece(["b", "c"], ["trace: 2 unknown"])])
    assert sharded.warnings == whole.warnings
    assert whole.warnings[0] == "trace: 2 unknown" and whole.warnings[-1] == "… and 41 more warnings"
    assert len(whole.warnings) == MAX_WARNINGS + 1
    assert sharded.outcomes["query_id"].tolist() == ["a", "b", "c"]


def test_pieces_read_back_as_files_merge_to_the_same_hits_and_versions(tmp_path: Path) -> None:
    """The collecting step merges the shards' hits as their files (shard_io reads only their
    footers): the table written part by part equals the pandas merge row for row, an all-empty
    heading_path (list<null>) unifies with one that has headings, the versions reported on hits are
    counted alike, and the per-query table finds the same top hits."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    from kebab_eval_pipeline.chain.shards import RetrievalShardResult
    from kebab_eval_pipeline.foundation.parquet_parts import ParquetParts
    from kebab_eval_pipeline.orchestration.shard_io import read_value, write_value
    from kebab_eval_pipeline.reporting.per_query import worst_results_first

    def hit(qid: str, rank: int, headings: list[str], version: str | None) -> dict:
        return {
            "query_id": qid,
            "rank": rank,
            "chunk_id": f"{qid}-{rank}",
            "heading_path": headings,
            "score": 1.0 / rank,
            "index_version": version,
        }

    def piece(rows: list[dict], qids: list[str]) -> RetrievalPiece:
        return RetrievalPiece(
            outcomes=typed_frame(
                [_outcome_row(QueryOutcome(query_id=q), False) for q in qids], OUTCOME_COLUMNS
            ),
            hits=typed_frame(rows, HIT_COLUMNS),
            citations=typed_frame([], CITATION_COLUMNS),
            known_chunks=typed_frame({"chunk_id": []}, {"chunk_id": "string"}),
            system=SystemInfo(kind="replay"),
        )

    first = piece([hit("a", 1, [], "v1"), hit("a", 2, [], None)], ["a"])  # no headings at all
    second = piece([hit("b", 1, ["Guide", "Install"], "v2"), hit("c", 1, [], "v1")], ["b", "c"])
    in_pandas = merge_pieces([first, second])
    read_back = []
    for i, p in enumerate((first, second)):
        write_value(tmp_path / str(i), RetrievalShardResult(i, 10, p))
        read_back.append(read_value(tmp_path / str(i)).piece)
    assert all(isinstance(p.hits, ParquetParts) for p in read_back)
    in_arrow = merge_pieces(read_back)
    assert isinstance(in_arrow.hits, ParquetParts) and len(in_arrow.hits) == 4
    assert in_arrow.hits.schema.field("heading_path").type == pa.list_(pa.string())
    buffer = io.BytesIO()
    in_arrow.hits.write_parquet(buffer)
    written = pq.read_table(io.BytesIO(buffer.getvalue()))
    assert written.schema.field("heading_path").type == pa.list_(pa.string())
    got, want = written.to_pandas(), in_pandas.hits
    assert list(got.columns) == list(want.columns) and got.dtypes.equals(want.dtypes)
    top = worst_results_first(in_arrow.outcomes, in_arrow.hits)
    assert top.equals(worst_results_first(in_pandas.outcomes, in_pandas.hits))
    assert top.set_index("query_id")["top_hit"].isna().all()  # no doc_path recorded on these hits
    assert got["query_id"].tolist() == want["query_id"].tolist() == ["a", "a", "b", "c"]
    assert [list(v) for v in got["heading_path"]] == [list(v) for v in want["heading_path"]]
    assert got["index_version"].tolist() == want["index_version"].tolist()
    assert in_arrow.versions_reported == in_pandas.versions_reported == {"index_version": {"v1": 2, "v2": 1}}
    assert in_arrow.outcomes.equals(in_pandas.outcomes)
