"""What a judge backend returns, independent of the backend: the reply text, per-token log
probabilities when the backend exposes them, token counts and latency.

Both backends produce :class:`Completion`; the OpenAI-compatible server (``judge serve``)
serialises it to the chat-completions wire format and the client reads it back, so a reply
judged through the server is parsed from exactly the same values as one judged in-process.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

#: Alternatives kept per generated token (OpenAI's maximum ``top_logprobs``).
TOP_LOGPROBS = 20


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token: its text, its log probability and the most likely alternatives at
    that step (token text, log probability), most likely first, the chosen token included."""

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()

    def to_wire(self) -> dict[str, Any]:
        """The chat-completions ``logprobs.content[]`` entry."""
        return {
            "token": self.token,
            "logprob": self.logprob,
            "bytes": list(self.token.encode("utf-8")),
            "top_logprobs": [
                {"token": t, "logprob": lp, "bytes": list(t.encode("utf-8"))} for t, lp in self.top
            ],
        }

    @classmethod
    def from_wire(cls, entry: dict[str, Any]) -> TokenLogprob:
        return cls(
            token=str(entry["token"]),
            logprob=float(entry["logprob"]),
            top=tuple((str(t["token"]), float(t["logprob"])) for t in entry.get("top_logprobs") or ()),
        )


@dataclass(frozen=True)
class Decoding:
    """How the judge decodes: always greedy (temperature 0); ``seed`` is sent where supported;
    ``logprobs`` asks for per-token log probabilities (``top_logprobs`` alternatives each)."""

    max_tokens: int = 96
    seed: int = 0
    logprobs: bool = True
    top_logprobs: int = TOP_LOGPROBS
    temperature: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "seed": self.seed,
            "logprobs": self.logprobs,
            "top_logprobs": self.top_logprobs if self.logprobs else None,
        }


@dataclass(frozen=True)
class Completion:
    """A judge reply. ``tokens`` is None when the backend gave no log probabilities;
    ``finish_reason`` is "stop" or "length" (cut at ``max_tokens``); token counts are None when
    the backend reports none; ``model`` is the model name the backend reported."""

    text: str
    tokens: tuple[TokenLogprob, ...] | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None
    model: str | None = None
    latency_ms: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # e.g. system_fingerprint

    def to_json(self) -> dict[str, Any]:
        """A JSON-safe mapping (what the cache stores); :meth:`from_json` reads it back exactly."""
        return {
            "text": self.text,
            "tokens": None if self.tokens is None else [t.to_wire() for t in self.tokens],
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "finish_reason": self.finish_reason,
            "model": self.model,
            "latency_ms": self.latency_ms,
            "extra": self.extra,
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Completion:
        tokens = doc.get("tokens")
        return cls(
            text=doc["text"],
            tokens=None if tokens is None else tuple(TokenLogprob.from_wire(t) for t in tokens),
            prompt_tokens=doc.get("prompt_tokens"),
            completion_tokens=doc.get("completion_tokens"),
            finish_reason=doc.get("finish_reason"),
            model=doc.get("model"),
            latency_ms=doc.get("latency_ms"),
            extra=dict(doc.get("extra") or {}),
        )


class JudgeCallError(RuntimeError):
    """One judge call failed (HTTP error after retries, timeout, a malformed response): the
    judgement is recorded with this error; the run goes on."""


Message = dict[str, str]  # {"role": "system" | "user" | "assistant", "content": ...}


@runtime_checkable
class JudgeBackend(Protocol):
    """A judge model. ``describe`` names it for metadata (backend, model, digest, notes);
    ``digest`` pins it (file hash for local models, configured or reported digest for endpoints);
    ``complete`` runs one greedy chat completion or raises :class:`JudgeCallError`."""

    backend: str
    model: str

    def digest(self) -> str: ...

    def describe(self) -> dict[str, Any]: ...

    def complete(self, messages: list[Message], decoding: Decoding) -> Completion: ...
