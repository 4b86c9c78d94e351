"""A failing http system's error names the request that failed by its URL — without the URL's
user info or query string, where credentials live (issue 23)."""

from __future__ import annotations

import pandas as pd

from kebab_eval_pipeline.metrics.health import system_health
from kebab_eval_pipeline.systems.http import HttpSystem
from kebab_eval_pipeline.systems.kinds.http import HttpSystemSettings
from kebab_eval_pipeline.systems.outcome import QueryRequest
from tests.systems.adapters.conftest import free_port
from tests.systems.adapters.fault_server import FaultServer, Reply

SECRETS = ("alice", "pw-Secret77", "url-KEY-9931")


def test_a_dead_server_is_named_in_every_row_and_in_the_health_message():
    port = free_port()  # nothing listens there
    system = HttpSystem(
        HttpSystemSettings(
            kind="http",
            search_url=f"http://alice:pw-Secret77@127.0.0.1:{port}/search?api_key=url-KEY-9931&lang=en",
            retries=0,
        )
    )
    outcomes = system.run_queries([QueryRequest("q1", "x"), QueryRequest("q2", "y")], k=3, answers=False)
    assert [o.error_class for o in outcomes] == ["connection", "connection"]
    for outcome in outcomes:
        assert outcome.error.startswith(f"POST http://127.0.0.1:{port}/search: ConnectError: "), outcome.error
    table = pd.DataFrame(
        {"query_id": [o.query_id for o in outcomes], "error_class": [o.error_class for o in outcomes]}
        | {"error": [o.error for o in outcomes]}
    )
    message = system_health(table, None).message
    assert f"first: q1: POST http://127.0.0.1:{port}/search: ConnectError" in message, message
    for secret in SECRETS:
        assert secret not in message + str(outcomes), secret


def test_the_ask_url_is_told_from_the_search_url():
    def reply(request):
        return Reply(503, {"error": "down"}) if request.path == "/ask" else Reply(body=b'{"hits": []}')

    with FaultServer(reply) as server:
        system = HttpSystem(
            HttpSystemSettings(
                kind="http",
                search_url=f"{server.url}/search",
                ask_url=f"{server.url}/ask?token=url-KEY-9931",
                retries=0,
            )
        )
        (outcome,) = system.run_queries([QueryRequest("q1", "x")], k=3, answers=True)
    assert outcome.error_class == "http_5xx"
    assert outcome.error == f'POST {server.url}/ask: HTTP 503: {{"error": "down"}}'
