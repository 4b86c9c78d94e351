"""Atomic Parquet artifacts: a half-written attempt is never read as complete."""

import json
from pathlib import Path

import pandas as pd
import pytest

from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.foundation.run_ids import check_run_id
from kebab_eval_pipeline.store.layout import MANIFEST, judge_cache_path
from kebab_eval_pipeline.store.runs import RunStore


def frame(n: int) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "query_id": pd.array([f"q{i}" for i in range(n)], dtype="string"),
            "rank": list(range(n)),
            "heading_path": [["A", f"B{i}"] for i in range(n)],
            "score": [None if i == 0 else i / 3 for i in range(n)],
        }
    )


def test_round_trip_keeps_types_and_lists(tmp_path: Path):
    store = RunStore(tmp_path)
    store.write("query_scores", "r1", {"t": frame(3)}, {"k": [1, 5]})
    tables, info = store.read("query_scores", "r1")
    got = tables["t"]
    assert info == {"k": [1, 5]}
    assert str(got["query_id"].dtype) == "string"
    assert [list(x) for x in got["heading_path"]] == [["A", "B0"], ["A", "B1"], ["A", "B2"]]
    assert pd.isna(got["score"][0]) and got["score"][2] == pytest.approx(2 / 3)


def test_rewrite_replaces_attempt_and_removes_old(tmp_path: Path):
    store = RunStore(tmp_path)
    first = store.write("a", "r1", {"t": frame(1)}, {})
    second = store.write("a", "r1", {"t": frame(4)}, {})
    assert first != second
    assert len(store.read("a", "r1")[0]["t"]) == 4
    dirs = [p.name for p in (tmp_path / "a" / "r1").iterdir() if p.is_dir()]
    assert dirs == [second]


def test_killed_attempt_is_invisible(tmp_path: Path):
    """Tables of an attempt whose manifest was never published are not read."""
    store = RunStore(tmp_path)
    store.write("a", "r1", {"t": frame(2)}, {"v": 1})
    orphan = tmp_path / "a" / "r1" / "20990101T000000-deadbeef"
    orphan.mkdir()
    (orphan / "t.parquet").write_bytes(b"half-written")
    tables, info = store.read("a", "r1")
    assert info == {"v": 1} and len(tables["t"]) == 2
    assert not store.exists("a", "r2")
    with pytest.raises(InputError, match="no stored a for run 'r2'"):
        store.read("a", "r2")


def test_runs_lists_published_manifests_in_time_order(tmp_path: Path):
    store = RunStore(tmp_path)
    store.write("m", "late", {"t": frame(1)}, {"created_at": "2026-01-02"})
    store.write("m", "early", {"t": frame(1)}, {"created_at": "2026-01-01"})
    (tmp_path / "m" / "unpublished").mkdir()
    assert [m["run_id"] for m in store.runs("m")] == ["early", "late"]
    manifest = json.loads((tmp_path / "m" / "late" / MANIFEST).read_text())
    assert manifest["tables"] == ["t"]


def test_fsspec_memory_url():
    store = RunStore("memory://kebab-test/artifacts")
    store.write("a", "r1", {"t": frame(2)}, {"x": 1})
    assert store.read("a", "r1")[1] == {"x": 1}


@pytest.mark.parametrize("bad", ["", "../x", "a/b", "a..b", " x", "x" * 129, "nl\n", "x" * 128 + "\n"])
def test_run_ids_are_path_safe(bad):
    with pytest.raises(InputError):
        check_run_id(bad)


