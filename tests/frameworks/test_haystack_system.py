"""A real third-party RAG framework under evaluation: Haystack 2, as a team would wire it.

``haystack_app.py`` builds a Haystack BM25 pipeline (MarkdownHeaderSplitter → InMemoryBM25Retriever)
over the kebab-docs corpus and serves Haystack's own ``Document.to_dict()`` hits, unchanged, over
HTTP and as a persistent JSON-lines process. ``haystack_http.yaml`` / ``haystack_jsonl.yaml`` map
those hits with the response mapping (no shim); ``tests/data/kebab_docs_haystack_golden.yaml``
anchors 52 answerable questions by path + heading path and by line span.

Everything is asserted through real ``kebab-eval`` subprocesses against a temporary Dagster home:

* the stored per-query scores equal an independent computation from the raw Haystack hits;
* the http and the jsonl command adapters give identical per-query scores and hits, and so does the
  same pipeline built in-process (``kind: python``, ``haystack_python.yaml``): Haystack's
  ``Document`` objects, converted by the adapter, read with the same mapping;
* pytrec_eval on ``export --format trec`` reproduces the stored scores per query;
* two chunk sizes compared under anchor matching give the verdicts each run's own scores imply;
* ``match: auto`` resolved to anchor (the hits carry no line ranges);
* a run against a server that is not listening exits 1.

Needs the shared corpus (``shared/corpora/kebab-docs`` beside the repository, or above it) and the
``frameworks`` extra (``pip install -e ".[frameworks]"``); skips without them, unless
``KEBAB_EVAL_REQUIRE_FRAMEWORKS=1`` (CI), which turns a skip into a failure. The Haystack index is
built once per process (about a second); the module runs in about a minute.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import re
import socket
import string
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO
from tests.forked_cli import run_cli

HERE = Path(__file__).resolve().parent
APP = HERE / "haystack_app.py"
GOLDEN = REPO / "tests" / "data" / "kebab_docs_haystack_golden.yaml"
CLI = [sys.executable, "-m", "kebab_eval_pipeline.cli"]
KS = (1, 3, 5, 10)
BIG, SMALL = 200, 50  # words per chunk (MarkdownHeaderSplitter split_length) of the two compared runs
TOL = 1e-4  # stored scores are rounded to 4 decimals


def find_corpus() -> Path | None:
    """``shared/corpora/kebab-docs`` beside the repository root — or beside a folder above it, so a
    git worktree nested under the workspace finds the same corpus. None when absent."""
    for base in (REPO, *REPO.parents):
        candidate = base.parent / "shared" / "corpora" / "kebab-docs"
        if candidate.is_dir():
            return candidate
    return None


def frameworks_or_skip() -> Path:
    """The corpus path, or skip naming what is missing — a failure under KEBAB_EVAL_REQUIRE_FRAMEWORKS=1."""
    corpus = find_corpus()
    missing = []
    if corpus is None:
        missing.append(f"the kebab-docs corpus (no shared/corpora/kebab-docs beside {REPO} or above it)")
    if importlib.util.find_spec("haystack") is None:
        missing.append('haystack-ai (pip install -e ".[frameworks]")')
    if missing:
        message = "Haystack system test needs " + " and ".join(missing)
        if os.environ.get("KEBAB_EVAL_REQUIRE_FRAMEWORKS") == "1":
            pytest.fail(f"KEBAB_EVAL_REQUIRE_FRAMEWORKS=1 but the {message}")
        pytest.skip(message)
    return corpus  # type: ignore[return-value]


# -- the pieces every test shares (module scope: each run happens once) -------------------------


@pytest.fixture(scope="module")
def corpus() -> Path:
    return frameworks_or_skip().resolve()


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("haystack")


@pytest.fixture(scope="module")
def env(work) -> dict[str, str]:
    home = work / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("KEBAB_EVAL_", "DAGSTER_"))}
    environment["DAGSTER_HOME"] = str(home)
    environment["HAYSTACK_TELEMETRY_ENABLED"] = "False"
    return environment


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return run_cli(args, env=env, cwd=REPO, timeout=600)


def no_traceback(proc: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout, proc.stderr[-3000:]


def start_server(corpus: Path, chunk_size: int, env: dict[str, str]) -> tuple[subprocess.Popen, str]:
    """``haystack_app.py serve`` on a free 127.0.0.1 port; returns the process and its base URL."""
    # stderr to a file, not a pipe nobody drains: a chatty server must never block on a full pipe.
    log = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 (lives as long as the server)
    proc = subprocess.Popen(
        [sys.executable, str(APP), "serve", "--corpus", str(corpus), "--chunk-size", str(chunk_size)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
    )
    line = proc.stdout.readline()  # type: ignore[union-attr]  # blocks until the index is built
    found = re.match(r"listening on (http://127\.0\.0\.1:\d+)", line)
    if not found:
        proc.kill()
        log.seek(0)
        pytest.fail(f"haystack_app serve did not start: {line!r} {log.read()[-2000:]}")
    return proc, found.group(1)


@pytest.fixture(scope="module")
def servers(corpus, env):
    """Two Haystack HTTP servers, chunk sizes BIG and SMALL: ``{size: base URL}``."""
    started = {size: start_server(corpus, size, env) for size in (BIG, SMALL)}
    yield {size: url for size, (_, url) in started.items()}
    for proc, _ in started.values():
        proc.terminate()
    for proc, _ in started.values():
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:  # a server still shutting down on a loaded machine
            proc.kill()
            proc.wait()


def render(template: str, work: Path, name: str, **values: str) -> Path:
    """The config template ``template`` (in this folder) with ``${…}`` filled in, written to ``work``."""
    text = string.Template((HERE / template).read_text(encoding="utf-8")).substitute(
        golden=str(GOLDEN), **values
    )
    path = work / f"{name}.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def http_config(work: Path, name: str, url: str, corpus: Path) -> Path:
    return render(
        "haystack_http.yaml",
        work,
        name,
        search_url=f"{url}/search",
        version_url=f"{url}/version",
        corpus=str(corpus),
    )


def run(env: dict[str, str], config: Path, run_id: str) -> subprocess.CompletedProcess:
    return cli(env, "run", "--config", str(config), "--run-id", run_id, "--baseline", "none")


def export(env: dict[str, str], run_id: str) -> dict:
    proc = cli(env, "export", run_id, "--format", "json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


class Runs:
    """The stored runs, each made on first use and exported: ``runs[run_id]`` is the export JSON
    plus ``"_proc"`` (the ``kebab-eval run`` process). Lazy, so a test needing only the http runs
    does not depend on the command adapter, and each run happens once per module."""

    def __init__(self, env: dict[str, str], configs: dict[str, Callable[[], Path]]) -> None:
        self.env, self.configs = env, configs
        self.procs: dict[str, subprocess.CompletedProcess] = {}
        self.done: dict[str, dict] = {}

    def __getitem__(self, run_id: str) -> dict:
        if run_id not in self.procs:  # a failed run is not retried by the next test
            started = time.perf_counter()
            self.procs[run_id] = run(self.env, self.configs[run_id](), run_id)
            print(f"{run_id}: exit {self.procs[run_id].returncode} in {time.perf_counter() - started:.1f} s")
        proc = self.procs[run_id]
        assert proc.returncode == 0, f"{run_id}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        no_traceback(proc)
        if run_id not in self.done:
            self.done[run_id] = {**export(self.env, run_id), "_proc": proc}
        return self.done[run_id]


@pytest.fixture(scope="module")
def runs(corpus, env, work, servers) -> Runs:
    """http at BIG and SMALL words per chunk, the persistent jsonl command and the in-process python
    system at BIG."""
    return Runs(
        env,
        {
            f"http-{BIG}": lambda: http_config(work, f"http-{BIG}", servers[BIG], corpus),
            f"http-{SMALL}": lambda: http_config(work, f"http-{SMALL}", servers[SMALL], corpus),
            f"jsonl-{BIG}": lambda: render(
                "haystack_jsonl.yaml",
                work,
                f"jsonl-{BIG}",
                python=sys.executable,
                app=str(APP),
                corpus=str(corpus),
                chunk_size=str(BIG),
            ),
            f"python-{BIG}": lambda: render(
                "haystack_python.yaml",
                work,
                f"python-{BIG}",
                app_dir=str(HERE),
                corpus=str(corpus),
                chunk_size=str(BIG),
            ),
        },
    )


# -- an independent oracle: the raw Haystack hits, matched by hand ------------------------------


@pytest.fixture(scope="module")
def haystack_app(corpus):
    """haystack_app's App imported in this process (the same code the servers run)."""
    sys.path.insert(0, str(HERE))
    try:
        from haystack_app import App
    finally:
        sys.path.remove(str(HERE))
    return lambda size: App(corpus, size)


