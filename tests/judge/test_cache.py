"""The judge cache (SPEC §6): exact round-trips, the full (digest, prompt version, input hash) key,
hit/miss counts, concurrent writers in real processes and threads, damaged rows, unusable paths."""

from __future__ import annotations

import math
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.judge.cache import JudgeCache
from kebab_eval_pipeline.judge.completion import Completion, TokenLogprob

COMPLETION = Completion(
    text='{"score": 4, "reasoning": "Mostly supported — «naïve» 🙂"}',
    tokens=(
        TokenLogprob('{"', -1e-300, (('{"', -1e-300), ("{", -27.5))),
        TokenLogprob(" 4", -(0.1 + 0.2), ((" 4", -(0.1 + 0.2)), (" 3", -math.inf), ("5", -5e-324))),
        TokenLogprob("}", -0.0, ()),
    ),
    prompt_tokens=412,
    completion_tokens=3,
    finish_reason="stop",
    model="smollm2-135m-instruct",
    latency_ms=0.1 + 0.2,
    extra={"system_fingerprint": "fp_1", "nested": {"xs": [1, 2.5, None]}},
)


@pytest.fixture
def cache(tmp_path):
    with JudgeCache(tmp_path / "deep" / "er" / "judge-cache.sqlite") as c:
        yield c


def test_roundtrip_is_exact_in_the_same_and_a_new_instance(cache):
    assert cache.path.parent.is_dir()  # parent folders created
    cache.put("sha256:abc", "v1", "h1", COMPLETION)
    assert cache.get("sha256:abc", "v1", "h1") == COMPLETION
    with JudgeCache(cache.path) as reopened:
        got = reopened.get("sha256:abc", "v1", "h1")
    assert got == COMPLETION
    # Bit-exact floats, not merely close ones.
    assert got.tokens[0].logprob == -1e-300
    assert got.tokens[1].logprob == -(0.1 + 0.2) != -0.3
    assert got.tokens[1].top[1][1] == -math.inf
    assert got.tokens[1].top[2][1] == -5e-324
    assert math.copysign(1.0, got.tokens[2].logprob) == -1.0  # -0.0 keeps its sign
    assert got.latency_ms == 0.1 + 0.2 != 0.3


def test_no_tokens_roundtrip(cache):
    plain = Completion(text="not JSON at all", finish_reason="length")
    cache.put("d", "v1", "h", plain)
    assert cache.get("d", "v1", "h") == plain


def test_every_key_part_matters_and_counters_count(cache):
    cache.put("digest-a", "v1", "hash-1", COMPLETION)
    assert cache.get("digest-b", "v1", "hash-1") is None
    assert cache.get("digest-a", "v1-alt", "hash-1") is None
    assert cache.get("digest-a", "v1", "hash-2") is None
    assert cache.get("digest-a", "v1", "hash-1") == COMPLETION
    assert cache.get("digest-a", "v1", "hash-1") == COMPLETION
    assert (cache.hits, cache.misses, len(cache)) == (2, 3, 1)


def test_put_replaces(cache):
    cache.put("d", "v1", "h", COMPLETION)
    newer = Completion(text='{"score": 1}')
    cache.put("d", "v1", "h", newer)
    assert (cache.get("d", "v1", "h"), len(cache)) == (newer, 1)


def test_wal_journal_mode(cache):
    with sqlite3.connect(cache.path) as raw:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


# Each worker waits for the "go" file so that all four really write at the same time.
_WORKER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from kebab_eval_pipeline.judge.cache import JudgeCache
    from kebab_eval_pipeline.judge.completion import Completion, TokenLogprob

    path, go, worker = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
    deadline = time.monotonic() + 120
    while not go.exists() and time.monotonic() < deadline:
        time.sleep(0.005)
    with JudgeCache(path) as cache:
        for i in range(50):
            tokens = (TokenLogprob(str(i % 6), -0.1 * i, ((str(i % 6), -0.1 * i),)),)
            cache.put(f"digest-{worker}", "v1", f"hash-{i}", Completion(text=f"{worker}/{i}", tokens=tokens))
        assert all(cache.get(f"digest-{worker}", "v1", f"hash-{i}") for i in range(50))
        print(cache.hits)
    """
)


def test_four_processes_writing_concurrently_lose_nothing(tmp_path):
    path, go = tmp_path / "shared" / "judge-cache.sqlite", tmp_path / "go"
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER, str(path), str(go), str(w)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(4)
    ]
    go.touch()
    outputs = [w.communicate(timeout=180) for w in workers]
    assert [(w.returncode, err) for w, (_, err) in zip(workers, outputs, strict=True)] == [(0, "")] * 4
    assert [out.strip() for out, _ in outputs] == ["50"] * 4
    with JudgeCache(path) as cache:
        assert len(cache) == 200
        for w in range(4):
            for i in range(50):
                got = cache.get(f"digest-{w}", "v1", f"hash-{i}")
                assert got == Completion(
                    text=f"{w}/{i}", tokens=(TokenLogprob(str(i % 6), -0.1 * i, ((str(i % 6), -0.1 * i),)),)
                )
        assert (cache.hits, cache.misses) == (200, 0)


def test_threads_share_one_instance(cache):
    def work(t: int) -> None:
        for i in range(25):
            cache.put("d", "v1", f"{t}-{i}", Completion(text=f"{t}-{i}"))
            assert cache.get("d", "v1", f"{t}-{i}") == Completion(text=f"{t}-{i}")

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert (len(cache), cache.hits, cache.misses) == (200, 200, 0)


@pytest.mark.parametrize(
    "stored",
    [
        "not json {",
        "[1, 2]",
        '{"tokens": null}',  # no text
        '{"text": 5}',  # text not a string
        '{"text": "x", "tokens": [{"token": "a"}]}',  # a token without its logprob
        '{"text": "x", "tokens": [{"token": "a", "logprob": "high"}]}',
    ],
)
def test_a_damaged_row_is_a_miss_and_the_next_put_repairs_it(cache, stored):
    cache.put("d", "v1", "h", COMPLETION)
    with sqlite3.connect(cache.path) as raw:
        raw.execute("UPDATE judge_cache SET completion = ?", (stored,))
    assert cache.get("d", "v1", "h") is None
    assert (cache.hits, cache.misses) == (0, 1)
    cache.put("d", "v1", "h", COMPLETION)
    assert cache.get("d", "v1", "h") == COMPLETION


def _unusable(path: Path) -> str:
    with pytest.raises(InputError) as caught:
        JudgeCache(path)
    message = str(caught.value)
    assert str(path) in message
    assert "judge.cache_dir" in message
    return message


def test_unopenable_paths_are_input_errors_naming_the_file(tmp_path):
    a_file = tmp_path / "plain.txt"
    a_file.write_text("I am a file, not a folder\n")
    below_a_file = _unusable(a_file / "sub" / "judge-cache.sqlite")
    assert f"cannot create its folder: {a_file} is a file, not a folder" in below_a_file
    assert f"cannot create its folder: {a_file} is a file, not a folder" in _unusable(a_file / "x.sqlite")
    assert "is a folder; expected a database file" in _unusable(tmp_path)
    assert "cannot use it as a SQLite database: file is not a database" in _unusable(a_file)


def test_close_and_context_manager(tmp_path):
    with JudgeCache(tmp_path / "c.sqlite") as cache:
        cache.put("d", "v1", "h", COMPLETION)
    with pytest.raises(sqlite3.ProgrammingError):
        cache.get("d", "v1", "h")
    cache.close()  # idempotent
    assert repr(cache) == f"JudgeCache({str(tmp_path / 'c.sqlite')!r})"
