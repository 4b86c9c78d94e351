"""The http adapter against a failing, slow and lying service (SPEC §11): a real fault-injection
server on 127.0.0.1 decides per query what goes wrong, and a real Dagster run must still give
every golden query exactly one row, classified exactly, with retries bounded as configured."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import dagster as dg
import pandas as pd
import yaml

from kebab_eval_pipeline.chain.artifacts import QueryScoresArtifact, RetrievalArtifact
from kebab_eval_pipeline.systems.http import HttpSystem
from kebab_eval_pipeline.systems.kinds.http import HttpSystemSettings
from kebab_eval_pipeline.systems.outcome import QueryRequest
from tests.conftest import write
from tests.systems.adapters.conftest import free_port, run_config, stored_metrics
from tests.systems.adapters.fault_server import Close, FaultServer, Hang, Received, Reply

RETRIES = 2
N_QUERIES = 60
REQUEST = {"id": "{query_id}", "query": "{query}", "k": "{k}"}
WARM = "warm-"  # the timeout's measuring queries: answered normally
HANG_S = 120.0  # far past any timeout below: a timeout that does not fire fails the test, not waits it out
TIMEOUT_FLOOR_S = 2.0
# Query i gets KINDS[i % 10]: 10% of the queries per fault kind, 20% answered normally.
KINDS = (
    "ok",
    "500_always",
    "500_once",
    "hang",
    "close_always",
    "close_once",
    "bad_json",
    "429_once",
    "404",
    "ok",
)
# kind → (error_class, attempts): permanent 5xx / dropped connections use every retry; transient
# faults recover on the second attempt; a timeout, bad JSON or a 404 would fail again: no retry.
EXPECTED = {
    "ok": (None, 1),
    "500_always": ("http_5xx", 1 + RETRIES),
    "500_once": (None, 2),
    "hang": ("timeout", 1),
    "close_always": ("connection", 1 + RETRIES),
    "close_once": (None, 2),
    "bad_json": ("bad_json", 1),
    "429_once": (None, 2),
    "404": ("http_4xx", 1),
}
FAULTS = {f"q{i:02d}": KINDS[i % len(KINDS)] for i in range(N_QUERIES)}
# Gold chunk of query i: "q{i}-c{1..4}"; the server returns c1..c3, so rank 4 means "not retrieved".
GOLD_RANK = {qid: i % 4 + 1 for i, qid in enumerate(FAULTS)}


def _hits(qid: str) -> list[dict]:
    return [
        {"chunk_id": f"{qid}-c{r}", "rank": r, "score": 1.0 / r, "doc_path": f"docs/{qid}.md"}
        for r in (1, 2, 3)
    ]


def faulty(request: Received) -> Reply | Hang | Close:
    if request.key.startswith(WARM):
        return Reply(body={"hits": _hits(request.key)})
    kind = FAULTS[request.key]
    first = request.attempt == 1
    if kind == "500_always" or (kind == "500_once" and first):
        return Reply(500, {"error": "internal error"})
    if kind == "hang":
        return Hang(HANG_S)  # until the server stops: only the client's timeout ends it early
    if kind == "close_always" or (kind == "close_once" and first):
        return Close()
    if kind == "bad_json":
        return Reply(200, b'{"hits": [{"chunk_id": ')
    if kind == "429_once" and first:
        return Reply(429, {"error": "slow down"}, headers={"Retry-After": "0"})
    if kind == "404":
        return Reply(404, {"error": "no such index"})
    return Reply(body={"hits": _hits(request.key)})


def _golden(path: Path) -> Path:
    queries = [
        {
            "id": qid,
            "query": f"question {i} about {kind.replace('_', ' ')}?",
            "category": "factual",
            "supports": [{"chunk_id": f"{qid}-c{GOLD_RANK[qid]}"}],
        }
        for i, (qid, kind) in enumerate(FAULTS.items())
    ]
    return write(path, yaml.safe_dump({"schema_version": "1", "name": "faults", "queries": queries}))


def timeout_for(url: str) -> float:
    """A ``timeout_s`` that a well-behaved reply of this server meets even on a loaded machine:
    ten times the wall time of a burst of 16 normal queries at the test's concurrency (at least
    2 s). The 0.5 s the test used before timed out normal replies when other work shared the
    cores, and the test then failed on the fault it did not inject."""
    settings = HttpSystemSettings(
        kind="http", search_url=f"{url}/search", search_request=REQUEST, concurrency=8, retries=0
    )
    requests = [QueryRequest(f"{WARM}{i}", "warm up") for i in range(16)]
    started = time.monotonic()
    outcomes = HttpSystem(settings).run_queries(requests, k=3, answers=False)
    assert all(o.error is None for o in outcomes), [o.error for o in outcomes]
    return round(max(TIMEOUT_FLOOR_S, 10 * (time.monotonic() - started)), 1)


def _config(path: Path, golden: Path, url: str, **system) -> Path:
    doc = {
        "golden": str(golden),
        "system": {
            "kind": "http",
            "search_url": f"{url}/search",
            "search_request": REQUEST,
            "retries": RETRIES,
            "backoff_s": 0.01,
            "max_backoff_s": 0.05,
            "timeout_s": TIMEOUT_FLOOR_S,
            "concurrency": 8,
            **system,
        },
        "k": [1, 3],
        "answers": False,
    }
    return write(path, yaml.safe_dump(doc))


def _null(value):
    return None if value is None or value is pd.NA else value


def test_every_fault_is_one_classified_row_with_bounded_retries(instance, tmp_path: Path) -> None:
    golden = _golden(tmp_path / "golden.yaml")
    with FaultServer(faulty) as server:
        timeout_s = timeout_for(server.url)
        cfg = _config(tmp_path / "faults.yaml", golden, server.url, timeout_s=timeout_s)
        started = time.monotonic()
        result, store = run_config(instance, cfg, "faults-1")
        elapsed = time.monotonic() - started
        served = {qid: server.count("/search", qid) for qid in FAULTS}
        unknown = {r.key for r in server.received if not r.key.startswith(WARM)} - set(FAULTS)

    # Every query is a row, and the chain up to run_metrics is stored: a failing system is data.
    # But half the queries failed (0.5 > the default max_error_rate 0.1), so the system_health
    # check fails the run — the only failure (the answer gates skip without answers).
    assert not result.success
    failed_checks = [e for e in result.get_asset_check_evaluations() if not e.passed]
    assert [e.check_name for e in failed_checks] == ["system_health"]
    assert failed_checks[0].description.startswith(
        "system health: 30 of 60 queries failed (error_rate 0.5 > max 0.1): "
    )
    assert unknown == set()
    assert elapsed < HANG_S / 2  # the hanging queries were cut off at the timeout, not waited out

    retrieval = RetrievalArtifact.from_tables(*store.read("retrieval_results", "faults-1"))
    outcomes = retrieval.results.outcomes
    scores = QueryScoresArtifact.from_tables(*store.read("query_scores", "faults-1")).scores
    assert sorted(outcomes["query_id"]) == sorted(FAULTS) and outcomes["query_id"].is_unique
    assert sorted(scores["query_id"]) == sorted(FAULTS) and scores["query_id"].is_unique

    got = {
        r.query_id: (_null(r.error_class), int(r.attempts), bool(r.timed_out))
        for r in outcomes.itertuples(index=False)
    }
    want = {qid: (*EXPECTED[kind], kind == "hang") for qid, kind in FAULTS.items()}
    assert got == want

    # What the server saw: never more than 1 + retries per query, and exactly what was recorded.
    assert max(served.values()) == 1 + RETRIES
    assert served == {qid: attempts for qid, (_, attempts, _) in got.items()}

    # Error messages say what happened.
    post = f"POST {server.url}/search"  # every request failure names the request
    exact = {
        "500_always": f'http_5xx: {post}: HTTP 500: {{"error": "internal error"}} (after 3 attempts)',
        "hang": f"timeout: {post}: no response within {timeout_s:g} s",
        "404": f'http_4xx: {post}: HTTP 404: {{"error": "no such index"}}',
    }
    for r in outcomes.itertuples(index=False):
        kind, error = FAULTS[r.query_id], _null(r.error)
        if kind in exact:
            assert error == exact[kind]
        elif kind == "close_always":  # the server closed without a byte of response, three times
            assert error.startswith(f"connection: {post}: RemoteProtocolError: "), error
            assert error.endswith("(after 3 attempts)"), error
        elif kind == "bad_json":  # the parser's complaint and the body's tail
            assert error.startswith(f"bad_json: {post}: ") and '{"hits": [{"chunk_id":' in error, error
        else:
            assert error is None, (r.query_id, error)

    # Rates are exactly the injected ones.
    failed = [qid for qid, kind in FAULTS.items() if EXPECTED[kind][0] is not None]
    timed_out = [qid for qid, kind in FAULTS.items() if kind == "hang"]
    metrics = stored_metrics(store, "faults-1").metrics
    assert len(failed) == 30 and len(timed_out) == 6
    assert metrics["error_rate"] == len(failed) / N_QUERIES == 0.5
    assert metrics["timeout_rate"] == len(timed_out) / N_QUERIES == 0.1

    # Hits of the queries that (eventually) succeeded are the server's, and score as expected.
    hits = retrieval.results.hits
    ok = [qid for qid in FAULTS if qid not in failed]
    assert set(hits["query_id"]) == set(ok)
    for qid in ok:
        rows = hits[hits["query_id"] == qid].sort_values("rank")
        assert list(rows["chunk_id"]) == [h["chunk_id"] for h in _hits(qid)]
    by_query = scores.set_index("query_id")
    assert {qid: (by_query.at[qid, "hit@1"], by_query.at[qid, "hit@3"]) for qid in ok} == {
        qid: (float(GOLD_RANK[qid] == 1), float(GOLD_RANK[qid] <= 3)) for qid in ok
    }
    assert all(by_query.at[qid, "hit@3"] == 0 for qid in failed)  # no hits: a miss, still a row
    hit1 = sum(GOLD_RANK[qid] == 1 for qid in ok) / N_QUERIES
    assert metrics["hit@1"] == round(hit1, 4)

    # Metadata counts match.
    mats = {
        e.asset_key.path[-1]: e.step_materialization_data.materialization
        for e in result.get_asset_materialization_events()
    }
    meta = mats["retrieval_results"].metadata
    assert meta["queries"].value == N_QUERIES
    assert meta["errors"].value == len(failed)
    assert meta["timeouts"].value == len(timed_out)
    assert (
        meta["error_classes"].value
        == dict(Counter(EXPECTED[FAULTS[qid]][0] for qid in failed))
        == {"http_5xx": 6, "timeout": 6, "connection": 6, "bad_json": 6, "http_4xx": 6}
    )
    assert meta["requests_sent"].value == sum(served.values())
    assert isinstance(meta["error_classes"], dg.JsonMetadataValue)


def test_concurrency_is_bounded() -> None:
    with FaultServer(lambda r: Reply(body={"hits": []}, delay_s=0.1)) as server:
        settings = HttpSystemSettings(
            kind="http", search_url=f"{server.url}/search", concurrency=4, retries=0, timeout_s=10
        )
        requests = [QueryRequest(f"c{i}", f"query {i}") for i in range(20)]
        outcomes = HttpSystem(settings).run_queries(requests, k=5, answers=False)
        seen = len(server.received)
        peak = server.max_in_flight
    assert [o.query_id for o in outcomes] == [r.query_id for r in requests]
    assert all(o.error is None and o.attempts == 1 for o in outcomes)
    assert seen == 20
    assert 1 < peak <= 4


def test_connection_refused_fails_every_query_after_bounded_retries(instance, tmp_path: Path) -> None:
    golden = write(
        tmp_path / "golden.yaml",
        yaml.safe_dump(
            {
                "schema_version": "1",
                "queries": [
                    {"id": f"r{i}", "query": f"refused {i}", "supports": [{"chunk_id": "x"}]}
                    for i in range(5)
                ],
            }
        ),
    )
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    cfg = _config(tmp_path / "refused.yaml", golden, url, concurrency=2)
    result, store = run_config(instance, cfg, "refused-1")
    # a dead system fails the run (system_health), after storing one error row per query
    assert not result.success
    (health,) = [e for e in result.get_asset_check_evaluations() if not e.passed]
    assert health.check_name == "system_health"
    assert "5 of 5 queries failed (error_rate 1.0 > max 0.1): connection ×5" in health.description
    outcomes = RetrievalArtifact.from_tables(*store.read("retrieval_results", "refused-1")).results.outcomes
    assert sorted(outcomes["query_id"]) == [f"r{i}" for i in range(5)]
    assert list(outcomes["error_class"]) == ["connection"] * 5
    assert list(outcomes["attempts"]) == [1 + RETRIES] * 5
    assert all(e.startswith(f"connection: POST {url}/search: ConnectError: ") for e in outcomes["error"])
    metrics = stored_metrics(store, "refused-1").metrics
    assert metrics["error_rate"] == 1.0 and metrics["timeout_rate"] == 0.0
