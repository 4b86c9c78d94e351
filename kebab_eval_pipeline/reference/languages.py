"""Which writing systems a text uses, for language-aware fusion (see :mod:`.fusion`).

An embedding model covers the scripts of the languages it was trained on. all-MiniLM-L6-v2 was
trained on English, so it covers Latin script; a multilingual model covers everything.
:func:`covered_share` says how much of a text a model covers: the share of its *words* written in
covered scripts. Words, not letters: a Korean word is two or three syllables where an English
identifier is many letters, so by letters kebab's Korean documents (prose around English
identifiers) look 86% English; by words, 71% — and what the model misses is the prose, which is
where the meaning is.

:func:`vector_trust` turns the covered shares of a query and of a chunk into how far fusion
trusts the vector channel for that pair: not at all when either has 30% or more of its words
outside the model's scripts, fully only when both are wholly covered, linearly between. The
bounds were chosen on the demo and kebab-docs golden sets (``python benchmarks/bench_fusion.py``
and the grid it summarises; the reference system guide shows the table).
"""

from __future__ import annotations

import re

import numpy as np

from kebab_eval_pipeline.reference.tokenize import is_hangul, word_runs

#: A model covering every script declares this.
ALL_SCRIPTS = "*"
#: Below this covered share the vector channel gets no weight; from :data:`FULL_TRUST_SHARE` up, all of it.
NO_TRUST_SHARE = 0.7
FULL_TRUST_SHARE = 1.0

_LATIN = re.compile(r"[a-z\u00e0-\u024f]")  # word_runs lowercases
_LETTER = re.compile(r"[^\W\d_]")


def covered_share(text: str, scripts: tuple[str, ...]) -> float:
    """Share of ``text``'s words written in ``scripts`` (``("latin",)`` or ``("*",)``), in [0, 1].

    A word is a run of :func:`~.tokenize.word_runs` that holds a letter: a Hangul run, or a run
    of other letters and digits (Latin when it holds a Latin letter). Numbers alone do not count.

    Edge cases: a model covering ``*`` covers everything (1.0); a text with no words (digits,
    symbols, empty) is 1.0 — nothing in it is outside the model's reach.
    """
    if ALL_SCRIPTS in scripts:
        return 1.0
    words = [run for run in word_runs(text) if _LETTER.search(run)]
    if not words:
        return 1.0
    if "latin" not in scripts:
        return 0.0
    latin = sum(1 for run in words if not is_hangul(run) and _LATIN.search(run))
    return latin / len(words)


def covered_shares(texts: list[str], scripts: tuple[str, ...]) -> np.ndarray:
    """:func:`covered_share` of each text, as a float64 array (one per text, in order)."""
    return np.array([covered_share(t, scripts) for t in texts], dtype=np.float64)


def vector_trust(query_share: float, chunk_shares: np.ndarray) -> np.ndarray:
    """Per chunk, the factor in [0, 1] on the vector channel's weight for this query: the smaller
    of the two covered shares, mapped 0 at :data:`NO_TRUST_SHARE` or below, 1 at
    :data:`FULL_TRUST_SHARE` or above, linear between."""
    share = np.minimum(chunk_shares, query_share)
    return np.clip((share - NO_TRUST_SHARE) / (FULL_TRUST_SHARE - NO_TRUST_SHARE), 0.0, 1.0)
