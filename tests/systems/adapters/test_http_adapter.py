"""The http adapter against real servers on 127.0.0.1: `kebab-eval ref serve` as a subprocess
(acceptance: same results as the in-process reference system, through a real Dagster run),
request templates, response mapping, and secrets that never leave the process."""

from __future__ import annotations

import json
import os
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest
import yaml

from kebab_eval_pipeline.chain.artifacts import RetrievalArtifact
from kebab_eval_pipeline.chain.settings import settings_from_dict
from kebab_eval_pipeline.contract import SystemInfo
from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.reporting.export import export_json
from kebab_eval_pipeline.systems.factory import build_system
from kebab_eval_pipeline.systems.http import HttpSystem
from kebab_eval_pipeline.systems.kinds.http import HttpSystemSettings
from kebab_eval_pipeline.systems.outcome import QueryRequest
from tests.conftest import write
from tests.systems.adapters.conftest import run_config, stored_metrics, timing_free
from tests.systems.adapters.fault_server import FaultServer, Received, Reply

VERSION_KEYS = tuple(SystemInfo(kind="x").versions())


# -- `kebab-eval ref serve` as a real process (the ref_server fixture, in conftest.py) ----------


def materializations(result) -> dict[str, dg.AssetMaterialization]:
    return {
        e.asset_key.path[-1]: e.step_materialization_data.materialization
        for e in result.get_asset_materialization_events()
    }


def _hit_rows(hits: pd.DataFrame) -> list[tuple]:
    frame = hits[["query_id", "rank", "chunk_id", "score"]].sort_values(["query_id", "rank"])
    return [(str(q), int(r), str(c), float(s)) for q, r, c, s in frame.itertuples(index=False)]


def _answer_rows(outcomes: pd.DataFrame) -> dict[str, tuple]:
    return {
        str(r.query_id): (r.answered, r.answer_text, r.refused, r.grounded, r.prompt_template_version)
        for r in outcomes.itertuples(index=False)
    }


def _citation_rows(citations: pd.DataFrame) -> list[tuple]:
    frame = citations[["query_id", "position", "chunk_id", "marker"]].sort_values(["query_id", "position"])
    return [tuple(str(v) for v in row) for row in frame.itertuples(index=False)]


def test_http_run_against_ref_serve_equals_in_process_reference(
    ref_server: str, reference_results, instance, tmp_path: Path
) -> None:
    ref_metrics, ref_retrieval = reference_results
    ref = ref_retrieval.results
    cfg = write(
        tmp_path / "http.yaml",
        yaml.safe_dump(
            {
                "system": {
                    "kind": "http",
                    "search_url": f"{ref_server}/search",
                    "ask_url": f"{ref_server}/ask",
                    "version_url": f"{ref_server}/version",
                    "concurrency": 4,
                },
                "answers": True,
            }
        ),
    )
    result, store = run_config(instance, cfg, "http-1")
    assert result.success

    metrics = stored_metrics(store, "http-1")
    assert timing_free(metrics.metrics) == timing_free(ref_metrics.metrics)

    got = RetrievalArtifact.from_tables(*store.read("retrieval_results", "http-1")).results
    n = len(ref.outcomes)
    assert n > 50  # the whole demo golden set
    assert sorted(got.outcomes["query_id"]) == sorted(ref.outcomes["query_id"])
    assert got.outcomes["query_id"].is_unique
    assert got.outcomes["error"].isna().all() and got.outcomes["error_class"].isna().all()
    assert (got.outcomes["attempts"] == 2).all()  # one search + one ask, no retries
    assert _hit_rows(got.hits) == _hit_rows(ref.hits)
    # /ask is asked with "k": 10 (the run's k), so it answers from the same evidence as in-process.
    assert _answer_rows(got.outcomes) == _answer_rows(ref.outcomes)
    assert _citation_rows(got.citations) == _citation_rows(ref.citations)
    assert got.outcomes["answered"].all()

    meta = materializations(result)["retrieval_results"].metadata
    assert meta["system"].value == "http"
    for key in VERSION_KEYS:
        expected = ref.system.versions()[key]
        assert meta[key].value == (str(expected) if expected is not None else "none"), key
    assert ref.system.index_version and meta["index_version"].value == ref.system.index_version
    assert meta["queries"].value == n
    assert meta["requests_sent"].value == 2 * n
    assert meta["errors"].value == 0
    assert meta["error_classes"].value == {}
    details = meta["system_details"].value
    assert details["search_url"] == f"{ref_server}/search"
    assert details["reported_system"] == "kebab-eval-reference"


