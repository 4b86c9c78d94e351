"""A hand-made golden set with known health problems, over a two-document copy of the demo corpus
whose tempeh "Black spots" section was renamed — shared by the health test modules."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from kebab_eval_pipeline.foundation.demo import DEMO_CORPUS

#: Copied from vegetables/sauerkraut.md: "Weigh the cabbage after removing the core and the outer
#: leaves" — 4 of the question's 7 word 4-grams are in it (the last four).
LEAKED = "Why should I weigh the cabbage after removing the core?"

SAUERKRAUT = {"rel_path": "vegetables/sauerkraut.md", "heading_path": ["Sauerkraut", "Ingredients and ratio"]}
TEMPEH_TIMING = {"rel_path": "koji-and-soy/tempeh.md", "heading_path": ["Tempeh", "Incubation", "Timing"]}

QUERIES = [
    # three spellings of one question: equal after NFKC, case folding and punctuation collapse
    {"id": "salt-a", "query": "How much salt per kilo of cabbage?", "supports": [SAUERKRAUT]},
    {"id": "salt-b", "query": "HOW MUCH SALT — per kilo of cabbage!!", "supports": [SAUERKRAUT]},
    {"id": "salt-c", "query": "Ｈｏｗ much salt per kilo of cabbage", "supports": [SAUERKRAUT]},
    # near duplicates (one letter apart) and a pair that is only similar
    {
        "id": "kom-a",
        "query": "How long should kombucha ferment at room temperature?",
        "category": "drinks",
        "supports": [SAUERKRAUT],
    },
    {
        "id": "kom-b",
        "query": "How long should kombucha ferment at room temperatures?",
        "category": "drinks",
        "supports": [SAUERKRAUT],
    },
    {
        "id": "kef-a",
        "query": "How long should kefir ferment?",
        "category": "drinks",
        "tags": ["dairy"],
        "supports": [SAUERKRAUT],
    },
    # paraphrases on purpose (one intent group): never duplicates of each other
    {"id": "koji-a", "query": "What is koji?", "group": "koji", "supports": [SAUERKRAUT]},
    {"id": "koji-b", "query": "what is koji??", "group": "koji", "supports": [SAUERKRAUT]},
    # quotes the corpus
    {"id": "leak", "query": LEAKED, "supports": [SAUERKRAUT]},
    # answerable without a relevant support; the unanswerable and the pending ones are fine
    {"id": "no-support", "query": "Which fermented foods are the healthiest of all?"},
    {
        "id": "grade-zero",
        "query": "Is tempeh safe with grey patches?",
        "supports": [{**TEMPEH_TIMING, "grade": 0}],
    },
    {"id": "pending", "query": "What does the 2027 handbook say about natto?", "pending": True},
    {"id": "refuse", "query": "What is the best fermentation stock to buy?", "answerable": False},
    # stale: the section was renamed in the corpus copy; the document is not in it at all
    {
        "id": "stale",
        "query": "Are black spots on tempeh dangerous?",
        "supports": [{"rel_path": "koji-and-soy/tempeh.md", "heading_path": ["Tempeh", "Black spots"]}],
    },
    {
        "id": "gone",
        "query": "How do I make kimchi paste?",
        "supports": [{"rel_path": "korean/baechu-kimchi.md"}],
    },
]


def write_set(folder: Path, queries: list[dict] = QUERIES, name: str = "health-demo") -> Path:
    """The golden set (every query lang en, category general unless given), as canonical YAML."""
    doc = {
        "schema_version": "1",
        "name": name,
        "queries": [{"lang": "en", "category": "general", **q} for q in queries],
    }
    path = folder / "golden.yaml"
    path.write_text(yaml.safe_dump(doc, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return path


def write_corpus(folder: Path) -> Path:
    """sauerkraut.md and tempeh.md of the demo corpus, the latter's "Black spots" heading renamed."""
    corpus = folder / "corpus"
    for rel in ("vegetables/sauerkraut.md", "koji-and-soy/tempeh.md"):
        (corpus / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(DEMO_CORPUS / rel, corpus / rel)
    tempeh = corpus / "koji-and-soy" / "tempeh.md"
    text = tempeh.read_text(encoding="utf-8")
    assert "## Black spots\n" in text
    tempeh.write_text(text.replace("## Black spots\n", "## Dark patches\n"), encoding="utf-8")
    return corpus


def write_config(folder: Path, golden: Path, corpus: Path, extra: str = "") -> Path:
    config = folder / "eval.yaml"
    config.write_text(
        f"golden: {golden}\n"
        f"system: {{kind: reference, corpus: {corpus}}}\n"
        "golden_health:\n"
        "  semantic_duplicates: 'off'\n"
        "  leakage_share: 0.5\n"
        "  min_slice_queries: 4\n"
        "  slice_dimensions: [category, tag, answerable]\n" + extra,
        encoding="utf-8",
    )
    return config
