"""A judge with its cache in front: one judgement row per question asked.

Shared by the judging of a run (:mod:`.run`) and the relevance questions (:mod:`.relevance`: a
comparison's suspect-gold queue, a run's relevance sample), so every question keys the cache,
calls the model, records a failed call and parses the reply the same way.
"""

from __future__ import annotations

import json
import time
from typing import Any

from kebab_eval_pipeline.judge.cache import JudgeCache
from kebab_eval_pipeline.judge.completion import Completion, JudgeBackend, JudgeCallError
from kebab_eval_pipeline.judge.config import JudgeModelSettings, Price
from kebab_eval_pipeline.judge.parse import parse_judgement
from kebab_eval_pipeline.judge.prompts import JudgeInput, input_hash, render, reply_decoding, score_only


def _cost(price: Price | None, completion: Completion) -> float | None:
    if price is None or completion.prompt_tokens is None or completion.completion_tokens is None:
        return None
    return (
        completion.prompt_tokens * price.input_per_mtok + completion.completion_tokens * price.output_per_mtok
    ) / 1e6


class CachedJudge:
    """One judge (backend + prompt version + decoding) with the cache in front of it: every
    judgement of a run, and every relevance question of a comparison's suspect-gold queue, is one
    :meth:`ask` — from the cache when its input was seen, else one model call (a failed call is a
    row with ``error``, never an exception). ``model_calls`` and ``cache_hits`` count them."""

    def __init__(
        self,
        settings: JudgeModelSettings,
        backend: JudgeBackend,
        cache: JudgeCache | None,
        price: Price | None,
    ) -> None:
        self.settings = settings
        self.backend = backend
        self.cache = cache
        self.price = price
        self.decoding = reply_decoding(settings.prompt_version, settings.decoding())
        self.digest = backend.digest()
        self.model_calls = 0
        self.cache_hits = 0

    def describe(self) -> dict[str, Any]:
        return {
            **self.backend.describe(),
            "prompt_version": self.settings.prompt_version,
            "decoding": self.decoding.as_dict(),
        }

    def judge(self, query_id: str, criterion: str, role: str, item: JudgeInput) -> dict[str, Any]:
        version = self.settings.prompt_version
        messages = render(criterion, version, item)  # type: ignore[arg-type]
        return self.ask(query_id, criterion, role, version, messages, item.to_json())

    def ask(
        self, query_id: str, criterion: str, role: str, version: str, messages: list, item_json: str
    ) -> dict[str, Any]:
        """One judgement row (:data:`.run.JUDGEMENT_COLUMNS`): ``messages``, rendered with prompt
        ``version``, answered from the cache or the model (a failed call is a row with ``error``
        and a null score), parsed as that version's reply, with what a re-judge needs
        (``item_json``)."""
        decoding = reply_decoding(version, self.settings.decoding())
        key = input_hash(messages, decoding)
        completion = self.cache.get(self.digest, version, key) if self.cache is not None else None
        cached = completion is not None
        error = None
        if completion is None:
            self.model_calls += 1
            started = time.perf_counter()
            try:
                completion = self.backend.complete(messages, decoding)
            except JudgeCallError as exc:
                error = str(exc)
                completion = Completion(text="", latency_ms=(time.perf_counter() - started) * 1000)
            else:
                if self.cache is not None:
                    self.cache.put(self.digest, version, key, completion)
        else:
            self.cache_hits += 1
        parsed = parse_judgement(completion, score_only=score_only(version))
        return {
            "query_id": query_id,
            "criterion": criterion,
            "role": role,
            "backend": self.backend.backend,
            "model": self.backend.model,
            "digest": self.digest,
            "prompt_version": version,
            "input_hash": key,
            "score": None if error else parsed.score,
            "method": "error" if error else parsed.method,
            "expected_score": parsed.expected_score,
            "digit_mass": parsed.digit_mass,
            "supported_claims": list(parsed.supported_claims),
            "unsupported_claims": list(parsed.unsupported_claims),
            "reasoning": parsed.reasoning,
            "problem": None if error else parsed.problem,
            "error": error,
            "cached": cached,
            "prompt_tokens": completion.prompt_tokens,
            "completion_tokens": completion.completion_tokens,
            "cost_usd": None if error else _cost(self.price, completion),
            "latency_ms": completion.latency_ms,
            "finish_reason": completion.finish_reason,
            "reply": completion.text,
            "judge_input": item_json,
            "messages": json.dumps(messages, ensure_ascii=False),
        }