# -- request templates -------------------------------------------------------------------------


def _echo(request: Received) -> Reply:
    return Reply(body={"hits": [{"chunk_id": "c1", "score": 1.0}]})


def test_request_templates_numbers_text_and_literal_queries() -> None:
    weird = "say \"{k}\" and {query}} {{x}} \\n naïve 한국어 🍞 'quoted' {mode}"
    with FaultServer(_echo) as server:
        settings = HttpSystemSettings(
            kind="http",
            search_url=f"{server.url}/search",
            mode="hybrid",
            search_request={
                "q": "{query}",
                "k": "{k}",
                "label": "id={query_id} k={k}",
                "opts": [{"m": "{mode}", "top": "{k}"}, "{query_id}"],
                "n": 7,
                "flag": True,
                "none": None,
            },
            retries=0,
        )
        outcomes = HttpSystem(settings).run_queries(
            [QueryRequest("q{1}", weird), QueryRequest("plain", "sourdough")], k=10, answers=False
        )
        bodies = {r.json["q"]: r.json for r in server.received}
    assert [o.error for o in outcomes] == [None, None]
    assert [[h.chunk_id for h in o.hits] for o in outcomes] == [["c1"], ["c1"]]
    assert bodies[weird] == {
        "q": weird,  # the query's own braces, quotes and unicode arrive unchanged
        "k": 10,  # "{k}" alone becomes a JSON number
        "label": "id=q{1} k=10",  # embedded placeholders are text
        "opts": [{"m": "hybrid", "top": 10}, "q{1}"],
        "n": 7,
        "flag": True,
        "none": None,
    }
    assert bodies["sourdough"]["label"] == "id=plain k=10"


def test_default_bodies_send_query_and_numeric_k() -> None:
    with FaultServer(_echo) as server:
        settings = HttpSystemSettings(
            kind="http", search_url=f"{server.url}/search", ask_url=f"{server.url}/ask"
        )
        HttpSystem(settings).run_queries([QueryRequest("a", "x y")], k=3, answers=True)
        bodies = [(r.path, r.json) for r in server.received]
    assert bodies == [("/search", {"query": "x y", "k": 3}), ("/ask", {"query": "x y", "k": 3})]


# -- response mapping --------------------------------------------------------------------------


def _custom_service(request: Received) -> Reply:
    q = request.json["question"]
    if request.path == "/search":
        results = [
            {"id": f"{q}-b", "source": {"path": "docs/b.md"}, "text": "second", "relevance": 0.5},
            {"id": f"{q}-a", "source": {"path": "docs/a.md"}, "text": "first", "relevance": 0.9},
        ]
        return Reply(body={"data": {"results": results}, "took": 3})
    return Reply(
        body={
            "output": {
                "answer_text": f"answer to {q} [1]",
                "sources": [{"id": f"{q}-a", "page": 1}, {"id": f"{q}-b"}],
                "model": "custom-llm-1",
            }
        }
    )


def test_response_map_reads_a_differently_shaped_service() -> None:
    with FaultServer(_custom_service) as server:
        settings = HttpSystemSettings.model_validate(
            {
                "kind": "http",
                "search_url": f"{server.url}/search",
                "ask_url": f"{server.url}/ask",
                "search_request": {"question": "{query}", "limit": "{k}"},
                "ask_request": {"question": "{query}"},
                "response": {
                    "hits": "data.results",
                    "hit_fields": {
                        "chunk_id": "id",
                        "doc_path": "source.path",
                        "snippet": "text",
                        "score": "relevance",
                    },
                    "answer": "output",
                    "answer_fields": {"text": "answer_text", "citations": "sources"},
                    "citation_fields": {"chunk_id": "id"},
                },
            }
        )
        [outcome] = HttpSystem(settings).run_queries([QueryRequest("q1", "kimchi")], k=5, answers=True)
    assert outcome.error is None and outcome.attempts == 2
    hits = [(h.rank, h.chunk_id, h.doc_path, h.snippet, h.score, h.score_kind) for h in outcome.hits]
    assert hits == [
        (1, "kimchi-b", "docs/b.md", "second", 0.5, "other"),  # list order is rank order
        (2, "kimchi-a", "docs/a.md", "first", 0.9, "other"),
    ]
    answer = outcome.answer
    assert answer is not None
    assert answer.text == "answer to kimchi [1]"
    assert [c.chunk_id for c in answer.citations] == ["kimchi-a", "kimchi-b"]
    assert answer.model == "custom-llm-1"
    assert answer.refused is False and answer.grounded is True


