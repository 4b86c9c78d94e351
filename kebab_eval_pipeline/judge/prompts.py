"""Versioned judge prompts and the judge input they are rendered from.

A prompt version names the exact wording of both criteria; changing any wording means a new
version (the cache key and the run metadata carry it). Two families, each with an ``-alt`` wording
that says the same thing in other words and shows the passages after the answer (the default
spot-check variant):

- ``v2`` (the default) asks for the score alone, one digit: the judge generates a single token and
  the score is read from that token's log probabilities over the digits 0–5 (an expected score),
  one forward pass per judgement. Its messages are the same for both criteria but for their last
  line, which names the criterion (one system message with both scales, a worked example per
  criterion, the item, then the criterion), so a local model computes an item once for both;
- ``v1`` asks for a JSON object with the score, the supported and unsupported claims and a
  one-sentence reasoning: slower (tens of generated tokens), for when the reasons are wanted.

The judge input of one query (:class:`JudgeInput`) is what a re-judge needs — question, answer,
its citations and the top context passages — and is stored with every judgement.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Literal

from kebab_eval_pipeline.judge.completion import Decoding, Message

Criterion = Literal["groundedness", "correctness"]
CRITERIA: tuple[Criterion, ...] = ("groundedness", "correctness")

_REPLY = (
    'Reply with one JSON object and nothing else: {"score": <integer 0-5>, "supported_claims": '
    '[<claims the passages support>], "unsupported_claims": [<claims they do not>], '
    '"reasoning": "<one sentence>"}'
)
# The score-only reply: one token. The scale's digits are single tokens in every tokenizer we
# know of, so the first generated token carries the whole verdict.
_REPLY_SCORE_ONLY = "Reply with the score alone: one digit from 0 to 5, nothing else."
_SCALES: dict[Criterion, str] = {
    "groundedness": (
        "5 = every claim is supported by the passages and the major claims are cited; "
        "4 = most claims supported and cited, minor unsupported details; "
        "3 = some claims supported, some not, or citations missing; "
        "2 = major claims unsupported or uncited; 1 = the answer contradicts the passages; "
        "0 = the answer has nothing to do with the passages."
    ),
    "correctness": (
        "5 = fully correct and complete; 4 = mostly correct, minor issues; 3 = partially correct; "
        "2 = significant errors; 1 = mostly incorrect; 0 = completely wrong or no answer to the question."
    ),
}
_TASKS_V1: dict[str, dict[Criterion, str]] = {
    "v1": {
        "groundedness": "You grade whether an ANSWER is grounded in the numbered CONTEXT passages. "
        "Judge only against the passages, not your own knowledge. Scale: ",
        "correctness": "You grade whether an ANSWER correctly answers the QUESTION, using the numbered "
        "CONTEXT passages as the source of truth. Scale: ",
    },
    "v1-alt": {
        "groundedness": "Check every statement of the ANSWER against the CONTEXT passages below it. "
        "Only the passages count as evidence. Score it: ",
        "correctness": "Decide how well the ANSWER responds to the QUESTION; the CONTEXT passages are "
        "the facts to check it against. Score it: ",
    },
}
# v2 asks one system message for both criteria (both scales, in v1's words), the item first and the
# criterion last, so the two judgements of an item share everything but their final line (a local
# model computes the item once: judge/local.py); the reply is the score alone.
_TASKS_V2: dict[str, str] = {
    "v2": "You grade an ANSWER to a QUESTION against the numbered CONTEXT passages, on the one "
    "criterion the last line names. Judge only against the passages, not your own knowledge.",
    "v2-alt": "Check the ANSWER to the QUESTION against the CONTEXT passages, on the criterion named "
    "last. Only the passages count as evidence.",
}
_CRITERION_V2: dict[Criterion, str] = {
    "groundedness": "GROUNDEDNESS — are the answer's claims supported by the passages, and cited? ",
    "correctness": "CORRECTNESS — does the answer correctly answer the question? ",
}
#: The relevance prompt's versions (its wording is in judge/relevance.py): with a JSON reply and a
#: reasoning (beside v1), and with the score alone (beside v2).
RELEVANCE_PROMPT_VERSION = "relevance-v1"
RELEVANCE_SCORE_ONLY_VERSION = "relevance-v2"
#: Prompt versions whose reply is the score alone (one token, scored from its log probabilities).
SCORE_ONLY_VERSIONS: frozenset[str] = frozenset({"v2", "v2-alt", RELEVANCE_SCORE_ONLY_VERSION})
# One worked example per criterion: tiny judges follow a shown reply format far better than a described one.
_EXAMPLE_INPUT = {
    "question": "How hot should the water be for green tea?",
    "answer": "Brew green tea at 80 degrees [1] and add honey.",
    "citations": ["[1] tea/green.md"],
    "context": [
        {
            "ref": "1",
            "doc_path": "tea/green.md",
            "heading": "Brewing",
            "text": "Brew green tea at 80 degrees for two minutes.",
        }
    ],
}
_EXAMPLE_REPLY: dict[Criterion, str] = {
    "groundedness": '{"score": 4, "supported_claims": ["Brew green tea at 80 degrees"], '
    '"unsupported_claims": ["add honey"], "reasoning": "The temperature is in [1]; honey is not."}',
    "correctness": '{"score": 5, "supported_claims": ["Brew green tea at 80 degrees"], '
    '"unsupported_claims": [], "reasoning": "It gives the temperature the question asks for."}',
}
_EXAMPLE_SCORE: dict[Criterion, str] = {"groundedness": "4", "correctness": "5"}
PROMPT_VERSIONS: tuple[str, ...] = (*_TASKS_V1, *_TASKS_V2)


@dataclass(frozen=True)
class JudgeInput:
    """What the judge sees for one answered query (stored with every judgement)."""

    question: str
    answer: str
    citations: tuple[str, ...]
    context: tuple[dict[str, str], ...]  # {"ref", "doc_path", "heading", "text"}, rank order

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> JudgeInput:
        doc = json.loads(text)
        return cls(
            question=doc["question"],
            answer=doc["answer"],
            citations=tuple(doc["citations"]),
            context=tuple(dict(c) for c in doc["context"]),
        )


def scale(criterion: Criterion) -> str:
    """The 0–5 scale of ``criterion`` in the prompts' own words (shown to a person labelling too,
    so the judge and the person score against one scale)."""
    return _SCALES[criterion]


def check_prompt_version(version: str) -> str:
    if version not in PROMPT_VERSIONS:
        raise ValueError(f"unknown prompt version {version!r} (known: {', '.join(PROMPT_VERSIONS)})")
    return version


def _passages(doc: dict) -> str:
    return (
        "\n\n".join(
            f"[{c['ref']}] {c['doc_path']}"
            + (f" — {c['heading']}" if c.get("heading") else "")
            + f"\n{c['text']}"
            for c in doc["context"]
        )
        or "(no passages were retrieved)"
    )


def _user_text(criterion: Criterion, version: str, item: JudgeInput | dict) -> str:
    doc = asdict(item) if isinstance(item, JudgeInput) else item
    cites = ", ".join(doc["citations"]) or "(none)"
    shared = score_only(version)  # v2: the question for both criteria, the criterion named last
    question = f"QUESTION: {doc['question']}\n\n" if criterion == "correctness" or shared else ""
    answer = f"ANSWER: {doc['answer']}\nCITED: {cites}"
    context = f"CONTEXT:\n{_passages(doc)}"
    body = f"{answer}\n\n{context}" if version.endswith("-alt") else f"{context}\n\n{answer}"
    ask = f"Grade the ANSWER's {criterion}." if shared else "Grade the ANSWER."
    return f"{question}{body}\n\n{ask}"


def score_only(version: str) -> bool:
    """Whether ``version``'s reply is the score alone (one token; see the module docstring)."""
    return version in SCORE_ONLY_VERSIONS


