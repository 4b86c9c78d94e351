"""Atomic Parquet artifacts: a half-written attempt is never read as complete."""

import json
from pathlib import Path

import pandas as pd
import pytest

from kebab_eval_pipeline.errors import InputError
from kebab_eval_pipeline.run_ids import check_run_id
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