def test_judge_cache_path(tmp_path, monkeypatch):
    """The judge cache lives beside a local base (plain path or file:// URL, RFC 8089), else in the
    user cache folder."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    user_cache = tmp_path / "home" / ".cache" / "kebab-eval" / "judge-cache.sqlite"
    assert judge_cache_path("/srv/eval/artifacts") == Path("/srv/eval/artifacts/judge-cache.sqlite")
    assert judge_cache_path("runs") == Path("runs/judge-cache.sqlite")
    assert judge_cache_path("file:///srv/my%20runs") == Path("/srv/my runs/judge-cache.sqlite")
    assert judge_cache_path("file://localhost/srv/x") == Path("/srv/x/judge-cache.sqlite")
    assert judge_cache_path("s3://bucket/artifacts") == user_cache
    assert judge_cache_path("memory://artifacts") == user_cache
    assert judge_cache_path(None) == user_cache
    assert judge_cache_path("") == user_cache
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert judge_cache_path(None) == tmp_path / "xdg" / "kebab-eval" / "judge-cache.sqlite"


def test_reader_keeps_declared_strings_as_arrow_and_scores_identically(tmp_path: Path):
    """Stored hits and golden tables read back with the dtypes they were written with (as
    ``to_pandas`` gives them), their declared string columns as Arrow-backed pandas strings (never
    object columns), and scoring them gives exactly the scores of the in-memory tables."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from kebab_eval_pipeline.golden.model import GoldenQuery, GoldenSet, Support
    from kebab_eval_pipeline.golden.tables import queries_table, supports_table, typed_frame
    from kebab_eval_pipeline.metrics.matching import match_hits
    from kebab_eval_pipeline.metrics.retrieval import retrieval_scores
    from kebab_eval_pipeline.store.artifact_store import read_frame
    from kebab_eval_pipeline.systems.base import HIT_COLUMNS

    golden = GoldenSet(
        queries=[
            GoldenQuery(
                id=f"q{i}", query=f"question {i}", supports=[Support(chunk_id=f"c{i}-{j}") for j in (0, 3)]
            )
            for i in range(4)
        ]
    )
    queries, supports = queries_table(golden), supports_table(golden)
    hits = typed_frame(
        [
            {
                "query_id": f"q{i}",
                "rank": r + 1,
                "chunk_id": f"c{i}-{r}",
                "doc_id": None,
                "heading_path": ["A"],
            }
            for i in range(4)
            for r in range(i + 2)
        ],
        HIT_COLUMNS,
    )
    store = RunStore(tmp_path)
    store.write("retrieval_results", "r1", {"hits": hits}, {})
    store.write("golden_set", "r1", {"queries": queries, "supports": supports}, {})
    stored, _ = store.read("retrieval_results", "r1")
    golden_tables, _ = store.read("golden_set", "r1")
    path = store.table_path("retrieval_results", "r1", "hits")
    for got in (stored["hits"], read_frame(path)):
        pd.testing.assert_frame_equal(got, pq.read_table(path).to_pandas())
        for column, dtype in HIT_COLUMNS.items():
            if dtype == "string":
                assert str(got[column].dtype) == "string", column
                assert isinstance(pa.array(got[column]), pa.ChunkedArray | pa.Array)
        assert [c for c in got.columns if got[c].dtype == object] == ["heading_path"]  # declared object
    assert list(read_frame(path, ["query_id", "rank"]).columns) == ["query_id", "rank"]

    def scores(q, s, h):
        return retrieval_scores(q, s, h, match_hits(h, s, criterion="chunk"), ks=(1, 3))

    expected = scores(queries, supports, hits)
    got = scores(golden_tables["queries"], golden_tables["supports"], stored["hits"])
    pd.testing.assert_frame_equal(got, expected)
    # every query finds its first support at rank 1 and its second (c…-3) only at rank 4
    assert expected["hit@1"].tolist() == [1.0] * 4 and expected["recall@3"].tolist() == [0.5] * 4


def test_read_selected_columns(tmp_path: Path):
    """``columns`` reads only the named columns of the named tables (those the file holds; ``[]``:
    none, the rows still counted); other tables are read whole."""
    store = RunStore(tmp_path)
    store.write("retrieval_results", "r1", {"hits": frame(3), "outcomes": frame(2)}, {})
    tables, _ = store.read(
        "retrieval_results", "r1", columns={"hits": ["rank", "no_such_column", "query_id"]}
    )
    assert list(tables["hits"].columns) == ["query_id", "rank"]  # file order
    assert tables["hits"]["rank"].tolist() == [0, 1, 2] and str(tables["hits"]["query_id"].dtype) == "string"
    assert list(tables["outcomes"].columns) == ["query_id", "rank", "heading_path", "score"]
    tables, _ = store.read("retrieval_results", "r1", columns={"hits": [], "outcomes": []})
    assert tables["hits"].shape == (3, 0) and tables["outcomes"].shape == (2, 0)