def golden_queries() -> list[dict]:
    return yaml.safe_load(GOLDEN.read_text(encoding="utf-8"))["queries"]


def _norm(headings: list[str]) -> list[str]:
    return [" ".join(h.split()) for h in headings]


def anchor_ranks(app, corpus: Path) -> dict[str, int | None]:
    """Per answerable query: the rank (1..10) of the first raw Haystack hit whose file, relative to
    the corpus, is the gold ``rel_path`` and whose ``parent_headers + [header]`` starts with the
    gold heading path; None when no top-10 hit does. Written from SPEC-level rules, not the
    package's matching code."""
    ranks: dict[str, int | None] = {}
    for q in golden_queries():
        if not q.get("supports"):
            continue
        ranks[q["id"]] = None
        for rank, hit in enumerate(app.search(q["query"], 10), start=1):
            rel = Path(hit["file_path"]).relative_to(corpus).as_posix()
            path = _norm([*hit["parent_headers"], hit["header"]])
            if any(
                rel == s["rel_path"] and path[: len(s["heading_path"])] == _norm(s["heading_path"])
                for s in q["supports"]
            ):
                ranks[q["id"]] = rank
                break
    return ranks


def per_query(doc: dict) -> dict[str, dict]:
    return {q["query_id"]: q for q in doc["per_query"]}


