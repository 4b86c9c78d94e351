"""The ``openai_compatible`` judge backend against real HTTP servers on 127.0.0.1, scripted per
test (``FaultServer``): the request it sends, retries and backoff, timeouts, failures that must
not be retried, malformed replies, the API key's handling, and how the model digest is pinned."""

from __future__ import annotations

import dataclasses
import logging
import socket
import time

import pytest

from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.judge.completion import Completion, Decoding, JudgeCallError, TokenLogprob
from kebab_eval_pipeline.judge.config import JudgeModelSettings
from kebab_eval_pipeline.judge.openai_client import UNPINNED_NOTE, OpenAICompatibleJudge
from tests.judge.servers import chat_body
from tests.systems.adapters.fault_server import FaultServer, Hang, Received, Reply

KEY = "sk-test-0123456789abcdef"
ENV = {"JUDGE_KEY": KEY}
MESSAGES = [{"role": "system", "content": "Grade it."}, {"role": "user", "content": "ANSWER: 42"}]
CHAT = "/v1/chat/completions"
REPLY = Completion(
    text='{"score": 4}',
    tokens=(
        TokenLogprob('{"', -0.0123456789012345, (('{"', -0.0123456789012345), ("{", -4.400000000000001))),
        TokenLogprob("score", -1e-7, (("score", -1e-7), ("sc", -17.25))),
    ),
    prompt_tokens=123,
    completion_tokens=2,
    finish_reason="length",
    model="judge-m",
)


def settings(url: str, **overrides) -> JudgeModelSettings:
    """An endpoint judge at ``url``/v1 with fast retries (tests must not sleep for long)."""
    values = {
        "backend": "openai_compatible",
        "model": "judge-m",
        "base_url": f"{url}/v1",
        "api_key_env": "JUDGE_KEY",
        "retries": 2,
        "backoff_s": 0.01,
        "max_backoff_s": 0.05,
        "timeout_s": 5,
    }
    return JudgeModelSettings.model_validate(values | overrides)


def judge(url: str, **overrides) -> OpenAICompatibleJudge:
    return OpenAICompatibleJudge(settings(url, **overrides), env=ENV)


def chat_requests(server: FaultServer) -> list[Received]:
    return [r for r in server.received if r.path == CHAT]


def assert_no_key(*texts: object) -> None:
    for text in texts:
        assert KEY not in str(text) and KEY[3:] not in str(text)


def test_retries_5xx_then_reads_the_completion() -> None:
    def respond(r: Received) -> Reply:
        return Reply(500, {"error": "busy"}) if r.attempt <= 2 else Reply(body=chat_body(REPLY, "judge-m"))

    with FaultServer(respond) as server:
        client = judge(server.url)
        got = client.complete(MESSAGES, Decoding(max_tokens=7, seed=3))
        sent = chat_requests(server)

    assert len(sent) == 3 and client.requests_sent == 3 and client.calls == 1
    assert sent[-1].json == {
        "model": "judge-m",
        "messages": MESSAGES,
        "temperature": 0,
        "seed": 3,
        "max_tokens": 7,
        "logprobs": True,
        "top_logprobs": 20,
    }
    assert sent[-1].headers["authorization"] == f"Bearer {KEY}"
    # Every field read back exactly (floats included); latency is wall time with the retries.
    assert dataclasses.replace(got, latency_ms=None, extra={}) == REPLY
    assert got.extra == {"system_fingerprint": "sha256:0"}
    assert got.latency_ms is not None and got.latency_ms > 0


def test_without_logprobs_the_keys_are_not_sent_and_tokens_are_none() -> None:
    plain = dataclasses.replace(REPLY, tokens=None, finish_reason="stop")
    with FaultServer(lambda r: Reply(body=chat_body(plain, "judge-m"))) as server:
        got = judge(server.url, api_key_env=None).complete(MESSAGES, Decoding(logprobs=False))
        sent = chat_requests(server)[0]
    assert "logprobs" not in sent.json and "top_logprobs" not in sent.json
    assert "authorization" not in sent.headers  # no key configured: none sent
    assert got.tokens is None and got.text == plain.text and got.finish_reason == "stop"


def test_429_waits_for_retry_after_capped_by_max_backoff() -> None:
    arrived: list[float] = []

    def respond(r: Received) -> Reply:
        arrived.append(time.monotonic())
        if r.attempt == 1:
            return Reply(429, {"error": "slow down"}, headers={"Retry-After": "0.25"})
        if r.attempt == 2:  # asks for ten minutes: capped at max_backoff_s
            return Reply(429, {"error": "slow down"}, headers={"Retry-After": "600"})
        return Reply(body=chat_body(REPLY, "judge-m"))

    with FaultServer(respond) as server:
        client = judge(server.url, backoff_s=0.001, max_backoff_s=0.3)
        got = client.complete(MESSAGES, Decoding())
    assert client.requests_sent == 3 and got.text == REPLY.text
    first_wait, second_wait = arrived[1] - arrived[0], arrived[2] - arrived[1]
    assert first_wait >= 0.25  # Retry-After honoured over the 1 ms backoff
    assert 0.3 <= second_wait < 30  # capped: far below the 600 s asked for
    assert got.latency_ms >= (arrived[2] - arrived[0]) * 1000


def test_a_server_slower_than_timeout_fails_after_the_retries() -> None:
    with FaultServer(lambda r: Hang(30)) as server:
        client = judge(server.url, timeout_s=0.2, retries=1)
        with pytest.raises(JudgeCallError) as caught:
            client.complete(MESSAGES, Decoding())
        assert len(chat_requests(server)) == 2
    message = str(caught.value)
    assert "timeout" in message and "0.2 s" in message and "after 2 attempts" in message
    assert caught.value.attempts == 2 and caught.value.status is None
    assert client.requests_sent == 2


