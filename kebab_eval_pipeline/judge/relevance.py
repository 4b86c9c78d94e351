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
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import pandas as pd

from kebab_eval_pipeline.judge.asking import CachedJudge
from kebab_eval_pipeline.judge.backends import build_backend
from kebab_eval_pipeline.judge.cache import JudgeCache
from kebab_eval_pipeline.judge.completion import JudgeBackend, Message
from kebab_eval_pipeline.judge.config import JudgeModelSettings, JudgeSettings
from kebab_eval_pipeline.judge.labels import item_hash

# The versions of this prompt's wording (bump them with any change of the text below), declared
# with every other prompt version in judge.prompts: with a JSON reply and reasoning, and with the
# score alone.
from kebab_eval_pipeline.judge.prompts import (
    RELEVANCE_PROMPT_VERSION,
    RELEVANCE_SCORE_ONLY_VERSION,
    reply_decoding,
    score_only,
)

CRITERION = "relevance"
PASS_SCORE = 3.0  # as judge_groundedness: at or above it counts as relevant

#: The relevance scale in the prompt's words (also shown to a person labelling hits by hand).
RELEVANCE_SCALE = (
    "5 = it answers the question directly; 4 = it holds most of the answer; 3 = it holds a "
    "necessary part of the answer; 2 = on the topic but does not help answer; 1 = barely related; "
    "0 = unrelated."
)
_TASK = (
    "You grade whether a PASSAGE retrieved by a search system is relevant to a QUESTION: does it "
    "contain information that answers the question, or a necessary part of the answer? Judge the "
    f"passage on its own, not your own knowledge. Scale: {RELEVANCE_SCALE} "
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


def ask_relevance(judge: CachedJudge, query_id: str, role: str, item: RelevanceInput) -> dict[str, Any]:
    """``item`` asked the relevance question by ``judge``, with the relevance prompt in its reply
    style (:func:`relevance_prompt_version`): one judgement row (criterion ``relevance``)."""
    version = relevance_prompt_version(judge.settings.prompt_version)
    return judge.ask(query_id, CRITERION, role, version, render_relevance(item, version), item.to_json())


def judge_relevance(
    settings: JudgeSettings,
    queue: pd.DataFrame,
    cache: JudgeCache | None,
    make_backend: Callable[[JudgeModelSettings], JudgeBackend] = build_backend,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The suspect-gold ``queue`` with ``judge_relevant``, ``judge_score`` and ``judge_reasoning``
    filled by the run's main judge (one call per hit; an unchanged input comes from the cache) and
    ``item_hash`` — the hash of what the judge read, which a person's relevance label is keyed on
    (:func:`~kebab_eval_pipeline.judge.labels.item_hash`) — and
    what to record: the judge described (model, digest, prompt version, decoding), model calls,
    cache hits, and failed or unparseable replies (their rows stay null: never guessed)."""
    model = settings.judge_model()
    backend = make_backend(model)
    judge = CachedJudge(model, backend, cache, settings.price(model))
    items = relevance_inputs(queue, settings.context_chars)
    try:
        rows = [
            ask_relevance(judge, str(query_id), "suspect", item)
            for query_id, item in zip(queue["query_id"], items, strict=True)
        ]
    finally:
        close = getattr(backend, "close", None)
        if close is not None:  # an endpoint client's connection pool
            close()
    scores = [row["score"] for row in rows]
    version = relevance_prompt_version(model.prompt_version)
    out = queue.assign(
        judge_score=pd.array(scores, dtype="Float64"),
        judge_relevant=pd.array([None if s is None else s >= PASS_SCORE for s in scores], dtype="boolean"),
        judge_reasoning=pd.array([row["reasoning"] for row in rows], dtype="string"),
        item_hash=pd.array([item_hash(item.to_json()) for item in items], dtype="string"),
    )
    info = {
        "criterion": f"judge_{CRITERION}",
        "judge": {
            **backend.describe(),
            "prompt_version": version,
            "decoding": reply_decoding(version, model.decoding()).as_dict(),
        },
        "pass_score": PASS_SCORE,
        "judged_hits": len(queue),
        "model_calls": judge.model_calls,
        "cache_hits": judge.cache_hits,
        "no_verdict": sum(s is None for s in scores),
    }
    return out, info
