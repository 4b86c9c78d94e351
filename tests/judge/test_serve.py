"""``judge serve``: the OpenAI-compatible server over a judge backend, on real 127.0.0.1 ports.

(a) The protocol, with a scripted in-test backend served by the real app under Uvicorn: the
client reads back exactly the Completion the backend produced; unsupported requests get
OpenAI-shaped JSON errors, never a traceback. (b) The real SmolLM2 model: served by
``kebab-eval judge serve`` in a subprocess, it gives the in-process local judge's completion.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from kebab_eval_pipeline.judge.completion import Completion, Decoding, JudgeCallError, Message, TokenLogprob
from kebab_eval_pipeline.judge.config import JudgeModelSettings
from kebab_eval_pipeline.judge.openai_client import OpenAICompatibleJudge
from kebab_eval_pipeline.judge.prompts import JudgeInput, render
from kebab_eval_pipeline.judge.serve import GREEDY_ONLY, create_app
from tests.judge.conftest import judge_or_skip
from tests.judge.servers import app_server
from tests.judge.test_judge_assets import KEY_ENV, SECRET
from tests.test_cli import cli, env, no_traceback  # noqa: F401 (env is a fixture)

MESSAGES = [{"role": "system", "content": "Grade it."}, {"role": "user", "content": "ANSWER: 42"}]


class ScriptedJudge:
    """A deterministic JudgeBackend: the reply depends only on the request; records each call.
    A user message "fail" raises JudgeCallError, "crash" a bug."""

    backend = "scripted"
    model = "scripted-judge"

    def __init__(self) -> None:
        self.calls: list[tuple[list[Message], Decoding]] = []
        self._lock = threading.Lock()

    def digest(self) -> str:
        return "sha256:5c71"

    def describe(self) -> dict[str, Any]:
        return {"backend": self.backend, "model": self.model, "digest": self.digest()}

    def complete(self, messages: list[Message], decoding: Decoding) -> Completion:
        with self._lock:
            self.calls.append((messages, decoding))
        if messages[-1]["content"] in ("fail", "crash"):
            if messages[-1]["content"] == "fail":
                raise JudgeCallError("the scripted model failed")
            raise ZeroDivisionError("division by zero")
        words = ['{"', "score", '":', " 3", "}", " é"][: decoding.max_tokens]
        tokens = []
        for i, word in enumerate(words):
            logprob = -0.1 * i - 1e-9  # floats with long expansions: the wire must keep them exact
            alternatives = [(alt, logprob - j / 3) for j, alt in enumerate([word, "x", "ü", "0"])]
            tokens.append(TokenLogprob(word, logprob, tuple(alternatives[: decoding.top_logprobs])))
        return Completion(
            text="".join(words),
            tokens=tuple(tokens) if decoding.logprobs else None,
            prompt_tokens=sum(len(m["content"]) for m in messages),
            completion_tokens=len(words),
            finish_reason="length" if decoding.max_tokens < 6 else "stop",
            model=self.model,
            extra={"backend_only": True},
        )


@pytest.fixture(scope="module")
def scripted() -> Iterator[tuple[ScriptedJudge, str]]:
    backend = ScriptedJudge()
    with app_server(create_app(backend)) as url:
        yield backend, url


def client_for(url: str, model: str = ScriptedJudge.model, **overrides) -> OpenAICompatibleJudge:
    values = {"backend": "openai_compatible", "model": model, "base_url": f"{url}/v1", "retries": 0}
    return OpenAICompatibleJudge(JudgeModelSettings.model_validate(values | overrides))


def same_reply(got: Completion, expected: Completion) -> None:
    """Equal field by field, latency and backend-private extras aside."""
    for name in ("text", "tokens", "prompt_tokens", "completion_tokens", "finish_reason", "model"):
        assert getattr(got, name) == getattr(expected, name), name


@pytest.mark.parametrize(
    "decoding",
    [Decoding(max_tokens=4, seed=7), Decoding(max_tokens=50, top_logprobs=2), Decoding(logprobs=False)],
    ids=["length", "stop-top2", "no-logprobs"],
)
def test_the_client_reads_back_exactly_the_backend_completion(scripted, decoding: Decoding) -> None:
    backend, url = scripted
    client = client_for(url)
    got = client.complete(MESSAGES, decoding)
    asked_messages, asked_decoding = backend.calls[-1]
    assert asked_messages == MESSAGES and asked_decoding == decoding  # the request arrived intact
    expected = backend.complete(MESSAGES, decoding)
    same_reply(got, expected)
    assert got.extra == {"system_fingerprint": "sha256:5c71"}
    if decoding.logprobs:  # alternatives and float logprobs survive the wire exactly
        assert got.tokens and len(got.tokens[0].top) == min(4, decoding.top_logprobs)


def test_models_reports_the_digest_the_client_pins(scripted) -> None:
    _, url = scripted
    listed = httpx.get(f"{url}/v1/models").json()
    assert listed == {
        "object": "list",
        "data": [
            {
                "id": "scripted-judge",
                "object": "model",
                "created": 0,
                "owned_by": "kebab-eval",
                "digest": "sha256:5c71",
            }
        ],
    }
    described = client_for(url).describe()
    assert described["digest"] == "sha256:5c71" and described["pinned"] is True
    assert httpx.get(f"{url}/health").json() == {"status": "ok"}


def test_the_response_is_a_chat_completion(scripted) -> None:
    _, url = scripted
    body = {"messages": MESSAGES, "max_tokens": 2, "logprobs": True, "top_logprobs": 1, "top_p": 0.5}
    reply = httpx.post(f"{url}/v1/chat/completions", json=body)
    assert reply.status_code == 200
    doc = reply.json()
    assert doc["id"].startswith("chatcmpl-") and doc["object"] == "chat.completion"
    assert doc["model"] == "scripted-judge" and doc["system_fingerprint"] == "sha256:5c71"
    choice = doc["choices"][0]
    assert choice["index"] == 0 and choice["message"] == {"role": "assistant", "content": '{"score'}
    assert choice["finish_reason"] == "length"
    assert [t["token"] for t in choice["logprobs"]["content"]] == ['{"', "score"]
    assert [len(t["top_logprobs"]) for t in choice["logprobs"]["content"]] == [1, 1]
    prompt = sum(len(m["content"]) for m in MESSAGES)
    assert doc["usage"] == {"prompt_tokens": prompt, "completion_tokens": 2, "total_tokens": prompt + 2}
    without = httpx.post(f"{url}/v1/chat/completions", json={"messages": MESSAGES}).json()
    assert without["choices"][0]["logprobs"] is None


def _error(reply: httpx.Response, status: int) -> dict:
    assert reply.status_code == status, reply.text
    assert "Traceback" not in reply.text
    error = reply.json()["error"]
    assert set(error) == {"message", "type", "code"} and error["message"]
    return error


def test_temperature_above_zero_is_refused(scripted) -> None:
    _, url = scripted
    reply = httpx.post(f"{url}/v1/chat/completions", json={"messages": MESSAGES, "temperature": 0.7})
    error = _error(reply, 400)
    assert GREEDY_ONLY in error["message"] and error["type"] == "invalid_request_error"
    ok = httpx.post(f"{url}/v1/chat/completions", json={"messages": MESSAGES, "temperature": 0})
    assert ok.status_code == 200


def test_an_unknown_model_is_404_and_the_client_says_so(scripted) -> None:
    _, url = scripted
    reply = httpx.post(f"{url}/v1/chat/completions", json={"messages": MESSAGES, "model": "gpt-9"})
    assert _error(reply, 404)["code"] == "model_not_found"
    with pytest.raises(JudgeCallError, match=r"HTTP 404.*model_not_found"):
        client_for(url, model="gpt-9").complete(MESSAGES, Decoding())
    assert client_for(url, model="gpt-9").digest() == "unpinned:gpt-9"


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (b"{not json", 400, "invalid_json"),
        ([MESSAGES], 422, "invalid_body"),
        ({}, 422, "invalid_body"),
        ({"messages": []}, 422, "invalid_body"),
        ({"messages": [{"role": "tool", "content": "x"}]}, 422, "invalid_body"),
        ({"messages": [{"role": "user", "content": ["part"]}]}, 422, "invalid_body"),
        ({"messages": MESSAGES, "max_tokens": 0}, 422, "invalid_body"),
        ({"messages": MESSAGES, "max_tokens": 4097}, 422, "invalid_body"),
        ({"messages": MESSAGES, "logprobs": True, "top_logprobs": 21}, 422, "invalid_body"),
        ({"messages": MESSAGES, "top_logprobs": 3}, 400, "invalid_value"),
        ({"messages": MESSAGES, "stream": True}, 400, "unsupported_value"),
        ({"messages": MESSAGES, "n": 2}, 400, "unsupported_value"),
    ],
)
def test_a_bad_body_is_a_json_error(scripted, body, status: int, code: str) -> None:
    _, url = scripted
    content = body if isinstance(body, bytes) else None
    reply = httpx.post(
        f"{url}/v1/chat/completions",
        content=content,
        json=None if content else body,
        headers={"Content-Type": "application/json"},
    )
    assert _error(reply, status)["code"] == code


def test_backend_failures_are_500_json_errors(scripted) -> None:
    _, url = scripted
    fail = [{"role": "user", "content": "fail"}]
    error = _error(httpx.post(f"{url}/v1/chat/completions", json={"messages": fail}), 500)
    assert error == {
        "message": "the scripted model failed",
        "type": "server_error",
        "code": "judge_call_failed",
    }
    crash = [{"role": "user", "content": "crash"}]
    error = _error(httpx.post(f"{url}/v1/chat/completions", json={"messages": crash}), 500)
    assert error["message"] == "ZeroDivisionError: division by zero" and error["code"] == "internal_error"
    with pytest.raises(JudgeCallError, match=r"HTTP 500.*the scripted model failed.*after 2 attempts"):
        client_for(url, retries=1, backoff_s=0).complete(fail, Decoding())


def test_unknown_routes_and_methods_are_json_errors(scripted) -> None:
    _, url = scripted
    assert _error(httpx.get(f"{url}/v1/embeddings"), 404)["code"] == "not_found"
    assert _error(httpx.get(f"{url}/v1/chat/completions"), 405)["code"] == "method_not_allowed"


# -- the real model ----------------------------------------------------------------------------

ITEM = JudgeInput(
    question="How long should green tea steep?",
    answer="Steep green tea for two minutes [1].",
    citations=("[1] tea/green.md",),
    context=(
        {"ref": "1", "doc_path": "tea/green.md", "heading": "Brewing", "text": "Steep for two minutes."},
    ),
)


def test_served_local_model_equals_the_in_process_local_judge(local_judge, served_judge, monkeypatch) -> None:
    messages = render("groundedness", "v1", ITEM)
    decoding = Decoding(max_tokens=24)
    url = served_judge  # `kebab-eval judge serve`, one per session (it demands the test key)
    monkeypatch.setenv(KEY_ENV, SECRET)
    client = client_for(url.removesuffix("/v1"), model=url.model, timeout_s=600, api_key_env=KEY_ENV)
    # One after the other: two torch processes on the same cores only slow each other down.
    got = client.complete(messages, decoding)  # the server has its own copy of the model
    assert client.digest() == url.digest == local_judge.digest()
    expected = local_judge.complete(messages, decoding)  # loaded once per session
    assert url.model == local_judge.model
    same_reply(got, expected)
    assert got.tokens and got.completion_tokens and got.prompt_tokens
    assert all(len(t.top) == decoding.top_logprobs for t in got.tokens)
    assert got.extra == {"system_fingerprint": local_judge.digest()}


def test_serve_refuses_a_missing_model_file_with_exit_2(env, tmp_path) -> None:  # noqa: F811
    proc = cli(env, "judge", "serve", "--port", "0", "--model", str(tmp_path / "absent.gguf"))
    assert proc.returncode == 2, proc.stderr
    assert "absent.gguf" in proc.stderr and proc.stdout == ""
    no_traceback(proc)


def test_serve_on_a_busy_port_is_exit_2(env) -> None:  # noqa: F811
    judge_or_skip()  # the port is bound after the default model is found and hashed
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        proc = cli(env, "judge", "serve", "--port", str(busy.getsockname()[1]))
    assert proc.returncode == 2 and "cannot listen on 127.0.0.1" in proc.stderr, proc.stderr
    no_traceback(proc)
