"""The judge's third criterion, ``judge_relevance``: is one retrieved passage relevant to a question?

Asked of the suspect-gold queue of a comparison (hits the golden set never judged, ranked above the
candidate's first relevant hit in a loss or regression): the judge's 0–5 relevance score, its verdict
(relevant when the score is at least :data:`PASS_SCORE`) and its one-sentence reasoning, so a
reviewer sees which suspects are likely gaps in the gold.

Pinned and cached like groundedness and correctness: the run's main judge (model, digest,
decoding), the cache keyed by (judge digest, prompt version, input hash). The wording of this
prompt is versioned on its own: changing it means a new version, and the groundedness/correctness
prompt versions (and their cached judgements) are untouched. It comes in the main prompt's reply
style (:func:`relevance_prompt_version`): ``relevance-v2`` asks for the score alone, one token,
beside the score-only ``v2``; ``relevance-v1`` for a JSON object with a reasoning, beside ``v1``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import pandas as pd

from kebab_eval_pipeline.judge.backends import build_backend
from kebab_eval_pipeline.judge.cache import JudgeCache
from kebab_eval_pipeline.judge.completion import Completion, JudgeBackend, JudgeCallError, Message
from kebab_eval_pipeline.judge.config import JudgeModelSettings, JudgeSettings
from kebab_eval_pipeline.judge.parse import parse_judgement
from kebab_eval_pipeline.judge.prompts import input_hash, reply_decoding, score_only

CRITERION = "relevance"
#: The versions of the relevance prompt's wording (bump them with any change of the text below):
#: with a JSON reply and reasoning, and with the score alone.
RELEVANCE_PROMPT_VERSION = "relevance-v1"
RELEVANCE_SCORE_ONLY_VERSION = "relevance-v2"
PASS_SCORE = 3.0  # as judge_groundedness: at or above it counts as relevant

_TASK = (
    "You grade whether a PASSAGE retrieved by a search system is relevant to a QUESTION: does it "
    "contain information that answers the question, or a necessary part of the answer? Judge the "
    "passage on its own, not your own knowledge. Scale: 5 = it answers the question directly; "
    "4 = it holds most of the answer; 3 = it holds a necessary part of the answer; 2 = on the topic "
    "but does not help answer; 1 = barely related; 0 = unrelated. "
)
_REPLY = {
    RELEVANCE_PROMPT_VERSION: 'Reply with one JSON object and nothing else: {"score": <integer 0-5>, '
    '"reasoning": "<one sentence>"}',
    RELEVANCE_SCORE_ONLY_VERSION: "Reply with the score alone: one digit from 0 to 5, nothing else.",
}
_EXAMPLE = {
    "question": "How hot should the water be for green tea?",
    "doc_path": "tea/green.md",
    "heading": "Brewing",
    "text": "Brew green tea at 80 degrees for two minutes.",
}
_EXAMPLE_REPLY = {
    RELEVANCE_PROMPT_VERSION: '{"score": 5, "reasoning": "The passage gives the water temperature the '
    'question asks for."}',
    RELEVANCE_SCORE_ONLY_VERSION: "5",
}


def relevance_prompt_version(main_version: str) -> str:
    """The relevance prompt beside the main prompt ``main_version``: score-only beside a
    score-only main prompt (``v2``), else the JSON one."""
    return RELEVANCE_SCORE_ONLY_VERSION if score_only(main_version) else RELEVANCE_PROMPT_VERSION


@dataclass(frozen=True)
class RelevanceInput:
    """What the judge sees for one suspect hit (stored with its judgement)."""

    question: str
    doc_path: str
    heading: str
    text: str

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> RelevanceInput:
        doc = json.loads(text)
        return cls(doc["question"], doc["doc_path"], doc["heading"], doc["text"])


def _user_text(item: dict[str, str]) -> str:
    where = item["doc_path"] + (f" — {item['heading']}" if item["heading"] else "")
    return (
        f"QUESTION: {item['question']}\n\nPASSAGE ({where}):\n{item['text'] or '(empty)'}\n\n"
        "Grade the PASSAGE."
    )


def render_relevance(item: RelevanceInput, version: str = RELEVANCE_PROMPT_VERSION) -> list[Message]:
    """The chat messages of one relevance judgement with prompt ``version`` (relevance-v1 or -v2):
    instructions with the scale, one worked example, then the hit. KeyError for another version."""
    return [
        {"role": "system", "content": _TASK + _REPLY[version]},
        {"role": "user", "content": _user_text(_EXAMPLE)},
        {"role": "assistant", "content": _EXAMPLE_REPLY[version]},
        {"role": "user", "content": _user_text(asdict(item))},
    ]


def relevance_inputs(queue: pd.DataFrame, context_chars: int) -> list[RelevanceInput]:
    """One judge input per row of the suspect-gold ``queue`` (question, the hit's document and
    heading, its snippet cut to ``context_chars``), in row order."""
    out = []
    for row in queue.itertuples(index=False):
        heading = row.heading_path
        heading = " > ".join(map(str, heading)) if heading is not None and len(heading) else ""
        where = next(
            (str(v) for v in (row.doc_path, row.doc_id, row.chunk_id) if isinstance(v, str) and v), ""
        )
        text = str(row.snippet) if isinstance(row.snippet, str) else ""
        question = str(row.question) if isinstance(row.question, str) else ""
        out.append(RelevanceInput(question, where, heading, text[:context_chars]))
    return out


def judge_relevance(
    settings: JudgeSettings,
    queue: pd.DataFrame,
    cache: JudgeCache | None,
    make_backend: Callable[[JudgeModelSettings], JudgeBackend] = build_backend,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The suspect-gold ``queue`` with ``judge_relevant``, ``judge_score`` and ``judge_reasoning``
    filled by the run's main judge (one call per hit; an unchanged input comes from the cache), and
    what to record: the judge described (model, digest, prompt version, decoding), model calls,
    cache hits, and failed or unparseable replies (their rows stay null: never guessed)."""
    model = settings.judge_model()
    backend = make_backend(model)
    version = relevance_prompt_version(model.prompt_version)
    decoding = reply_decoding(version, model.decoding())
    digest = backend.digest()
    calls = hits = failures = 0
    scores: list[float | None] = []
    reasons: list[str | None] = []
    try:
        for item in relevance_inputs(queue, settings.context_chars):
            messages = render_relevance(item, version)
            key = input_hash(messages, decoding)
            completion = cache.get(digest, version, key) if cache is not None else None
            if completion is None:
                calls += 1
                started = time.perf_counter()
                try:
                    completion = backend.complete(messages, decoding)
                except JudgeCallError:
                    completion = Completion(text="", latency_ms=(time.perf_counter() - started) * 1000)
                    failures += 1
                    scores.append(None)
                    reasons.append(None)
                    continue
                if cache is not None:
                    cache.put(digest, version, key, completion)
            else:
                hits += 1
            parsed = parse_judgement(completion, score_only=score_only(version))
            failures += parsed.score is None
            scores.append(parsed.score)
            reasons.append(parsed.reasoning)
    finally:
        close = getattr(backend, "close", None)
        if close is not None:  # an endpoint client's connection pool
            close()
    score = pd.array(scores, dtype="Float64")
    out = queue.assign(
        judge_score=score,
        judge_relevant=pd.array([None if s is None else s >= PASS_SCORE for s in scores], dtype="boolean"),
        judge_reasoning=pd.array(reasons, dtype="string"),
    )
    info = {
        "criterion": f"judge_{CRITERION}",
        "judge": {
            **backend.describe(),
            "prompt_version": version,
            "decoding": decoding.as_dict(),
        },
        "pass_score": PASS_SCORE,
        "judged_hits": len(queue),
        "model_calls": calls,
        "cache_hits": hits,
        "no_verdict": int(failures),
    }
    return out, info
