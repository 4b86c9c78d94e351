"""Which writing systems a text uses, for language-aware fusion (see :mod:`.fusion`).

An embedding model covers the scripts of the languages it was trained on. all-MiniLM-L6-v2 was
trained on English, so it covers Latin letters (and digits, which every script shares); a
multilingual model covers everything. :func:`covered_share` says how much of a text a model
covers: the share of its letters in covered scripts. Letters, not words: kebab's Korean
documents are full of English identifiers, and a sentence that is half identifiers is half
visible to an English model.
"""

from __future__ import annotations

import re
import unicodedata

import numpy as np

#: Scripts a model may declare. ``latin`` is ASCII and accented Latin letters.
ALL_SCRIPTS = "*"
_LATIN = re.compile(r"[A-Za-z\u00c0-\u024f]")
_LETTER = re.compile(r"[^\W\d_]")


def covered_share(text: str, scripts: tuple[str, ...]) -> float:
    """Share of ``text``'s letters written in ``scripts`` (``("latin",)`` or ``("*",)``), in [0, 1].

    Edge cases: a model covering ``*`` covers everything (1.0); a text with no letters (digits,
    symbols, empty) is 1.0 — nothing in it is outside the model's reach.
    """
    if ALL_SCRIPTS in scripts:
        return 1.0
    letters = _LETTER.findall(unicodedata.normalize("NFKC", text))
    if not letters:
        return 1.0
    if "latin" not in scripts:
        return 0.0
    latin = sum(1 for ch in letters if _LATIN.match(ch))
    return latin / len(letters)


def covered_shares(texts: list[str], scripts: tuple[str, ...]) -> np.ndarray:
    """:func:`covered_share` of each text, as a float64 array (one per text, in order)."""
    return np.array([covered_share(t, scripts) for t in texts], dtype=np.float64)