def scores_only(row: dict) -> dict:
    """A per-query row's scores without its timings (``retrieval_ms`` …), which differ per adapter."""
    return {k: v for k, v in row["scores"].items() if not k.endswith("_ms")}


# -- tests ----------------------------------------------------------------------------------------


def test_golden_spans_match_the_corpus(corpus):
    """Every gold line span starts at its section's heading line and ends at the section's last
    non-blank line: the next non-blank line is a heading of the same or a higher level (or EOF)."""
    heading = re.compile(r"^(#{1,6}) (.+)$")
    bad = []
    for q in golden_queries():
        for s in q.get("supports", []):
            lines = (corpus / s["rel_path"]).read_text(encoding="utf-8").split("\n")
            start, end = s["line_start"], s["line_end"]
            head = heading.match(lines[start - 1])
            if not head or " ".join(head.group(2).split()) != " ".join(s["heading_path"][-1].split()):
                bad.append(f"{q['id']}: line {start} is not the heading {s['heading_path'][-1]!r}")
                continue
            if not lines[end - 1].strip():
                bad.append(f"{q['id']}: line {end} is blank")
            following = next((line for line in lines[end:] if line.strip()), None)
            nxt = heading.match(following) if following is not None else None
            if following is not None and not (nxt and len(nxt.group(1)) <= len(head.group(1))):
                bad.append(f"{q['id']}: after line {end} comes {following[:60]!r}, not a sibling heading")
    assert not bad, "\n".join(bad)


