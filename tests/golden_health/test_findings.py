"""The golden-set health findings on a hand-made set with known problems (tests/golden_health/
health_sets.py): every finding asserted exactly, the Jaccard and leakage numbers cross-checked
against plain-Python sets over the same texts, stale gold against a corpus whose section was renamed."""

from __future__ import annotations

import re
import unicodedata
from itertools import combinations

import numpy as np
import pandas as pd
import pytest

from kebab_eval_pipeline.chain.golden_health_run import check_golden_health, corpus_documents
from kebab_eval_pipeline.chain.settings import load_settings, settings_from_dict
from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.golden_health.duplicates import near_duplicates
from kebab_eval_pipeline.golden_health.findings import FINDING_COLUMNS
from kebab_eval_pipeline.golden_health.leakage import leaked_questions
from kebab_eval_pipeline.golden_health.text import normalise
from tests.golden_health.health_sets import LEAKED, QUERIES, write_config, write_corpus, write_set


def plain_normalise(text: str) -> str:
    """The normalisation, written independently: NFKC, casefold, non-word runs to one space."""
    text = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(re.sub(r"[\W_]+", " ", text).split())


def shingles(text: str, k: int) -> set[str]:
    return {text[i : i + k] for i in range(len(text) - k + 1)}


def jaccard(a: str, b: str, k: int = 3) -> float:
    sa, sb = shingles(plain_normalise(a), k), shingles(plain_normalise(b), k)
    return len(sa & sb) / len(sa | sb)