def reply_decoding(version: str, decoding: Decoding) -> Decoding:
    """The decoding a judgement with prompt ``version`` uses: a score-only version generates one
    token, whatever ``max_tokens`` says (a longer reply would only cost time); others unchanged."""
    return dataclasses.replace(decoding, max_tokens=1) if score_only(version) else decoding


def render(criterion: Criterion, version: str, item: JudgeInput) -> list[Message]:
    """The chat messages of one judgement. v1: instructions with the criterion's scale, one worked
    example, then the query's input. v2: instructions with both criteria's scales, one worked
    example per criterion, then the query's input with the criterion named on its last line —
    the same messages for both criteria but for that line. Raises ValueError for an unknown
    version."""
    check_prompt_version(version)
    if not score_only(version):
        system = _TASKS_V1[version][criterion] + _SCALES[criterion] + " " + _REPLY
        return [
            {"role": "system", "content": system},
            {"role": "user", "content": _user_text(criterion, version, _EXAMPLE_INPUT)},
            {"role": "assistant", "content": _EXAMPLE_REPLY[criterion]},
            {"role": "user", "content": _user_text(criterion, version, item)},
        ]
    scales = " ".join(_CRITERION_V2[c] + _SCALES[c] for c in CRITERIA)
    messages: list[Message] = [
        {"role": "system", "content": f"{_TASKS_V2[version]} {scales} {_REPLY_SCORE_ONLY}"}
    ]
    for shown in CRITERIA:
        messages.append({"role": "user", "content": _user_text(shown, version, _EXAMPLE_INPUT)})
        messages.append({"role": "assistant", "content": _EXAMPLE_SCORE[shown]})
    messages.append({"role": "user", "content": _user_text(criterion, version, item)})
    return messages


def input_hash(messages: list[Message], decoding: Decoding) -> str:
    """sha256 of the exact judge input: the rendered messages and the decoding settings."""
    doc = {"messages": messages, "decoding": decoding.as_dict()}
    return hashlib.sha256(json.dumps(doc, ensure_ascii=False, sort_keys=True).encode()).hexdigest()
