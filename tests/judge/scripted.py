"""A deterministic, scripted judge for the orchestration tests — no model is loaded.

:class:`ScriptedJudge` implements the ``JudgeBackend`` protocol; its reply is a pure function of
the chat messages:

* the criterion and prompt version are recognised from the system message (each rendered
  prompt has its own, the relevance prompt too), the answer from the ``ANSWER:`` line of the last
  user message (a relevance question: the whole message);
* the base score is a hash of (criterion, answer) — the same under every prompt version, so a
  spot check with the prompt variant agrees unless ``shift`` moves that version's scores;
* the reply style is a hash of the answer too: mostly a JSON object, sometimes JSON cut at
  ``max_tokens`` (``finish_reason="length"``) whose score comes from the digit log probabilities,
  sometimes prose (unparseable). A score-only prompt (v2) gets the same three styles in one
  token: the digit with all the probability on it ("json"), the digit with 70% on it and 20% on
  the next ("truncated": read from the log probabilities), a word ("prose");
* a last user message containing one of ``fail`` raises :class:`JudgeCallError`.

:func:`scripted_endpoint` serves one over HTTP on 127.0.0.1 through the real
``serve.create_app`` (``tests/judge/servers.app_server``), recording the Authorization header of
every request, so the ``openai_compatible`` backend and the ``judge`` asset run against a real
endpoint.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import threading
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from kebab_eval_pipeline.judge.completion import Completion, Decoding, JudgeCallError, Message, TokenLogprob
from kebab_eval_pipeline.judge.prompts import CRITERIA, PROMPT_VERSIONS, JudgeInput, render, score_only
from kebab_eval_pipeline.judge.serve import create_app
from tests.judge.servers import app_server

MODEL = "scripted-judge"
DIGEST = "sha256:5c2197ed0000000000000000000000000000000000000000000000000000beef"
STYLES = ("json", "truncated", "prose")
_PROBE = JudgeInput(question="q", answer="a", citations=(), context=())


@functools.cache
def _prompt_of_system() -> dict[str, tuple[str | None, str]]:
    """System message → (criterion, prompt version), for every rendered prompt."""
    from kebab_eval_pipeline.judge.relevance import (
        RELEVANCE_PROMPT_VERSION,
        RELEVANCE_SCORE_ONLY_VERSION,
        RelevanceInput,
        render_relevance,
    )

    # a v2 system message serves both criteria (the last line names the criterion): None here
    answers = {
        render(c, v, _PROBE)[0]["content"]: (None if score_only(v) else c, v)  # type: ignore[arg-type]
        for c in CRITERIA
        for v in PROMPT_VERSIONS
    }
    relevance = {
        render_relevance(RelevanceInput("q", "p", "h", "t"), v)[0]["content"]: ("relevance", v)
        for v in (RELEVANCE_PROMPT_VERSION, RELEVANCE_SCORE_ONLY_VERSION)
    }
    return {**answers, **relevance}


def _answer_line(user_text: str) -> str:
    return next((line for line in user_text.splitlines() if line.startswith("ANSWER: ")), user_text)


def base_score(criterion: str, answer_line: str) -> int:
    """The scripted score 0–5 of one criterion of one answer (before any ``shift``)."""
    return hashlib.sha256(f"{criterion}\x00{answer_line}".encode()).digest()[0] % 6


def reply_style(answer_line: str) -> str:
    """json (7 in 10 answers), truncated (2 in 10) or prose (1 in 10): the same for both criteria
    and every prompt version of one answer."""
    bucket = hashlib.sha256(f"style\x00{answer_line}".encode()).digest()[0] % 10
    return "prose" if bucket == 0 else "truncated" if bucket <= 2 else "json"


@dataclass(frozen=True)
class Script:
    """What the scripted judge will say for one request (see :meth:`ScriptedJudge.script`)."""

    criterion: str
    prompt_version: str
    score: int
    style: str


@dataclass
class ScriptedJudge:
    """A deterministic JudgeBackend (see the module docstring). ``shift`` adds points (mod 6) to the
    scores of a prompt version; ``fail`` holds substrings of the last user message that make the
    call raise ``JudgeCallError`` with ``fail_message``; ``calls`` counts completions."""

    model: str = MODEL
    digest_value: str = DIGEST
    shift: dict[str, int] = field(default_factory=dict)
    fail: Collection[str] = ()
    fail_message: str = "the scripted judge failed"
    backend: str = "scripted"
    calls: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def digest(self) -> str:
        return self.digest_value

    def describe(self) -> dict[str, Any]:
        return {"backend": self.backend, "model": self.model, "digest": self.digest_value, "pinned": True}

    def script(self, messages: list[Message]) -> Script:
        """The criterion, prompt version, score and reply style the messages call for."""
        criterion, version = _prompt_of_system()[messages[0]["content"]]
        if criterion is None:  # "... Grade the ANSWER's groundedness."
            criterion = messages[-1]["content"].rsplit("'s ", 1)[-1].removesuffix(".")
        answer = _answer_line(messages[-1]["content"])
        score = (base_score(criterion, answer) + self.shift.get(version, 0)) % 6
        return Script(criterion, version, score, reply_style(answer))

    def expected_score(self, messages: list[Message], logprobs: bool = True) -> float | None:
        """The score the parser must read from the reply to ``messages``: the JSON score, the
        digit-weighted mean of a truncated reply (with log probabilities), else None."""
        s = self.script(messages)
        if s.style == "json":
            return float(s.score)
        if s.style == "truncated":
            if logprobs:
                return logprob_score(s.score)
            return float(s.score) if score_only(s.prompt_version) else None  # the bare digit
        return None

    def complete(self, messages: list[Message], decoding: Decoding) -> Completion:
        with self._lock:
            self.calls += 1
        user = messages[-1]["content"]
        if any(marker in user for marker in self.fail):
            raise JudgeCallError(self.fail_message)
        s = self.script(messages)
        if score_only(s.prompt_version):
            return self._score_only(s, decoding, len(user))
        claims = json.dumps(["scripted claim"])
        pieces = [
            '{"',
            "score",
            '":',
            f" {s.score}",
            f', "supported_claims": {claims}',
            ', "reasoning": "ok"}',
        ]
        if s.style == "truncated":
            pieces = [*pieces[:4], ', "supported_claims": [']  # cut at max_tokens: no complete object
        elif s.style == "prose":
            pieces = ["The", " answer", " looks", " fine", "."]
        tokens = tuple(self._token(piece, s.score) for piece in pieces) if decoding.logprobs else None
        return Completion(
            text="".join(pieces),
            tokens=tokens,
            prompt_tokens=sum(len(m["content"].split()) for m in messages),
            completion_tokens=len(pieces),
            finish_reason="length" if s.style == "truncated" else "stop",
            model=self.model,
            latency_ms=float(len(user) % 97),
        )

    def _score_only(self, s: Script, decoding: Decoding, user_chars: int) -> Completion:
        """One token: the digit (all the probability on it, or 70/20 for "truncated") or a word."""
        if s.style == "json":
            token = TokenLogprob(str(s.score), 0.0, ((str(s.score), 0.0),))
        elif s.style == "truncated":
            token = self._token(str(s.score), s.score)
        else:
            token = TokenLogprob("The", math.log(0.7), (("The", math.log(0.7)), ("?", math.log(0.3))))
        return Completion(
            text=token.token,
            tokens=(token,) if decoding.logprobs else None,
            prompt_tokens=user_chars // 5,
            completion_tokens=1,
            finish_reason="length",
            model=self.model,
            latency_ms=float(user_chars % 97),
        )

    @staticmethod
    def _token(piece: str, score: int) -> TokenLogprob:
        """The piece, with 70% on it; at the score position the runner-up is the next digit (20%)."""
        if piece.strip().isdigit():
            other = str((score + 1) % 6)
            top = ((piece, math.log(0.7)), (f" {other}", math.log(0.2)), (" x", math.log(0.1)))
        else:
            top = ((piece, math.log(0.7)), ("?", math.log(0.3)))
        return TokenLogprob(piece, math.log(0.7), top)


def logprob_score(score: int) -> float:
    """What the parser makes of a truncated reply: the digit-weighted mean of the score token."""
    return (0.7 * score + 0.2 * ((score + 1) % 6)) / 0.9


class RecordAuthorization:
    """ASGI middleware keeping the Authorization header of every HTTP request in ``seen``."""

    def __init__(self, app, seen: list[str]) -> None:
        self.app = app
        self.seen = seen

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http":
            self.seen.append(dict(scope["headers"]).get(b"authorization", b"").decode("latin-1"))
        await self.app(scope, receive, send)


@dataclass
class Endpoint:
    """A scripted judge served at ``base_url`` (``http://127.0.0.1:PORT/v1``); ``authorizations``
    holds the Authorization header each request carried."""

    judge: ScriptedJudge
    base_url: str
    authorizations: list[str]


@contextmanager
def scripted_endpoint(judge: ScriptedJudge | None = None) -> Iterator[Endpoint]:
    """Serve ``judge`` (default: a fresh :class:`ScriptedJudge`) as an OpenAI-compatible endpoint on
    a free 127.0.0.1 port, for the duration of the block."""
    judge = judge or ScriptedJudge()
    seen: list[str] = []
    app = create_app(judge)
    app.add_middleware(RecordAuthorization, seen=seen)
    with app_server(app) as url:
        yield Endpoint(judge, f"{url}/v1", seen)


@functools.cache
def demo_run():
    """The demo run's settings, golden set and retrieval results (the in-process reference system,
    default settings), computed once per session: what the judge judges in the pure tests."""
    from kebab_eval_pipeline.chain import pipeline
    from kebab_eval_pipeline.chain.settings import RunSettings

    settings = RunSettings()
    golden = pipeline.load_golden_artifact(settings)
    return settings, golden, pipeline.retrieve(settings, golden)