def word_grams(text: str, n: int) -> list[tuple[str, ...]]:
    words = plain_normalise(text).split()
    return [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    folder = tmp_path_factory.mktemp("health")
    corpus = write_corpus(folder)
    config = write_config(folder, write_set(folder), corpus)
    golden, report = check_golden_health(load_settings(config))
    return golden, report, corpus


def rows(report, kind: str) -> list[dict]:
    frame = report.findings[report.findings["kind"] == kind]
    return [
        {k: (None if pd.isna(v) else v) for k, v in r.items() if k != "kind"}
        for r in frame.to_dict("records")
    ]


def test_findings_table_is_typed_and_ordered_by_kind(setup):
    _, report, _ = setup
    assert dict(report.findings.dtypes.astype(str)) == FINDING_COLUMNS
    assert report.findings["kind"].tolist() == (
        ["unsupported_answerable"] * 2
        + ["stale_support"] * 2
        + ["exact_duplicate"] * 3
        + ["near_duplicate"]
        + ["leakage"]
        + ["small_slice"] * 3
    )
    assert report.summary == {
        "queries": len(QUERIES),
        "unsupported_answerable": 2,
        "stale_supports": 2,
        "near_duplicates": 4,
        "leakage": 1,
        "small_slices": 3,
        "suspect_gold_queue": None,
        "exact_duplicates": 3,
        "semantic_duplicates": None,
        "min_slice_queries": 4,
    }
    assert set(report.notes) == {"suspect_gold_queue"}  # no store given; semantic duplicates off
    assert report.blocking_failure  # unsupported answerable queries, unsupported_answerable: fail


def test_answerable_queries_without_relevant_support(setup):
    _, report, _ = setup
    assert rows(report, "unsupported_answerable") == [
        {
            "query_id": "grade-zero",
            "other_query_id": None,
            "document": None,
            "slice": None,
            "detail": "1 supports, none graded ≥ 1 (the relevance level): every retrieval metric skips it",
            "score": None,
        },
        {
            "query_id": "no-support",
            "other_query_id": None,
            "document": None,
            "slice": None,
            "detail": "answerable, but no supports: every retrieval metric skips it",
            "score": None,
        },
    ]


def test_stale_supports_against_the_renamed_section_and_the_missing_document(setup):
    _, report, _ = setup
    found = [(r["query_id"], r["document"], r["detail"]) for r in rows(report, "stale_support")]
    assert found == [
        ("gone", "korean/baechu-kimchi.md", "supports[0].rel_path: no document at this path in the index"),
        (
            "stale",
            "Tempeh > Black spots",
            "supports[0].heading_path: no section with this heading path in that document",
        ),
    ]


def test_duplicates_exact_after_normalisation_and_near_by_jaccard(setup):
    _, report, _ = setup
    exact = [(r["query_id"], r["other_query_id"], r["score"]) for r in rows(report, "exact_duplicate")]
    assert exact == [("salt-a", "salt-b", 1.0), ("salt-a", "salt-c", 1.0), ("salt-b", "salt-c", 1.0)]
    text = {q["id"]: q["query"] for q in QUERIES}
    assert len({plain_normalise(text[q]) for q in ("salt-a", "salt-b", "salt-c")}) == 1
    (near,) = rows(report, "near_duplicate")
    expected = jaccard(text["kom-a"], text["kom-b"])
    # hand count: kom-a's 52 characters hold 50 distinct 3-grams, all in kom-b, which adds "res"
    assert expected == pytest.approx(50 / 51)
    assert (near["query_id"], near["other_query_id"]) == ("kom-a", "kom-b")
    assert near["score"] == round(expected, 4)
    assert near["detail"] == f"character 3-gram Jaccard {expected:.4f} ≥ 0.8"
    # similar but not near (kombucha vs kefir), and paraphrases of one intent group: not reported
    assert jaccard(text["kom-a"], text["kef-a"]) < 0.8
    assert plain_normalise(text["koji-a"]) == plain_normalise(text["koji-b"])


def test_near_duplicate_kernel_matches_plain_sets_on_every_pair():
    """Every pair of a set of questions: the kernel's Jaccard equals plain Python sets' (k = 3 and
    5), and exactly the pairs at or above the threshold are returned."""
    texts = [q["query"] for q in QUERIES] + [
        "short",
        "ab",
        "",
        "How long should kombucha ferment at room temp?",
    ]
    normalised = normalise(texts)
    groups = np.array([None] * len(texts), dtype=object)
    for k, threshold in ((3, 0.5), (5, 0.3)):
        got = near_duplicates(normalised, groups, k, threshold)
        got = {(i, j): s for i, j, s in got.itertuples(index=False)}
        want = {}
        for i, j in combinations(range(len(texts)), 2):
            a, b = plain_normalise(texts[i]), plain_normalise(texts[j])
            sa, sb = shingles(a, k), shingles(b, k)
            if a != b and sa and sb and len(sa & sb) / len(sa | sb) >= threshold:
                want[(i, j)] = len(sa & sb) / len(sa | sb)
        assert set(got) == set(want) and want
        for pair, score in want.items():
            assert got[pair] == pytest.approx(score, abs=1e-12)


def test_leaked_question_names_document_and_quoted_span(setup):
    _, report, _ = setup
    (leak,) = rows(report, "leakage")
    assert leak["query_id"] == "leak" and leak["document"] == "vegetables/sauerkraut.md"
    assert leak["score"] == round(4 / 7, 4)
    assert leak["detail"] == (
        "57% of its word 4-grams are in the document; "
        "quotes 7 words: “weigh the cabbage after removing the core”"
    )


def test_leakage_kernel_matches_plain_sets_over_the_corpus(setup):
    """The share of every question's word 4-grams found in each corpus file, with plain Python sets
    over the raw files: the kernel flags exactly the questions whose best share reaches 0.5."""
    _, _, corpus = setup
    documents = corpus_documents(corpus)
    questions = pd.Series([q["query"] for q in QUERIES])
    leaks = leaked_questions(questions, documents, 4, 0.5)
    files = {p.relative_to(corpus).as_posix(): p.read_text(encoding="utf-8") for p in corpus.rglob("*.md")}
    grams = {name: set(word_grams(text, 4)) for name, text in files.items()}
    expected = {}
    for row, question in enumerate(questions):
        mine = word_grams(question, 4)
        if not mine:
            continue
        best = max(sorted(grams), key=lambda d: sum(g in grams[d] for g in mine) / len(mine))
        share = sum(g in grams[best] for g in mine) / len(mine)
        if share >= 0.5:
            expected[row] = (best, round(share, 4))
    assert {r.row: (r.document, r.share) for r in leaks.itertuples()} == expected
    assert expected == {
        QUERIES.index(next(q for q in QUERIES if q["query"] == LEAKED)): ("vegetables/sauerkraut.md", 0.5714)
    }


def test_small_slices_as_the_breakdowns_cut_them(setup):
    _, report, _ = setup
    assert [(r["slice"], r["score"], r["detail"]) for r in rows(report, "small_slice")] == [
        ("answerable=false", 1.0, "1 query (< 4): too few to conclude on"),
        ("category=drinks", 3.0, "3 queries (< 4): too few to conclude on"),
        ("tag=dairy", 1.0, "1 query (< 4): too few to conclude on"),
    ]


def test_min_slice_queries_defaults_to_the_comparisons_slice_minimum(tmp_path):
    corpus = write_corpus(tmp_path)
    config = tmp_path / "default.yaml"
    config.write_text(
        f"golden: {write_set(tmp_path)}\nsystem: {{kind: reference, corpus: {corpus}}}\n"
        "compare: {slice_min_queries: 13}\n"
        "golden_health: {semantic_duplicates: 'off', slice_dimensions: [category]}\n",
        encoding="utf-8",
    )
    _, report = check_golden_health(load_settings(config))
    # 15 queries: general 12 (< 13) and drinks 3
    assert report.summary["min_slice_queries"] == 13
    assert [r["slice"] for r in rows(report, "small_slice")] == ["category=drinks", "category=general"]


@pytest.mark.parametrize(
    ("block", "field", "reason"),
    [
        ({"near_duplicate_jaccard": 0}, "golden_health.near_duplicate_jaccard", "greater than 0"),
        ({"leakage_ngram": 1}, "golden_health.leakage_ngram", "greater than or equal to 2"),
        ({"slice_dimensions": ["colour"]}, "golden_health.slice_dimensions.0", "'category'"),
        (
            {"max_findings": {"leakage": -1}},
            "golden_health.max_findings.leakage",
            "greater than or equal to 0",
        ),
        ({"unsupported_answerable": "maybe"}, "golden_health.unsupported_answerable", "'fail' or 'warn'"),
        ({"treshold": 1}, "golden_health.treshold", "unknown key"),
    ],
)
def test_bad_values_name_the_key(block, field, reason):
    with pytest.raises(InputError) as caught:
        settings_from_dict({"golden_health": block}, source="eval.yaml")
    (offender,) = caught.value.offenders
    assert offender.field == field and reason in offender.reason, offender


def test_yaml_off_and_on_are_the_words():
    assert (
        settings_from_dict(
            {"golden_health": {"semantic_duplicates": False}}
        ).golden_health.semantic_duplicates
        == "off"
    )
    assert (
        settings_from_dict({"golden_health": {"semantic_duplicates": True}}).golden_health.semantic_duplicates
        == "on"
    )
