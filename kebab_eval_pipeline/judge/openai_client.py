"""The ``openai_compatible`` judge backend: one chat completion per judgement over HTTP (OpenAI,
Ollama, vLLM, llama.cpp server, or ``kebab-eval judge serve``).

* Request: ``POST {base_url}/chat/completions`` with temperature 0, the seed, ``max_tokens`` and
  — when the decoding asks for them — ``logprobs``/``top_logprobs``.
* API key: read once, at construction, from the environment variable ``api_key_env`` names and
  sent as ``Authorization: Bearer …``. It never reaches a message, ``repr``, ``describe()`` or
  log: anything echoed back by the endpoint is scrubbed.
* Retries like the http adapter: connection errors, timeouts, 429 and 5xx are retried up to
  ``retries`` times with exponential backoff (``backoff_s`` doubling, capped by ``max_backoff_s``,
  which also caps a ``Retry-After``); other 4xx and malformed replies fail at once. ``timeout_s``
  bounds each phase of one attempt (connect, each read), as httpx applies it.
* Digest: ``model_digest`` when configured; else the ``digest`` the endpoint reports for the
  model in ``GET {base_url}/models`` (Ollama-style; ``judge serve`` reports the GGUF's sha256);
  else ``unpinned:<model>`` — a run judged by an unpinned model says so in its metadata.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping
from typing import Any

import httpx

from kebab_eval_pipeline.foundation.errors import InputError, Offender
from kebab_eval_pipeline.foundation.net.checks import header_value_problem
from kebab_eval_pipeline.foundation.net.retry import backoff_delay, body_tail
from kebab_eval_pipeline.foundation.net.secrets import Secret, SecretMask, redact_url, scrub_text, url_secrets
from kebab_eval_pipeline.judge.completion import Completion, Decoding, JudgeCallError, Message, TokenLogprob
from kebab_eval_pipeline.judge.config import JudgeModelSettings

UNPINNED_PREFIX = "unpinned:"
UNPINNED_NOTE = "the endpoint reports no immutable model digest: set judge.model_digest to pin it"


class EndpointCallError(JudgeCallError):
    """A chat-completions call that failed: ``status`` is the last HTTP status (None when no
    response came), ``attempts`` how many requests were sent."""

    def __init__(self, message: str, status: int | None, attempts: int) -> None:
        super().__init__(message)
        self.status = status
        self.attempts = attempts


class OpenAICompatibleJudge:
    """A judge reached over an OpenAI-compatible chat-completions endpoint (see the module
    docstring). Thread-safe; ``calls`` counts completions requested, ``requests_sent`` HTTP
    requests (retries included)."""

    backend = "openai_compatible"

    def __init__(self, settings: JudgeModelSettings, env: Mapping[str, str] | None = None) -> None:
        if not settings.base_url or not settings.model:
            raise InputError(
                "the openai_compatible judge needs an endpoint",
                [Offender("<config>", "set judge.base_url and judge.model", field="judge.base_url")],
            )
        self.settings = settings
        self.model: str = settings.model
        self.base_url: str = settings.base_url.rstrip("/")
        self._api_key = self._read_key(settings.api_key_env, os.environ if env is None else env)
        # the key and the base URL's credentials, in any form the endpoint might echo them
        self._mask = SecretMask.of(
            [
                Secret(f"${settings.api_key_env}", self._api_key or ""),
                *url_secrets(self.base_url, "judge.base_url"),
            ]
        )
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        self._client = httpx.Client(timeout=httpx.Timeout(settings.timeout_s), headers=headers)
        self._lock = threading.Lock()  # the counters
        self._digest_lock = threading.Lock()  # held across GET /models: not the counters' lock
        self._digest: str | None = None
        self._digest_note: str | None = None
        self.calls = 0
        self.requests_sent = 0

    @staticmethod
    def _read_key(name: str | None, env: Mapping[str, str]) -> str | None:
        if name is None:
            return None
        value = env.get(name)
        if not value:
            raise InputError(
                "judge API key missing",
                [
                    Offender(
                        "<config>",
                        f"environment variable {name} is not set or empty",
                        field="judge.api_key_env",
                    )
                ],
            )
        problem = header_value_problem(value)
        if problem is not None:  # sent as "Authorization: Bearer <key>": CR/LF would inject a header
            raise InputError(
                "judge API key cannot be sent",
                [Offender("<environment>", f"${name}: {problem}", field="judge.api_key_env")],
            )
        return value

    def __repr__(self) -> str:
        return f"OpenAICompatibleJudge(model={self.model!r}, base_url={redact_url(self.base_url)!r})"

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()

    def __enter__(self) -> OpenAICompatibleJudge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def scrub(self, text: str) -> str:
        """``text`` without URL credentials and without the API key (should the endpoint echo it)."""
        return scrub_text(text, self._mask)

    # -- pinning ----------------------------------------------------------------------------

    def digest(self) -> str:
        """The model's pin: configured, else reported by ``GET /models``, else ``unpinned:<model>``.
        Computed once; a failing ``/models`` call means unpinned, never an exception."""
        with self._digest_lock:
            if self._digest is None:
                self._digest, self._digest_note = self._find_digest()
            return self._digest

    def _find_digest(self) -> tuple[str, str | None]:
        if self.settings.model_digest:
            return self.settings.model_digest, None
        unpinned = UNPINNED_PREFIX + self.model
        try:
            response = self._client.get(f"{self.base_url}/models")
            response.raise_for_status()
            entries = response.json().get("data") or []
        except (httpx.HTTPError, ValueError, AttributeError) as exc:
            reason = self.scrub(f"{type(exc).__name__}: {exc}")[:200]
            return unpinned, f"{UNPINNED_NOTE} (GET /models failed: {reason})"
        for entry in entries if isinstance(entries, list) else []:
            if isinstance(entry, dict) and entry.get("id") == self.model:
                digest = entry.get("digest")
                if isinstance(digest, str) and digest.strip():
                    return digest.strip(), None
        return unpinned, UNPINNED_NOTE

    def describe(self) -> dict[str, Any]:
        """Backend, model, redacted base URL, digest, whether it is pinned and why not."""
        digest = self.digest()
        return {
            "backend": self.backend,
            "model": self.model,
            "base_url": redact_url(self.base_url),
            "digest": digest,
            "pinned": not digest.startswith(UNPINNED_PREFIX),
            "note": self._digest_note,
        }

    # -- completions ------------------------------------------------------------------------

    def complete(self, messages: list[Message], decoding: Decoding) -> Completion:
        """One greedy chat completion; raises :class:`JudgeCallError` (an :class:`EndpointCallError`)
        after the retries are spent, or at once for a 4xx or a malformed reply."""
        with self._lock:
            self.calls += 1
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": 0,
            "seed": decoding.seed,
            "max_tokens": decoding.max_tokens,
        }
        if decoding.logprobs:
            body |= {"logprobs": True, "top_logprobs": decoding.top_logprobs}
        started = time.perf_counter()
        payload, attempts = self._post(f"{self.base_url}/chat/completions", body)
        try:
            completion = _parse(payload)
        except _Malformed as exc:
            raise self._failure(f"malformed chat completion: {exc}", 200, attempts) from None
        completion_ms = (time.perf_counter() - started) * 1000.0
        # an endpoint that echoes its key in a verdict or rationale: masked before anything keeps it
        completion = self._mask.value(completion)
        return Completion(**{**completion, "latency_ms": completion_ms})

    def _post(self, url: str, body: dict[str, Any]) -> tuple[Any, int]:
        s = self.settings
        attempt = 0
        while True:
            attempt += 1
            with self._lock:
                self.requests_sent += 1
            response = None
            try:
                response = self._client.post(url, json=body)
            except httpx.TimeoutException:
                problem = f"timeout: no response within {s.timeout_s:g} s"
            except httpx.TransportError as exc:  # refused, reset, closed before a response
                problem = f"connection failed: {type(exc).__name__}: {str(exc)[:200]}"
            except httpx.HTTPError as exc:  # e.g. an undecodable body: would fail again
                raise self._failure(f"{type(exc).__name__}: {str(exc)[:200]}", None, attempt) from None
            if response is not None:
                status = response.status_code
                if status < 300:
                    try:
                        return response.json(), attempt
                    except ValueError:
                        raise self._failure(
                            "malformed chat completion (not JSON): "
                            f"{body_tail(response, response.content, 120)!r}",
                            status,
                            attempt,
                        ) from None
                problem = f"HTTP {status}: {body_tail(response, response.content)}"
                if status != 429 and status < 500:  # would fail again: redirects, auth, bad request
                    raise self._failure(problem, status, attempt)
            if attempt > s.retries:
                raise self._failure(problem, None if response is None else response.status_code, attempt)
            time.sleep(backoff_delay(attempt, s.backoff_s, s.max_backoff_s, response))

    def _failure(self, problem: str, status: int | None, attempts: int) -> EndpointCallError:
        plural = "" if attempts == 1 else "s"
        message = (
            f"judge endpoint {self.base_url}/chat/completions: {problem} (after {attempts} attempt{plural})"
        )
        return EndpointCallError(self.scrub(message), status, attempts)


class _Malformed(ValueError):
    pass


def _parse(payload: Any) -> dict[str, Any]:
    """The :class:`Completion` fields of a chat-completions body (all but latency); raises
    :class:`_Malformed` naming what is missing."""
    try:
        choice = payload["choices"][0]
    except (TypeError, KeyError, IndexError):
        raise _Malformed("no choices[0]") from None
    message = choice.get("message") if isinstance(choice, dict) else None
    text = message.get("content") if isinstance(message, dict) else None
    if not isinstance(text, str):
        raise _Malformed("no choices[0].message.content string")
    logprobs = choice.get("logprobs")
    entries = logprobs.get("content") if isinstance(logprobs, dict) else None
    try:
        tokens = None if entries is None else tuple(TokenLogprob.from_wire(e) for e in entries)
    except (TypeError, KeyError, ValueError) as exc:
        raise _Malformed(f"choices[0].logprobs.content unreadable ({type(exc).__name__}: {exc})") from None
    usage = payload.get("usage") if isinstance(payload.get("usage"), dict) else {}
    fingerprint = payload.get("system_fingerprint")
    return {
        "text": text,
        "tokens": tokens,
        "prompt_tokens": _count(usage, "prompt_tokens"),
        "completion_tokens": _count(usage, "completion_tokens"),
        "finish_reason": choice.get("finish_reason"),
        "model": payload.get("model"),
        "extra": {"system_fingerprint": fingerprint} if fingerprint is not None else {},
    }


def _count(usage: dict[str, Any], key: str) -> int | None:
    value = usage.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Malformed(f"usage.{key} is not an integer: {value!r}")
    return value