def test_local_read_never_loads_the_whole_file(tmp_path: Path, monkeypatch):
    """A local store opens each table's file and reads only the wanted column chunks (the hits of a
    big run are hundreds of MB, scoring wants three columns); a remote one fetches the file whole."""
    from upath import UPath

    store = RunStore(tmp_path)
    store.write("retrieval_results", "r1", {"hits": frame(3)}, {})
    remote = RunStore("memory://kebab-test/whole-file")
    remote.write("retrieval_results", "r1", {"hits": frame(3)}, {})

    originals = {cls: cls.read_bytes for cls in (type(UPath(tmp_path)), type(UPath("memory://x")))}

    def guarded(cls):
        def read_bytes(self):
            if str(self).endswith(".parquet"):  # manifests are read whole, tables must not be
                raise AssertionError(f"read whole: {self}")
            return originals[cls](self)

        return read_bytes

    for cls in originals:
        monkeypatch.setattr(cls, "read_bytes", guarded(cls))
    tables, _ = store.read("retrieval_results", "r1", columns={"hits": ["rank"]})
    assert tables["hits"]["rank"].tolist() == [0, 1, 2] and list(tables["hits"].columns) == ["rank"]
    with pytest.raises(AssertionError, match="read whole"):
        remote.read("retrieval_results", "r1")


def test_scoring_reads_the_hit_columns_its_criterion_consults(tmp_path: Path):
    """query_scores reads the hits itself, in the columns the run's settings make scoring consult:
    no heading lists (Python objects), line ranges or snippets under ``match: chunk`` without
    answers; every scoring column under ``auto`` or with a source root."""
    from kebab_eval_pipeline.chain.artifacts import RetrievalArtifact
    from kebab_eval_pipeline.chain.pipeline import scoring_hit_columns, with_scoring_hits
    from kebab_eval_pipeline.chain.settings import RunSettings
    from kebab_eval_pipeline.metrics.aggregate import SCORING_HIT_COLUMNS

    base = ["query_id", "rank", "chunk_id", "doc_id", "doc_path"]
    versions = ["index_version", "embedding_model", "chunker_version"]
    assert scoring_hit_columns(RunSettings(match="chunk", answers=False)) == base + versions
    assert scoring_hit_columns(RunSettings(match="chunk")) == [*base, "line_start", "line_end", *versions]
    anchor = RunSettings(match="anchor", answers=False)
    assert scoring_hit_columns(anchor) == [*base, "heading_path", *versions]
    every = list(SCORING_HIT_COLUMNS)
    assert scoring_hit_columns(RunSettings(match="auto")) == every
    assert scoring_hit_columns(RunSettings(match="chunk", source_root=str(tmp_path))) == every

    store = RunStore(tmp_path)
    tables = {"hits": frame(3), "outcomes": frame(2), "citations": frame(0), "known_chunks": frame(0)}
    store.write("retrieval_results", "r1", tables, {"system": {"kind": "fake"}})
    as_read = RetrievalArtifact.from_tables(*store.read("retrieval_results", "r1", columns={"hits": []}))
    got = with_scoring_hits(as_read, store, "r1", RunSettings(match="chunk", answers=False))
    hits = got.results.hits  # frame's columns: query_id, rank, heading_path, score
    assert list(hits.columns) == ["query_id", "rank"] and hits["rank"].tolist() == [0, 1, 2]
    assert len(got.results.outcomes) == 2 and got.results.system.kind == "fake"
    assert as_read.results.hits.shape == (3, 0)  # the input artifact is left as read
    # re-published between the two reads: scoring refuses rather than mix two attempts
    store.write("retrieval_results", "r1", {**tables, "hits": frame(4)}, {"system": {"kind": "fake"}})
    with pytest.raises(RuntimeError, match=r"changed while query_scores read it \(3 hit rows, then 4\)"):
        with_scoring_hits(as_read, store, "r1", RunSettings(match="chunk", answers=False))