def test_golden_set_validates(env):
    proc = cli(env, "golden", "validate", str(GOLDEN))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ok: 60 queries (52 answerable, 8 unanswerable"), proc.stdout


def test_stored_scores_equal_an_independent_computation(runs, haystack_app, corpus):
    """mrr and hit@k per query, as stored for the http run, from the raw Haystack hits."""
    ranks = anchor_ranks(haystack_app(BIG), corpus)
    stored = per_query(runs[f"http-{BIG}"])
    for qid, rank in ranks.items():
        scores = stored[qid]["scores"]
        assert scores["mrr"] == pytest.approx(1 / rank if rank else 0.0, abs=TOL), qid
        for k in KS:
            assert scores[f"hit@{k}"] == (1.0 if rank is not None and rank <= k else 0.0), (qid, k)
    mrr = sum(1 / r for r in ranks.values() if r) / len(ranks)
    hit10 = sum(r is not None for r in ranks.values()) / len(ranks)
    print(f"Haystack BM25, {BIG} words per chunk, {len(ranks)} queries: MRR {mrr:.4f}, hit@10 {hit10:.4f}")
    assert runs[f"http-{BIG}"]["metrics"]["mrr"] == pytest.approx(mrr, abs=TOL)
    assert mrr > 0.5 and hit10 > 0.8  # sanity: a working BM25 pipeline, not a mapping that zeroes


def test_http_and_jsonl_command_give_identical_scores(runs):
    http, command = per_query(runs[f"http-{BIG}"]), per_query(runs[f"jsonl-{BIG}"])
    assert set(http) == set(command) and len(http) == 60
    for qid in http:
        assert http[qid]["error"] is None and command[qid]["error"] is None, qid
        assert scores_only(command[qid]) == scores_only(http[qid]), qid
        assert [h["chunk_id"] for h in command[qid]["hits"]] == [h["chunk_id"] for h in http[qid]["hits"]]

    # every run metric but the timings (latencies and suite time differ between any two runs)
    def untimed(doc):
        return {k: v for k, v in doc["metrics"].items() if "_ms" not in k}

    assert untimed(runs[f"jsonl-{BIG}"]) == untimed(runs[f"http-{BIG}"])
    assert untimed(runs[f"http-{BIG}"])["mrr"] > 0.5
    for doc in (runs[f"http-{BIG}"], runs[f"jsonl-{BIG}"]):
        assert doc["versions"]["chunker_version"] == f"haystack-md-header-{BIG}"


def test_in_process_python_system_gives_the_http_scores(runs):
    """kind: python — haystack_app.build() called in the run's process, its retriever's Document
    objects converted by the adapter — scores every query as the same pipeline over http does."""
    http, python = per_query(runs[f"http-{BIG}"]), per_query(runs[f"python-{BIG}"])
    assert set(python) == set(http) and len(python) == 60
    for qid in http:
        assert python[qid]["error"] is None, (qid, python[qid]["error"])
        assert scores_only(python[qid]) == scores_only(http[qid]), qid
        assert python[qid]["hits"] == http[qid]["hits"], qid  # every field, not only the ids

    def untimed(doc):
        return {k: v for k, v in doc["metrics"].items() if "_ms" not in k}

    assert untimed(runs[f"python-{BIG}"]) == untimed(runs[f"http-{BIG}"])
    assert runs[f"python-{BIG}"]["metrics"]["mrr"] == pytest.approx(0.756, abs=5e-4)  # the README's figure
    versions = runs[f"python-{BIG}"]["versions"]
    assert versions["chunker_version"] == f"haystack-md-header-{BIG}"  # from the object's versions()
    assert versions["index_version"] == runs[f"http-{BIG}"]["versions"]["index_version"]


def test_hits_are_mapped_from_haystack_documents(runs):
    """The mapping turned Haystack's fields into ours: relative paths, full heading paths, bm25."""
    hits = [h for q in runs[f"http-{BIG}"]["per_query"] for h in q["hits"]]
    assert len(hits) > 500
    assert all(not h["doc_path"].startswith("/") and h["doc_path"].endswith(".md") for h in hits)
    assert all(h["heading_path"] and h["score_kind"] == "bm25" for h in hits)
    assert all(h["line_start"] is None and h["line_end"] is None for h in hits)
    top = per_query(runs[f"http-{BIG}"])["hs-017"]["hits"]  # a question about one ARCHITECTURE section
    assert any(
        h["doc_path"] == "docs/ARCHITECTURE.md"
        and h["heading_path"][:2] == ["Architecture", "핵심 구현 불변식 (durable invariants)"]
        for h in top
    )


def test_match_auto_resolves_to_anchor(runs):
    """The golden set has anchors and spans; the hits have no lines, so auto must pick anchor — for
    every answerable query, and say so in the run output."""
    for run_id in (f"http-{BIG}", f"jsonl-{BIG}", f"http-{SMALL}"):
        doc = runs[run_id]
        criteria = {
            q["query_id"]: q["match_criterion"]
            for q in doc["per_query"]
            if q["scores"].get("mrr") is not None
        }
        assert len(criteria) == 52
        assert set(criteria.values()) == {"anchor"}, (run_id, criteria)
        assert "anchor" in doc["_proc"].stdout, doc["_proc"].stdout[-2000:]


def _trec(path: Path) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        qid, _q0, docno, _rank, score, _tag = line.split()
        out.setdefault(qid, {})[docno] = float(score)
    return out


def _qrels(path: Path) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(set(lines)), "duplicate qrels lines"
    for line in lines:
        qid, _iter, docno, rel = line.split()
        out.setdefault(qid, {})[docno] = int(rel)
    return out


@pytest.mark.parametrize("run_id", [f"http-{BIG}", f"http-{SMALL}"])
def test_trec_export_rescored_by_pytrec_eval_equals_stored_scores(runs, env, work, run_id):
    pytrec_eval = pytest.importorskip("pytrec_eval")
    stored = per_query(runs[run_id])
    out = work / f"{run_id}.trec"
    proc = cli(env, "export", run_id, "--format", "trec", "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_file, qrels = _trec(out), _qrels(out.with_name(out.name + ".qrels"))
    # The run cut at the MRR cutoff (10): recip_rank must not see deeper hits.
    cut = {q: dict(sorted(docs.items(), key=lambda kv: -kv[1])[:10]) for q, docs in run_file.items()}
    cutoffs = ",".join(map(str, KS))
    measures = {"recip_rank", *(f"{m}.{cutoffs}" for m in ("success", "P", "ndcg_cut", "recall"))}
    results = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(cut)
    pairs = {"mrr": "recip_rank"}
    for k in KS:
        pairs |= {f"hit@{k}": f"success_{k}", f"precision@{k}": f"P_{k}", f"ndcg@{k}": f"ndcg_cut_{k}"}
        pairs |= {f"recall@{k}": f"recall_{k}"}
    checked = 0
    for qid, q in stored.items():
        if q["scores"].get("mrr") is None:  # unanswerable: no qrels, no retrieval scores
            continue
        assert qid in qrels, f"{qid} has gold supports but no qrels"
        got = results.get(qid, {})  # a query with no hits at all is absent from pytrec_eval's results
        for ours, theirs in pairs.items():
            assert q["scores"][ours] == pytest.approx(got.get(theirs, 0.0), abs=TOL), (qid, ours, theirs)
        checked += 1
    assert checked == 52


def _rank(scores: dict) -> int | None:
    """First relevant rank implied by a run's own stored mrr (cutoff 10): 1/mrr, None for 0."""
    mrr = scores.get("mrr")
    return None if not mrr else round(1 / mrr)


def test_two_chunk_sizes_compare_under_anchor_matching(runs, env):
    a, b = per_query(runs[f"http-{BIG}"]), per_query(runs[f"http-{SMALL}"])
    proc = cli(env, "compare", f"http-{BIG}", f"http-{SMALL}", "--json")
    assert proc.returncode in (0, 1), proc.stderr[-3000:]  # 1 = a blocking regression was found
    no_traceback(proc)
    doc = json.loads(proc.stdout)
    assert doc["versions_a"]["chunker_version"] == f"haystack-md-header-{BIG}"
    assert doc["versions_b"]["chunker_version"] == f"haystack-md-header-{SMALL}"
    assert doc["chunker_version_match"] == "fallback_anchor" and doc["matching_criterion"] == "anchor"

    expected = {}
    for qid in a:
        ra, rb = _rank(a[qid]["scores"]), _rank(b[qid]["scores"])
        if a[qid]["scores"].get("mrr") is None:
            expected[qid] = "not_scored"  # unanswerable, and no answers were asked for
        elif ra == rb:
            expected[qid] = "draw"
        elif ra is None or (rb is not None and rb < ra):
            expected[qid] = "win"
        elif rb is None:
            expected[qid] = "regression"
        else:
            expected[qid] = "loss"
    got = {q["query_id"]: q["verdict"] for q in doc["per_query"]}
    assert got == expected
    ranks = {q["query_id"]: (q["a_rank"], q["b_rank"]) for q in doc["per_query"]}
    assert all(ranks[qid] == (_rank(a[qid]["scores"]), _rank(b[qid]["scores"])) for qid in a)
    counts = {v: list(expected.values()).count(v) for v in set(expected.values())}
    print(f"compare {BIG} → {SMALL} words per chunk: {counts}")
    assert counts.get("win", 0) + counts.get("loss", 0) + counts.get("regression", 0) > 0  # a real change

    # The criterion did not change (both runs were scored by anchor): "a" and "b" are the runs' own.
    for row in doc["per_metric"]:
        for side, run_id in (("a", f"http-{BIG}"), ("b", f"http-{SMALL}")):
            own = runs[run_id]["metrics"].get(row["metric"])
            if isinstance(own, float) and isinstance(row[side], float) and not math.isnan(own):
                assert row[side] == pytest.approx(own, abs=TOL), (row["metric"], side)


def _closed_port() -> int:
    with socket.socket() as s:  # bound then closed: nothing listens there afterwards
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_run_against_a_down_server_exits_1(env, work, corpus):
    port = _closed_port()
    config = http_config(work, "down", f"http://127.0.0.1:{port}", corpus)
    proc = run(env, config, "haystack-down")
    no_traceback(proc)
    assert proc.returncode == 1, f"exit {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    assert "60" in proc.stdout + proc.stderr and "connection" in proc.stdout + proc.stderr