def test_response_map_missing_path_is_bad_response() -> None:
    with FaultServer(lambda r: Reply(body={"data": {"items": []}})) as server:
        settings = HttpSystemSettings.model_validate(
            {"kind": "http", "search_url": f"{server.url}/s", "response": {"hits": "data.results"}}
        )
        [outcome] = HttpSystem(settings).run_queries([QueryRequest("q1", "x")], k=5, answers=False)
    assert outcome.error_class == "bad_response" and outcome.attempts == 1
    assert outcome.error == "data.results: missing from the response"


# -- secrets -----------------------------------------------------------------------------------

TOKEN = "tok-Zq8vX3pL9wKcR2"
API_KEY = "key-Hh4mN7rT2bYdQ5"
SECRETS = (TOKEN, API_KEY, f"Bearer {TOKEN}")
SECRET_QUERIES = {
    "s-ok-1": "ok",
    "s-ok-2": "ok",
    "s-500": "500",
    "s-403": "403",
    "s-badjson": "badjson",
}


def _guarded(request: Received) -> Reply:
    auth = request.headers.get("authorization", "")
    key = request.headers.get("x-api-key", "")
    if auth != f"Bearer {TOKEN}" or key != API_KEY:
        return Reply(401, {"error": "unauthorized"})
    echo = f"you sent Authorization: {auth} and X-Api-Key: {key}"
    if request.path == "/version":
        # A careless service: its version report echoes the caller's credentials.
        return Reply(body={"index_version": "svc-idx-7", "whoami": auth, "api_key": key})
    kind = SECRET_QUERIES[request.key]
    if kind == "500":
        return Reply(500, {"error": echo})
    if kind == "403":
        return Reply(403, {"error": echo})
    if kind == "badjson":
        return Reply(body=f"<html>debug: {echo}</html>".encode())
    return Reply(body={"hits": [{"chunk_id": f"{request.key}-c1", "score": 1.0}]})


def _secret_golden(path: Path) -> Path:
    queries = [
        {"id": qid, "query": f"question {qid}", "supports": [{"chunk_id": f"{qid}-c1"}]}
        for qid in SECRET_QUERIES
    ]
    return write(path, yaml.safe_dump({"schema_version": "1", "name": "secrets", "queries": queries}))


def secret_config(folder: Path, server_url: str) -> Path:
    """A run config for ``_guarded``: both credentials named by environment variable only."""
    return write(
        folder / "secret.yaml",
        yaml.safe_dump(
            {
                "golden": str(_secret_golden(folder / "golden.yaml")),
                "system": {
                    "kind": "http",
                    "search_url": f"{server_url}/search",
                    "version_url": f"{server_url}/version",
                    "search_request": {"id": "{query_id}", "query": "{query}", "k": "{k}"},
                    "headers_from_env": {
                        "Authorization": "Bearer ${KEBAB_TEST_TOKEN}",
                        "X-Api-Key": "KEBAB_TEST_KEY",
                    },
                    "retries": 1,
                    "backoff_s": 0.01,
                },
                "answers": False,
                # 3 of 5 queries fail on purpose (their error texts must not leak either): the
                # run must still pass, and the system_health message is still logged
                "system_health": {"max_error_rate": 1.0},
            }
        ),
    )


def _null(value):
    return None if value is pd.NA or value is None else value


