"""A judge reply → a score 0–5 (SPEC §6): from the reply's JSON, else from the log probabilities of
the digit tokens at the score position, else recorded as unparseable — never guessed from prose.

Rules, in order:

1. **JSON.** The reply text is scanned for JSON objects: ``json.JSONDecoder().raw_decode`` is tried
   at each ``{`` in turn, so leading prose and a ```` ```json ```` fence are tolerated. Objects
   without a ``"score"`` key are skipped whole (their inner objects are not searched); the first
   object *with* one decides. It is accepted when the score is a number — an ``int`` or ``float``,
   not a ``bool`` and not a digit string such as ``"4"`` (the prompt asks for a number; a string is
   the judge not following the format) — finite, with 0 ≤ score ≤ 5. Integral floats (``4.0``) and
   non-integers (``4.5``) are taken as given. Then ``method="json"``, ``score=float(value)``, the
   string items of ``supported_claims``/``unsupported_claims`` when those are lists (other items
   skipped) and ``reasoning`` when it is a string.
2. **Log probabilities.** When the JSON is rejected and the backend returned per-token log
   probabilities: the score token is the first generated token whose own text, stripped, starts
   with a digit and whose preceding text (all earlier tokens joined) ends with ``"score"``,
   optional whitespace, ``:``, optional whitespace. Among that token's ``top`` alternatives, those
   whose text stripped is exactly one of ``0``…``5`` give p_d = exp(logprob); the score is
   Σ d·p_d / Σ p_d (``method="logprobs"``) and ``digit_mass`` = Σ p_d says how much of the
   probability the digits held. ``problem`` says why the JSON was rejected.
3. Otherwise ``method="unparseable"``, ``score=None`` and ``problem`` says why.

A **score-only** reply (``score_only=True``: prompt versions that ask for the score alone, one
token) has no JSON to read. Its score token is the reply's first generated token: when that
token's ``top`` alternatives hold digits 0–5, the score is their probability-weighted mean as in
rule 2 (``method="logprobs"``, with ``digit_mass``) — whichever token the judge happened to pick,
since the digits' share of the probability is what the prompt asked for. Without log
probabilities, a reply whose text stripped is one digit 0–5 is that score (``method="digit"``);
anything else is ``unparseable``.

When the JSON is accepted and log probabilities exist, ``expected_score``/``digit_mass`` are still
computed from the score token, for transparency (a confident judge has ``digit_mass`` near 1 and
``expected_score`` near its stated score); the score stays the JSON value.

:func:`parse_judgement` never raises, whatever the reply contains.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal, get_args

from kebab_eval_pipeline.judge.completion import Completion, TokenLogprob

JudgementMethod = Literal["json", "logprobs", "digit", "unparseable"]
JUDGEMENT_METHODS: tuple[JudgementMethod, ...] = get_args(JudgementMethod)
SCORE_MIN, SCORE_MAX = 0, 5
_DIGITS = {str(d): d for d in range(SCORE_MIN, SCORE_MAX + 1)}
_SCORE_KEY_BEFORE = re.compile(r'"score"\s*:\s*\Z')
_STARTS_WITH_DIGIT = re.compile(r"[0-9]")
_DECODER = json.JSONDecoder()


@dataclass(frozen=True)
class Judgement:
    """One parsed judge reply. ``score`` is None exactly when ``method`` is "unparseable";
    ``expected_score``/``digit_mass`` come from the digit log probabilities at the score token
    (None without log probabilities or without a score token); ``problem`` says why the JSON was
    rejected (None when it was accepted)."""

    score: float | None
    method: JudgementMethod
    expected_score: float | None = None
    digit_mass: float | None = None
    supported_claims: tuple[str, ...] = ()
    unsupported_claims: tuple[str, ...] = ()
    reasoning: str | None = None
    problem: str | None = None


def expected_digit_score(alternatives: Iterable[tuple[str, float]]) -> tuple[float, float] | None:
    """(expected score, digit mass) over the alternatives whose text stripped is a digit 0–5, or
    None when there are none or their probability is 0.

    A digit seen twice (``"4"`` and ``" 4"`` are distinct tokens) counts with both probabilities.
    A NaN log probability is skipped; one above 0 (float noise) counts as probability 1. The result
    is clamped to the digits present, which float rounding could otherwise overshoot by an ulp.
    """
    weighted: list[tuple[int, float]] = []
    for text, logprob in alternatives:
        digit = _DIGITS.get(text.strip())
        if digit is None or math.isnan(logprob):
            continue
        p = math.exp(min(logprob, 0.0))
        if p > 0.0:
            weighted.append((digit, p))
    if not weighted:
        return None
    mass = math.fsum(p for _, p in weighted)
    expected = math.fsum(d * p for d, p in weighted) / mass
    lowest, highest = min(d for d, _ in weighted), max(d for d, _ in weighted)
    return min(max(expected, float(lowest)), float(highest)), mass


def score_token(tokens: Iterable[TokenLogprob]) -> TokenLogprob | None:
    """The generated token holding the score: the first whose text stripped starts with a digit
    and whose preceding text ends with ``"score"`` + optional whitespace + ``:`` + optional
    whitespace. None when there is no such token."""
    before: list[str] = []
    for token in tokens:
        # The prefix is joined only at digit tokens: few, so a long reply stays linear in practice.
        if _STARTS_WITH_DIGIT.match(token.token.strip()) and _SCORE_KEY_BEFORE.search("".join(before)):
            return token
        before.append(token.token)
    return None


def _show(value: Any) -> str:
    """The value as the judge wrote it (JSON), shortened for a problem message."""
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 40 else text[:37] + "..."


def _score_problem(value: Any) -> str | None:
    """Why a JSON score value is not acceptable, or None when it is."""
    # Only numbers: a digit string ("4") or a boolean is the judge not following the format.
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"score {_show(value)} is not a number"
    if isinstance(value, float) and not math.isfinite(value):
        return f"score {_show(value)} is not a finite number"
    # Compared as given, not converted first: float(10**400) would overflow.
    if not SCORE_MIN <= value <= SCORE_MAX:
        return f"score {_show(value)} is outside {SCORE_MIN}–{SCORE_MAX}"
    return None


def _json_object_with_score(text: str) -> tuple[dict[str, Any] | None, bool]:
    """The first JSON object in ``text`` with a "score" key, and whether any object was found."""
    found_any = False
    start = text.find("{")
    while start != -1:
        try:
            obj, end = _DECODER.raw_decode(text, start)
        except (ValueError, RecursionError):  # not JSON here, or nested deeper than Python recurses
            start = text.find("{", start + 1)
            continue
        found_any = True
        if "score" in obj:
            return obj, True
        start = text.find("{", end)  # skip the object whole: its inner objects are not the judgement
    return None, found_any


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(item for item in value if isinstance(item, str)) if isinstance(value, list) else ()


def _no_json_reason(completion: Completion, found_any: bool) -> str:
    if found_any:
        return "score missing"
    if completion.finish_reason == "length":
        return "reply is not complete JSON (cut at max_tokens)"
    return "no JSON object"


def _why_no_digits(
    completion: Completion, position: TokenLogprob | None, no_logprobs: str, no_position: str, where: str
) -> str:
    """Why no digit score came from the log probabilities: none were given, the token to read
    was not found, or its alternatives hold no digit (``where`` names that token)."""
    if completion.tokens is None:
        return no_logprobs
    if position is None:
        return no_position
    return f"no digit {SCORE_MIN}–{SCORE_MAX} among the alternatives of {where}"


def _parse_score_only(completion: Completion, text: str) -> Judgement:
    """A score-only reply (see the module docstring): the first token's digit probabilities, else
    the bare digit of the text, else unparseable."""
    first = completion.tokens[0] if completion.tokens else None
    digits = expected_digit_score(first.top) if first is not None else None
    if digits is not None:
        expected, mass = digits
        return Judgement(score=expected, method="logprobs", expected_score=expected, digit_mass=mass)
    stated = _DIGITS.get(text.strip())
    if stated is not None:
        return Judgement(score=float(stated), method="digit")
    why = _why_no_digits(completion, first, "no log probabilities", "no generated token", "the first token")
    return Judgement(
        score=None,
        method="unparseable",
        problem=f"reply {_show(text)} is not a score {SCORE_MIN}–{SCORE_MAX}; {why}",
    )


def parse_judgement(completion: Completion, *, score_only: bool = False) -> Judgement:
    """Parse a judge reply into a :class:`Judgement` by the rules in this module's docstring
    (``score_only``: the reply of a prompt that asks for the score alone). Never raises; an
    unusable reply comes back as ``method="unparseable"`` with a ``problem``."""
    text = completion.text if isinstance(completion.text, str) else ""
    if score_only:
        return _parse_score_only(completion, text)
    obj, found_any = _json_object_with_score(text)
    problem = _no_json_reason(completion, found_any) if obj is None else _score_problem(obj["score"])

    position = score_token(completion.tokens) if completion.tokens is not None else None
    digits = expected_digit_score(position.top) if position is not None else None
    expected, mass = digits if digits is not None else (None, None)

    if obj is not None and problem is None:
        return Judgement(
            score=float(obj["score"]),
            method="json",
            expected_score=expected,
            digit_mass=mass,
            supported_claims=_strings(obj.get("supported_claims")),
            unsupported_claims=_strings(obj.get("unsupported_claims")),
            reasoning=obj["reasoning"] if isinstance(obj.get("reasoning"), str) else None,
        )
    if expected is not None:
        return Judgement(
            score=expected, method="logprobs", expected_score=expected, digit_mass=mass, problem=problem
        )
    why = _why_no_digits(
        completion,
        position,
        "no log probabilities to fall back on",
        "no score token among the log probabilities",
        "the score token",
    )
    return Judgement(score=None, method="unparseable", problem=f"{problem}; {why}")
