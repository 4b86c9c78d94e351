"""Atomic writes with real processes: a SIGKILLed writer leaves the old content, concurrent
writers of one partition never expose a half-published attempt, and artifacts live on a
``file://`` URL as well as a plain path (SPEC §11)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd

from kebab_eval_pipeline.foundation import atomic
from kebab_eval_pipeline.store.layout import MANIFEST
from kebab_eval_pipeline.store.runs import RunStore

SRC = Path(__file__).resolve().parents[1]


def _python(code: str, *args: str) -> subprocess.Popen:
    """A separate Python process running ``code`` (so SIGKILL hits a real writer, not a thread)."""
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        cwd=SRC,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for(predicate, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting for the writer"
        time.sleep(0.005)


# A writer that streams a large payload slowly through atomic.write_bytes: the temporary file
# exists (and grows) long before the rename, which is where the test kills it.
_SLOW_WRITER = """
    import sys, time
    from pathlib import Path
    from kebab_eval_pipeline.foundation import atomic
    target = Path(sys.argv[1])
    real_open = open
    def slow_open(path, mode="r", *a, **kw):
        fh = real_open(path, mode, *a, **kw)
        if "w" in mode and str(path).endswith(".tmp"):
            write = fh.write
            def chunked(data):
                for i in range(0, len(data), 1 << 20):
                    write(data[i : i + (1 << 20)]); fh.flush(); time.sleep(0.05)
                return len(data)
            fh.write = chunked
        return fh
    atomic.open = slow_open
    atomic.write_bytes(target, b"N" * (64 << 20))
"""


def test_sigkilled_atomic_write_leaves_the_old_file(tmp_path: Path):
    target = tmp_path / "report.html"
    atomic.write_bytes(target, b"old complete report")
    writer = _python(_SLOW_WRITER, str(target))
    _wait_for(lambda: any(p.name.endswith(".tmp") and p.stat().st_size > 0 for p in tmp_path.iterdir()))
    os.kill(writer.pid, signal.SIGKILL)
    writer.wait()
    assert writer.returncode == -signal.SIGKILL
    assert target.read_bytes() == b"old complete report"
    leftovers = [p.name for p in tmp_path.iterdir() if p.name != "report.html"]
    assert len(leftovers) == 1 and leftovers[0].startswith(".report.html.")  # hidden, never the target
    # the next write succeeds and replaces the file whole
    atomic.write_text(target, "new report")
    assert target.read_text() == "new report"


def test_atomic_write_to_a_stream_is_a_plain_write(tmp_path: Path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE)
    atomic.write_text(fifo, "streamed\n")
    assert reader.communicate(timeout=10)[0] == b"streamed\n"
    assert fifo.exists() and not fifo.is_file()


# Writes one partition of one asset over and over; each table's length equals its info's ``n``,
# so a reader can tell a consistent attempt from a torn one.
_PARTITION_WRITER = """
    import sys
    import pandas as pd
    from kebab_eval_pipeline.store.runs import RunStore

    base, writer, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    store = RunStore(base)
    for i in range(rounds):
        n = 1000 * writer + i + 1
        frame = pd.DataFrame({"query_id": [f"q{j}" for j in range(n)], "writer": writer})
        store.write("retrieval_results", "shared-run", {"hits": frame, "copy": frame}, {"n": n})
"""


def test_concurrent_writers_of_one_partition_never_expose_a_torn_attempt(tmp_path: Path):
    """Four processes re-publish the same partition while this process keeps reading it: every read
    is one whole attempt (both tables and the info agree), and one attempt remains at the end."""
    base = tmp_path / "artifacts"
    store = RunStore(base)
    store.write("retrieval_results", "shared-run", {"hits": pd.DataFrame({"query_id": ["q0"]})}, {"n": 1})
    writers = [_python(_PARTITION_WRITER, str(base), str(w), "8") for w in range(1, 5)]
    reads = 0
    while any(w.poll() is None for w in writers) or reads == 0:
        tables, info = store.read("retrieval_results", "shared-run")
        assert len(tables["hits"]) == info["n"]
        if "copy" in tables:
            assert tables["copy"].equals(tables["hits"])
        reads += 1
    for w in writers:
        _out, err = w.communicate()
        assert w.returncode == 0, err
    tables, info = store.read("retrieval_results", "shared-run")
    assert info["n"] % 1000 == 8  # some writer's last round
    run_dir = base / "retrieval_results" / "shared-run"
    attempts = [p.name for p in run_dir.iterdir() if p.is_dir()]
    manifest = store.manifest("retrieval_results", "shared-run")
    # older attempts are gone; only the published one (and at most a newer, already-published
    # writer's leftovers cannot exist: every writer finished) remains
    assert attempts == [manifest["attempt"]]
    assert not [p.name for p in run_dir.iterdir() if p.name.endswith(".tmp")]
    assert reads > 10


def test_killed_publisher_leaves_the_previous_attempt_and_the_next_write_cleans_up(tmp_path: Path):
    """SIGKILL a writer in the middle of a large table: the previous attempt is still what readers
    get; the next publish removes the orphaned attempt folder."""
    base = tmp_path / "artifacts"
    store = RunStore(base)
    store.write("query_scores", "r1", {"scores": pd.DataFrame({"v": [1.0, 2.0]})}, {"n": 2})
    # a real interrupted publish: the writer stalls on its first table, then is killed
    code = """
        import sys, time
        import pandas as pd
        from kebab_eval_pipeline.foundation import atomic
        from kebab_eval_pipeline.store.runs import RunStore
        real = atomic.write_bytes
        def slow(path, data):
            print("writing", path, flush=True)
            time.sleep(60)
            real(path, data)
        atomic.write_bytes = slow
        frame = pd.DataFrame({"v": [9.0]})
        RunStore(sys.argv[1]).write("query_scores", "r1", {"scores": frame}, {"n": 1})
    """
    killed = _python(code, str(base))
    assert killed.stdout.readline().startswith("writing")
    os.kill(killed.pid, signal.SIGKILL)
    killed.wait()
    run_dir = base / "query_scores" / "r1"
    assert len([p for p in run_dir.iterdir() if p.is_dir()]) == 2  # published + orphan
    tables, info = store.read("query_scores", "r1")
    assert info == {"n": 2} and tables["scores"]["v"].tolist() == [1.0, 2.0]
    published = store.write("query_scores", "r1", {"scores": pd.DataFrame({"v": [3.0]})}, {"n": 1})
    assert [p.name for p in run_dir.iterdir() if p.is_dir()] == [published]
    assert store.read("query_scores", "r1")[0]["scores"]["v"].tolist() == [3.0]
    assert (run_dir / MANIFEST).is_file()


def test_file_url_base_is_the_same_storage_as_the_plain_path(tmp_path: Path):
    """A ``file://`` URL base (how object-store URLs are given) writes where the plain path reads."""
    folder = tmp_path / "second-base"
    url_store = RunStore(folder.as_uri())
    assert str(url_store.base).startswith("file://")
    url_store.write("run_metrics", "r1", {"metrics": pd.DataFrame({"metric": ["mrr"], "value": [0.5]})}, {})
    plain = RunStore(folder)
    tables, _ = plain.read("run_metrics", "r1")
    assert tables["metrics"]["value"].tolist() == [0.5]
    assert (folder / "run_metrics" / "r1" / MANIFEST).is_file()
    assert [m["run_id"] for m in url_store.runs("run_metrics")] == ["r1"]
