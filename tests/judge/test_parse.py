"""Judge reply parsing (SPEC §6): JSON first, else the probability-weighted digit score from the log
probabilities, else unparseable — never a number guessed from prose, never an exception."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kebab_eval_pipeline.judge.completion import Completion, TokenLogprob
from kebab_eval_pipeline.judge.parse import (
    JUDGEMENT_METHODS,
    Judgement,
    expected_digit_score,
    parse_judgement,
    score_token,
)

LN = math.log
PROPERTY = settings(max_examples=300, deadline=None)


def tok(text: str, top: dict[str, float] | None = None) -> TokenLogprob:
    """A generated token; ``top`` maps alternative text → probability (stored as its log)."""
    alternatives = tuple((t, LN(p) if p > 0 else -math.inf) for t, p in (top or {}).items())
    return TokenLogprob(token=text, logprob=alternatives[0][1] if alternatives else -0.1, top=alternatives)


def tokens_around(score_text: str, top: dict[str, float]) -> tuple[TokenLogprob, ...]:
    """A tokenised ``{"score": <score_text>, ...`` the way BPE tokenizers split it."""
    return (tok('{"'), tok("score"), tok('":'), tok(score_text, top), tok(","), tok(' "'), tok("supported"))


# --- hand-worked cases -----------------------------------------------------------------------------


def test_valid_json_with_claims_and_reasoning():
    text = (
        '{"score": 4, "supported_claims": ["80 degrees", 3, "two minutes"], '
        '"unsupported_claims": "not a list", "reasoning": "Mostly in [1]."}'
    )
    assert parse_judgement(Completion(text=text, finish_reason="stop")) == Judgement(
        score=4.0,
        method="json",
        supported_claims=("80 degrees", "two minutes"),  # the non-string item is skipped
        unsupported_claims=(),  # not a list
        reasoning="Mostly in [1].",
    )


def test_fenced_json_after_prose():
    text = 'Here is my grade.\n```json\n{"score": 2, "unsupported_claims": ["add honey"]}\n```\nDone.'
    got = parse_judgement(Completion(text=text))
    assert (got.score, got.method, got.unsupported_claims, got.reasoning) == (
        2.0,
        "json",
        ("add honey",),
        None,
    )


def test_objects_without_a_score_are_skipped_whole():
    # The nested {"score": 9} belongs to another object and is not the judgement; {"score": 1} is.
    text = 'Input was {"meta": {"score": 9}} and my reply: {"score": 1, "reasoning": "weak"}'
    got = parse_judgement(Completion(text=text))
    assert (got.score, got.method, got.reasoning) == (1.0, "json", "weak")


def test_integral_float_and_non_integer_scores_are_taken_as_given():
    assert parse_judgement(Completion(text='{"score": 4.0}')).score == 4.0
    assert parse_judgement(Completion(text='{"score": 4.5}')).score == 4.5
    assert parse_judgement(Completion(text='{"score": 0}')).score == 0.0
    assert parse_judgement(Completion(text='{"score": 5}')).score == 5.0


def test_truncated_json_falls_back_to_the_digit_distribution():
    # p(3)=0.5, p(4)=0.3, p(5)=0.1, p("x")=0.05: E = (3·0.5 + 4·0.3 + 5·0.1) / 0.9 = 3.2 / 0.9.
    top = {"3": 0.5, "4": 0.3, "5": 0.1, "x": 0.05}
    completion = Completion(
        text='{"score": 3, "supported_claims": ["Brew green',
        tokens=tokens_around("3", top),
        finish_reason="length",
    )
    got = parse_judgement(completion)
    assert got.method == "logprobs"
    assert got.score == pytest.approx(3.2 / 0.9, rel=1e-12)
    assert got.expected_score == got.score
    assert got.digit_mass == pytest.approx(0.9, rel=1e-12)
    assert got.problem == "reply is not complete JSON (cut at max_tokens)"
    assert (got.supported_claims, got.unsupported_claims, got.reasoning) == ((), (), None)


def test_leading_space_digit_tokens_and_a_digit_seen_twice():
    # " 4" and "4" are distinct tokens of the same digit: both count.
    # E = (4·0.6 + 5·0.2 + 4·0.1) / 0.9 = 3.8 / 0.9; "6" is off the scale and ignored.
    top = {" 4": 0.6, " 5": 0.2, "4": 0.1, " 6": 0.05}
    tokens = (tok("{"), tok('"score"'), tok(":"), tok(" "), tok(" 4", top), tok("}"))
    got = parse_judgement(Completion(text='{"score": 4', tokens=tokens, finish_reason="length"))
    assert got.method == "logprobs"
    assert got.score == pytest.approx(3.8 / 0.9, rel=1e-12)
    assert got.digit_mass == pytest.approx(0.9, rel=1e-12)


def test_accepted_json_still_reports_the_digit_distribution():
    # p(5)=0.7, p(4)=0.2 → E = (3.5 + 0.8) / 0.9; the score stays the stated 5.
    completion = Completion(text='{"score": 5}', tokens=tokens_around("5", {"5": 0.7, "4": 0.2}))
    got = parse_judgement(completion)
    assert (got.score, got.method, got.problem) == (5.0, "json", None)
    assert got.expected_score == pytest.approx(4.3 / 0.9, rel=1e-12)
    assert got.digit_mass == pytest.approx(0.9, rel=1e-12)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"score": 7}', "score 7 is outside 0–5"),
        ('{"score": -1}', "score -1 is outside 0–5"),
        ('{"score": 5.01}', "score 5.01 is outside 0–5"),
        ('{"score": ' + "9" * 400 + "}", "score 9999999999999999999999999999999999999... is outside 0–5"),
        ('{"score": true}', "score true is not a number"),
        ('{"score": "4"}', 'score "4" is not a number'),
        ('{"score": null}', "score null is not a number"),
        ('{"score": [4]}', "score [4] is not a number"),
        ('{"score": {"value": 4}}', 'score {"value": 4} is not a number'),
        ('{"score": NaN}', "score NaN is not a finite number"),
        ('{"score": -Infinity}', "score -Infinity is not a finite number"),
        ('{"score": 1e999}', "score Infinity is not a finite number"),
        ('{"grade": 4, "reasoning": "fine"}', "score missing"),
        ("I would give this a 4 out of 5.", "no JSON object"),
        ("", "no JSON object"),
    ],
)
def test_rejected_json_without_log_probabilities_is_unparseable(text, problem):
    got = parse_judgement(Completion(text=text, finish_reason="stop"))
    assert got == Judgement(
        score=None, method="unparseable", problem=f"{problem}; no log probabilities to fall back on"
    )


def test_the_first_scored_object_decides_even_when_a_later_one_is_valid():
    got = parse_judgement(Completion(text='{"score": 9} corrected: {"score": 4}'))
    assert (got.method, got.problem) == (
        "unparseable",
        "score 9 is outside 0–5; no log probabilities to fall back on",
    )


def test_cut_reply_without_tokens_says_so():
    got = parse_judgement(Completion(text='{"score": 4, "reas', finish_reason="length"))
    assert got.method == "unparseable"
    assert (
        got.problem == "reply is not complete JSON (cut at max_tokens); no log probabilities to fall back on"
    )


def test_tokens_without_a_score_position_or_without_digits_are_unparseable():
    prose = (tok("I"), tok(" give"), tok(" it"), tok(" 4", {" 4": 0.9}))  # a digit, but not after "score":
    got = parse_judgement(Completion(text="I give it 4", tokens=prose))
    assert (got.score, got.method) == (None, "unparseable")
    assert got.problem == "no JSON object; no score token among the log probabilities"

    no_digits = tokens_around("7", {"7": 0.8, "8": 0.1})
    got = parse_judgement(Completion(text='{"score": 7}', tokens=no_digits))
    assert (got.score, got.method) == (None, "unparseable")
    assert got.problem == "score 7 is outside 0–5; no digit 0–5 among the alternatives of the score token"

    empty_top = tokens_around("4", {})
    got = parse_judgement(Completion(text='{"score": 4', tokens=empty_top, finish_reason="length"))
    assert got.problem.endswith("no digit 0–5 among the alternatives of the score token")


def test_score_token_is_the_first_digit_after_the_score_key():
    tokens = (tok("2"), tok('{"score":'), tok(" "), tok(" "), tok("3", {"3": 1.0}), tok(', "score": 4'))
    assert score_token(tokens) is tokens[4]
    assert score_token((tok('"scores": '), tok("3"))) is None
    assert score_token(()) is None


def test_expected_digit_score_edge_cases():
    assert expected_digit_score([]) is None
    assert expected_digit_score([("a", -0.1), ("6", -0.2)]) is None
    assert expected_digit_score([("3", -math.inf)]) is None  # probability 0
    assert expected_digit_score([("2", math.nan), ("4", 0.0)]) == (4.0, 1.0)  # NaN skipped
    assert expected_digit_score([("1", 1e-9)]) == (1.0, 1.0)  # above 0: float noise, probability 1
    assert expected_digit_score([("\t0\n", LN(0.25)), ("5", LN(0.25))]) == (2.5, 0.5)


def test_methods_are_named():
    assert JUDGEMENT_METHODS == ("json", "logprobs", "digit", "unparseable")


# --- properties ------------------------------------------------------------------------------------

SCORE_PIECES = ['{"score":', '"score"', ":", " ", "\n", " 4", "3", "5,", "0", "9", '{"', '":', "}"]
token_text = st.one_of(st.text(max_size=6), st.sampled_from(SCORE_PIECES))
logprob = st.floats(allow_nan=True, allow_infinity=True)
alternative = st.tuples(st.one_of(token_text, st.sampled_from(["0", "1", "2", " 3", "4 ", "5"])), logprob)
token = st.builds(
    TokenLogprob, token=token_text, logprob=logprob, top=st.lists(alternative, max_size=5).map(tuple)
)
completion = st.builds(
    Completion,
    text=st.one_of(st.text(), st.sampled_from(['{"score": 4}', '{"score": 9', '```json\n{"score": 2.5}'])),
    tokens=st.one_of(st.none(), st.lists(token, max_size=12).map(tuple)),
    finish_reason=st.sampled_from([None, "stop", "length"]),
)


@PROPERTY
@given(completion)
def test_never_raises_and_a_score_is_always_on_the_scale(c):
    got = parse_judgement(c)
    assert got.method in JUDGEMENT_METHODS
    assert (got.method == "unparseable") == (got.score is None)
    assert (got.problem is None) == (got.method == "json")
    if got.score is not None:
        assert 0 <= got.score <= 5
    if got.expected_score is not None:
        assert 0 <= got.expected_score <= 5
        assert got.digit_mass > 0
    if got.method == "logprobs":
        assert got.score == got.expected_score


json_value = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
no_braces = st.text(alphabet=st.characters(exclude_characters="{}"))


@PROPERTY
@given(
    score=st.one_of(st.integers(0, 5), st.floats(0, 5)),
    extra=st.dictionaries(st.text(max_size=8).filter(lambda k: k != "score"), json_value, max_size=4),
    position=st.integers(0, 4),
    before=no_braces,
    after=st.text(),
    indent=st.sampled_from([None, 2]),
    fenced=st.booleans(),
)
def test_a_json_score_on_the_scale_parses_back_exactly(score, extra, position, before, after, indent, fenced):
    items = list(extra.items())
    items.insert(min(position, len(items)), ("score", score))
    body = json.dumps(dict(items), indent=indent)
    text = before + (f"```json\n{body}\n```" if fenced else body) + after
    got = parse_judgement(Completion(text=text))
    assert (got.method, got.score, got.problem) == ("json", float(score), None)


digit_alternative = st.tuples(
    st.sampled_from(["0", "1", "2", "3", "4", "5", " 0", " 5", "4\n"]), st.floats(max_value=0.0)
)


@PROPERTY
@given(st.lists(st.one_of(digit_alternative, alternative), max_size=8))
def test_expected_score_lies_within_the_digits_present(alternatives):
    got = expected_digit_score(alternatives)
    digits = [int(t.strip()) for t, _ in alternatives if t.strip() in {"0", "1", "2", "3", "4", "5"}]
    # The same alternatives at the score token of a cut reply: the parser reports exactly this.
    score_at = TokenLogprob(token="3", logprob=-0.1, top=tuple(alternatives))
    tokens = (tok('{"score": '), score_at)
    parsed = parse_judgement(Completion(text='{"score": 3', tokens=tokens, finish_reason="length"))
    if got is None:
        assert (parsed.method, parsed.score) == ("unparseable", None)
        return
    expected, mass = got
    assert min(digits) <= expected <= max(digits)
    assert 0 <= expected <= 5
    assert mass > 0
    assert (parsed.method, parsed.score, parsed.digit_mass) == ("logprobs", expected, mass)


# --- score-only replies (prompt v2: the score alone, one token) ------------------------------------


def test_a_score_only_reply_is_read_from_its_first_tokens_digit_probabilities():
    first = tok("4", {"4": 0.6, " 5": 0.2, "3": 0.1, "The": 0.1})
    got = parse_judgement(Completion(text="4", tokens=(first,)), score_only=True)
    assert got.method == "logprobs" and got.problem is None
    assert got.score == pytest.approx((4 * 0.6 + 5 * 0.2 + 3 * 0.1) / 0.9, abs=1e-12)
    assert got.digit_mass == pytest.approx(0.9) and got.expected_score == got.score
    # whichever token was picked: the digits' share of the first step is what was asked for
    word = tok("The", {"The": 0.5, "2": 0.25, "0": 0.25})
    got = parse_judgement(Completion(text="The", tokens=(word,)), score_only=True)
    assert (got.method, got.score, got.digit_mass) == ("logprobs", 1.0, 0.5)


def test_a_score_only_reply_without_log_probabilities_is_its_digit():
    assert parse_judgement(Completion(text=" 3\n"), score_only=True) == Judgement(score=3.0, method="digit")
    for text, why in (("7", "no log probabilities"), ("4.5", "no log probabilities"), ("", "no log")):
        got = parse_judgement(Completion(text=text), score_only=True)
        assert got.method == "unparseable" and got.score is None
        assert "is not a score 0–5" in got.problem and why in got.problem
    got = parse_judgement(Completion(text="x", tokens=(tok("x", {"x": 0.9, "y": 0.1}),)), score_only=True)
    assert got.method == "unparseable"
    assert "no digit 0–5 among the alternatives of the first token" in got.problem
    got = parse_judgement(Completion(text="", tokens=()), score_only=True)
    assert got.method == "unparseable" and "no generated token" in got.problem


def test_a_json_reply_to_a_score_only_prompt_is_not_read_as_json():
    """The prompt asked for one digit: a JSON object in reply is the judge not following it (its
    first token, `{`, holds no digit), never silently accepted."""
    reply = Completion(text='{"score": 4}', tokens=(tok('{"', {'{"': 0.9, "{": 0.1}),))
    got = parse_judgement(reply, score_only=True)
    assert got.method == "unparseable" and got.score is None
    assert parse_judgement(reply).method == "json"  # the same reply to a JSON prompt


@PROPERTY
@given(completion)
def test_a_score_only_reply_never_raises_and_stays_on_the_scale(c):
    got = parse_judgement(c, score_only=True)
    assert got.method in ("logprobs", "digit", "unparseable")
    assert (got.method == "unparseable") == (got.score is None) == (got.problem is not None)
    if got.score is not None:
        assert 0 <= got.score <= 5
    if got.method == "logprobs":
        assert got.score == got.expected_score and got.digit_mass > 0
        assert got.score == expected_digit_score(c.tokens[0].top)[0]