def test_401_fails_at_once_and_the_echoed_key_is_scrubbed(caplog: pytest.LogCaptureFixture) -> None:
    def respond(r: Received) -> Reply:
        return Reply(401, {"error": {"message": f"invalid key {r.headers['authorization']}"}})

    with FaultServer(respond) as server, caplog.at_level(logging.DEBUG):  # httpx/httpcore log too
        client = judge(server.url, retries=5)
        with pytest.raises(JudgeCallError) as caught:
            client.complete(MESSAGES, Decoding())
        assert len(chat_requests(server)) == 1
    assert caplog.records and KEY not in caplog.text
    message = str(caught.value)
    assert "HTTP 401" in message and "invalid key" in message and "after 1 attempt)" in message
    assert caught.value.status == 401 and client.requests_sent == 1
    assert_no_key(message, repr(caught.value), repr(client), client.describe())


def test_connection_refused_is_retried_then_named() -> None:
    with socket.socket() as sock:  # a port nobody listens on once closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = judge(f"http://127.0.0.1:{port}", retries=1)
    with pytest.raises(JudgeCallError, match=r"connection failed: ConnectError.*after 2 attempts"):
        client.complete(MESSAGES, Decoding())
    assert client.requests_sent == 2


@pytest.mark.parametrize(
    ("body", "named"),
    [
        (b"<html>oops</html>", "not JSON"),
        ({"choices": []}, "no choices[0]"),
        ({"choices": [{"message": {"role": "assistant"}}]}, "choices[0].message.content"),
        ({"choices": [{"message": {"content": "x"}, "logprobs": {"content": [{"token": "x"}]}}]}, "logprobs"),
        (
            {"choices": [{"message": {"content": "x"}}], "usage": {"prompt_tokens": "many"}},
            "usage.prompt_tokens",
        ),
    ],
)
def test_a_malformed_reply_is_an_error_naming_what_is_missing(body, named: str) -> None:
    with FaultServer(lambda r: Reply(body=body)) as server:
        client = judge(server.url)
        with pytest.raises(JudgeCallError, match="malformed chat completion") as caught:
            client.complete(MESSAGES, Decoding())
    assert named in str(caught.value)
    assert client.requests_sent == 1  # a malformed reply would be malformed again: not retried


def test_a_reply_without_usage_or_logprobs_reads_as_none() -> None:
    body = {"model": "judge-m", "choices": [{"message": {"content": "5"}, "logprobs": None}]}
    with FaultServer(lambda r: Reply(body=body)) as server:
        got = judge(server.url).complete(MESSAGES, Decoding())
    assert (got.text, got.tokens, got.prompt_tokens, got.completion_tokens) == ("5", None, None, None)
    assert got.finish_reason is None and got.extra == {}


@pytest.mark.parametrize("env", [{}, {"JUDGE_KEY": ""}])
def test_a_missing_key_variable_is_an_input_error_naming_it(env: dict) -> None:
    with pytest.raises(InputError) as caught:
        OpenAICompatibleJudge(settings("http://127.0.0.1:9"), env=env)
    assert "JUDGE_KEY" in str(caught.value)
    assert caught.value.offenders[0].field == "judge.api_key_env"


def _models(entries: list[dict]) -> Reply:
    return Reply(body={"object": "list", "data": entries})


def test_a_configured_digest_wins_without_asking_the_endpoint() -> None:
    with FaultServer(lambda r: _models([{"id": "judge-m", "digest": "sha256:reported"}])) as server:
        client = judge(server.url, model_digest="sha256:configured")
        assert client.digest() == "sha256:configured"
        assert server.received == []
        described = client.describe()
    assert described == {
        "backend": "openai_compatible",
        "model": "judge-m",
        "base_url": f"{server.url}/v1",
        "digest": "sha256:configured",
        "pinned": True,
        "note": None,
    }


def test_the_reported_digest_of_the_served_model_pins_it_once() -> None:
    entries = [{"id": "other", "digest": "sha256:other"}, {"id": "judge-m", "digest": "sha256:abc"}]
    with FaultServer(lambda r: _models(entries)) as server:
        client = judge(server.url)
        assert client.digest() == client.digest() == "sha256:abc"
        assert [r.path for r in server.received] == ["/v1/models"]  # computed once
        assert server.received[0].headers["authorization"] == f"Bearer {KEY}"
    assert client.describe()["pinned"] is True and client.describe()["note"] is None


@pytest.mark.parametrize(
    "reply",
    [
        _models([{"id": "judge-m", "object": "model"}]),  # OpenAI: no digest reported
        _models([{"id": "another-model", "digest": "sha256:abc"}]),
        Reply(500, {"error": "down"}),
        Reply(body=b"not json"),
    ],
)
def test_no_reported_digest_means_unpinned(reply: Reply) -> None:
    with FaultServer(lambda r: reply) as server:
        client = judge(server.url)
        described = client.describe()
    assert client.digest() == "unpinned:judge-m"
    assert described["pinned"] is False and described["note"].startswith(UNPINNED_NOTE)


def test_the_key_never_appears_in_repr_describe_or_errors_with_credentials_in_the_url() -> None:
    with FaultServer(lambda r: Reply(400, {"echo": r.headers.get("authorization")})) as server:
        url = server.url.replace("http://", "http://user:hunter2hunter2@")
        client = judge(url, retries=0)
        with pytest.raises(JudgeCallError) as caught:
            client.complete(MESSAGES, Decoding())
        described = client.describe()
    for text in (str(caught.value), repr(client), described):
        assert_no_key(text)
        assert "hunter2" not in str(text)
    assert described["base_url"] == f"{server.url}/v1"
