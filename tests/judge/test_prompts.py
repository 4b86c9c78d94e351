"""The judge's prompt versions: v2 asks for the score alone (one token), v1 for JSON; both word
the task and the scale alike, and the relevance prompt follows the main prompt's reply style."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kebab_eval_pipeline.judge.completion import Decoding
from kebab_eval_pipeline.judge.config import DEFAULT_PROMPT_VERSION, JudgeSettings, variant_of
from kebab_eval_pipeline.judge.local import plain_conversation
from kebab_eval_pipeline.judge.prompts import (
    PROMPT_VERSIONS,
    JudgeInput,
    input_hash,
    render,
    reply_decoding,
    scale,
    score_only,
)
from kebab_eval_pipeline.judge.relevance import (
    RELEVANCE_PROMPT_VERSION,
    RELEVANCE_SCORE_ONLY_VERSION,
    RelevanceInput,
    relevance_prompt_version,
    render_relevance,
)

ITEM = JudgeInput(
    question="How long does the dough rise?",
    answer="Let it rise for two hours [1].",
    citations=("[1] bread/rise.md",),
    context=({"ref": "1", "doc_path": "bread/rise.md", "heading": "Rising", "text": "Two hours at 24 °C."},),
)


def test_v2_is_the_default_and_asks_for_the_score_alone():
    assert DEFAULT_PROMPT_VERSION == "v2" == JudgeSettings().prompt_version
    assert PROMPT_VERSIONS == ("v1", "v1-alt", "v2", "v2-alt")
    assert [v for v in PROMPT_VERSIONS if score_only(v)] == ["v2", "v2-alt"]
    for version in ("v2", "v2-alt"):
        ground, correct = render("groundedness", version, ITEM), render("correctness", version, ITEM)
        # the same messages for both criteria but the last line, which names the criterion
        assert ground[:-1] == correct[:-1]
        head, _, ask = ground[-1]["content"].rpartition("\n\n")
        assert correct[-1]["content"] == f"{head}\n\nGrade the ANSWER's correctness."
        assert ask == "Grade the ANSWER's groundedness." and head.startswith("QUESTION: ")
        system = ground[0]["content"]
        assert scale("groundedness") in system and scale("correctness") in system  # v1's words
        assert system.endswith("Reply with the score alone: one digit from 0 to 5, nothing else.")
        # one worked example per criterion, each answered with its digit
        assert [m["role"] for m in ground] == ["system", "user", "assistant", "user", "assistant", "user"]
        assert ground[1]["content"].endswith("groundedness.") and ground[2]["content"] == "4"
        assert ground[3]["content"].endswith("correctness.") and ground[4]["content"] == "5"
        # the -alt wording shows the passages after the answer, in both families
        order = head.index("ANSWER:") < head.index("CONTEXT:")
        assert order == version.endswith("-alt")
    v1 = render("groundedness", "v1", ITEM)
    assert (
        len(v1) == 4
        and v1[2]["content"].startswith('{"score": 4')
        and scale("groundedness") in v1[0]["content"]
    )
    assert variant_of("v2") == "v2-alt"


def test_a_score_only_prompt_decodes_one_token_and_its_key_says_so():
    base = Decoding(max_tokens=96)
    assert reply_decoding("v2", base) == Decoding(max_tokens=1) and reply_decoding("v1", base) == base
    messages = render("groundedness", "v2", ITEM)
    assert input_hash(messages, reply_decoding("v2", base)) != input_hash(messages, base)


def test_the_relevance_prompt_follows_the_main_prompts_reply_style():
    item = RelevanceInput("How long does the dough rise?", "bread/rise.md", "Rising", "Two hours.")
    assert relevance_prompt_version("v2") == RELEVANCE_SCORE_ONLY_VERSION
    assert relevance_prompt_version("v2-alt") == RELEVANCE_SCORE_ONLY_VERSION
    assert relevance_prompt_version("v1") == RELEVANCE_PROMPT_VERSION == "relevance-v1"
    short, long = render_relevance(item, RELEVANCE_SCORE_ONLY_VERSION), render_relevance(item)
    assert short[0]["content"].endswith("one digit from 0 to 5, nothing else.") and short[2]["content"] == "5"
    assert '"reasoning"' in long[0]["content"] and long[2]["content"].startswith('{"score": 5')
    assert short[1:2] == long[1:2] and short[3] == long[3]
    assert score_only(RELEVANCE_SCORE_ONLY_VERSION) and not score_only(RELEVANCE_PROMPT_VERSION)


message = st.fixed_dictionaries(
    {"role": st.sampled_from(["system", "user", "assistant"]), "content": st.text(max_size=40)}
)


@settings(max_examples=200, deadline=None)
@given(st.lists(message, min_size=2, max_size=5))
def test_a_plain_conversation_without_its_last_message_is_a_prefix_of_it(messages):
    """A model without a chat template reads the conversation as plain text; the instructions'
    key/value cache is reused only when the shorter conversation's text begins the longer one's."""
    full = plain_conversation(messages, generation=True)
    assert full.startswith(plain_conversation(messages[:-1], generation=False))
    assert full.endswith("\n\nAssistant:\n")
    assert plain_conversation(messages[:1], generation=True).startswith(
        {"system": "Instructions:\n", "user": "User:\n", "assistant": "Assistant:\n"}[messages[0]["role"]]
    )