def _all_bytes_under(root: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_secret_headers_never_reach_metadata_logs_storage_or_exports(
    instance, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setenv("KEBAB_TEST_TOKEN", TOKEN)
    monkeypatch.setenv("KEBAB_TEST_KEY", API_KEY)
    with FaultServer(_guarded) as server:
        cfg = secret_config(tmp_path / "cfg", server.url)
        result, store = run_config(instance, cfg, "secret-1")
        unauthorized = [r for r in server.received if r.headers.get("authorization") != f"Bearer {TOKEN}"]
    assert result.success
    assert unauthorized == []  # the headers were sent on every request (search and version)

    outcomes = RetrievalArtifact.from_tables(*store.read("retrieval_results", "secret-1")).results.outcomes
    by_id = {r.query_id: r for r in outcomes.itertuples(index=False)}
    assert set(by_id) == set(SECRET_QUERIES)
    assert {q: _null(by_id[q].error_class) for q in by_id} == {
        "s-ok-1": None,
        "s-ok-2": None,
        "s-500": "http_5xx",
        "s-403": "http_4xx",
        "s-badjson": "bad_json",
    }
    assert by_id["s-500"].attempts == 2 and by_id["s-403"].attempts == 1
    for qid in ("s-500", "s-403", "s-badjson"):
        error = by_id[qid].error
        assert "you sent Authorization:" in error and "***" in error, error  # echoed, then scrubbed

    # 1. every materialization's metadata, serialized whole
    mats = [e.step_materialization_data.materialization for e in result.get_asset_materialization_events()]
    assert len(mats) == 6  # the chain, with the (disabled) judge
    texts = {f"metadata {m.asset_key.to_user_string()}": dg.serialize_value(m) for m in mats}
    retrieval_meta = next(m for m in mats if m.asset_key.path[-1] == "retrieval_results").metadata
    assert retrieval_meta["index_version"].value == "svc-idx-7"  # the version endpoint was read
    assert retrieval_meta["error_classes"].value == {"http_5xx": 1, "http_4xx": 1, "bad_json": 1}
    # 2. the Dagster event log of the run (logs, observations, checks, failures)
    records = instance.all_logs(result.run_id)
    assert records
    texts["event log"] = "\n".join(dg.serialize_value(r) for r in records)
    texts["run"] = dg.serialize_value(instance.get_run_by_id(result.run_id))
    # 3. the JSON export
    exported = export_json(store, "secret-1")
    assert {q["query_id"]: q["error_class"] for q in exported["per_query"]}["s-500"] == "http_5xx"
    texts["export"] = json.dumps(exported, ensure_ascii=False, default=str)
    for where, text in texts.items():
        for secret in SECRETS:
            assert secret not in text, (where, secret)
    # 4. every byte Dagster and the artifact store wrote: instance DB, logs, Parquet, manifests
    home = Path(os.environ["DAGSTER_HOME"])
    files = _all_bytes_under(home)
    assert any(p.suffix == ".parquet" for p in files) and any(p.suffix == ".db" for p in files)
    assert Path(str(store.base)).is_relative_to(home)
    for path, data in files.items():
        for secret in SECRETS:
            assert secret.encode() not in data, (path, secret)


def test_unset_header_variable_names_header_and_variable_not_values(monkeypatch) -> None:
    monkeypatch.setenv("KEBAB_TEST_TOKEN", TOKEN)
    monkeypatch.delenv("KEBAB_TEST_UNSET", raising=False)
    monkeypatch.setenv("KEBAB_TEST_EMPTY", "")
    settings = settings_from_dict(
        {
            "system": {
                "kind": "http",
                "search_url": "http://127.0.0.1:9/search",
                "headers_from_env": {
                    "Authorization": "Bearer ${KEBAB_TEST_TOKEN}",
                    "X-Api-Key": "KEBAB_TEST_UNSET",
                    "X-Tenant": "tenant-${KEBAB_TEST_EMPTY}",
                },
            }
        }
    )
    with pytest.raises(InputError) as err:
        build_system(settings)
    message = str(err.value)
    assert "cannot start the http system" in message
    assert "X-Api-Key needs $KEBAB_TEST_UNSET" in message
    assert "X-Tenant needs $KEBAB_TEST_EMPTY" in message  # set but empty is as good as unset
    assert "Authorization" not in message and TOKEN not in message


def test_credentials_in_urls_are_redacted_from_system_details() -> None:
    with FaultServer(lambda r: Reply(404, {"error": "no such endpoint"})) as server:
        host = server.url.removeprefix("http://")
        settings = HttpSystemSettings(
            kind="http",
            search_url=f"http://alice:pw-Secret77@{host}/search?api_key=url-KEY-9931",
            ask_url=f"http://{host}/ask?api_key=url-KEY-9931&lang=en",
            version_url=f"http://{host}/version?api_key=url-KEY-9931",
        )
        system = HttpSystem(settings)
        info = system.info()
        [outcome] = system.run_queries([QueryRequest("q", "x")], k=3, answers=False)
        sent = [r.path for r in server.received]
    assert info.details["search_url"] == f"http://{host}/search"
    assert info.details["ask_url"] == f"http://{host}/ask"
    assert "404" in info.details["version_error"]
    assert sent == ["/version", "/search"]
    # The error names the request that failed, by its redacted URL (no user info, no query string).
    assert outcome.error_class == "http_4xx"
    assert outcome.error == f'POST http://{host}/search: HTTP 404: {{"error": "no such endpoint"}}'
    dumped = info.model_dump_json() + str(outcome)
    for secret in ("pw-Secret77", "url-KEY-9931", "alice"):
        assert secret not in dumped, secret
