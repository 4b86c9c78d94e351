"""Question and corpus text as the health checks compare it: normalised, then cut into hashed
n-grams with numpy (one pass over all texts at once, no per-text Python loop).

Normalised text: Unicode NFKC (full-width letters, ligatures and compatibility forms become their
plain forms), case-folded, every run of punctuation, symbols, underscores and white space collapsed
to one space, trimmed. ``"What's  the pH?"`` and ``"what s the ph"`` are the same question.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

#: The multiplier of the rolling polynomial hash (an odd 64-bit constant; arithmetic wraps mod 2**64).
_MULTIPLIER = np.uint64(0x100000001B3)


def normalise(texts: Sequence[str] | pd.Series) -> pd.Series:
    """Each text normalised (NFKC, case-folded, punctuation and white space collapsed to single
    spaces, trimmed); a null becomes ``""``. Output: a ``string`` Series in input order."""
    s = pd.Series(texts, dtype="string").fillna("")
    s = s.str.normalize("NFKC").str.casefold()
    return s.str.replace(r"[\W_]+", " ", regex=True).str.strip().astype("string")


def char_codes(texts: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """The code points of every text, concatenated (uint64, each + 1 so none is 0), and the
    ``len(texts) + 1`` offsets where each text starts."""
    lengths = texts.str.len().to_numpy(dtype=np.int64, na_value=0)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    joined = "".join(texts.tolist())
    codes = np.frombuffer(joined.encode("utf-32-le"), dtype=np.uint32).astype(np.uint64) + np.uint64(1)
    return codes, offsets


def word_ids(texts: pd.Series, vocabulary: pd.Index | None = None) -> tuple[np.ndarray, np.ndarray, pd.Index]:
    """The words (split on the single spaces of normalised text) of every text as integer ids
    (uint64, + 1), concatenated, with the texts' offsets and the vocabulary the ids index into
    (``vocabulary`` given: words not in it get fresh ids past its end, which nothing else shares)."""
    words = texts.str.split(" ").explode()
    words = words[words.notna() & (words != "")]
    counts = words.groupby(level=0).size().reindex(range(len(texts)), fill_value=0).to_numpy()
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    if vocabulary is None:
        codes, vocabulary = pd.factorize(words.to_numpy(dtype=object))
    else:
        codes = vocabulary.get_indexer(words.to_numpy(dtype=object))
        unknown = codes < 0
        codes[unknown] = len(vocabulary) + pd.factorize(words.to_numpy(dtype=object)[unknown])[0]
    return codes.astype(np.uint64) + np.uint64(1), offsets, pd.Index(vocabulary)


def rolling_ngrams(
    values: np.ndarray, offsets: np.ndarray, n: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every n-gram of consecutive ``values`` that stays inside one text (texts delimited by
    ``offsets``): ``(text row, start within the text, hash)``, in text then start order. A text
    shorter than ``n`` has none. The hash is a 64-bit polynomial one: two different n-grams share
    one with a chance of about 2**-64 per pair, negligible at golden-set and corpus sizes."""
    empty = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.uint64))
    total = len(values)
    if total < n:
        return empty
    windows = total - n + 1
    h = np.zeros(windows, dtype=np.uint64)
    for j in range(n):  # over the n positions of a window, not over texts
        h = h * _MULTIPLIER + values[j : windows + j]
    starts = np.arange(windows, dtype=np.int64)
    row = np.searchsorted(offsets, starts, side="right") - 1
    inside = starts + n <= offsets[row + 1]
    return row[inside], (starts - offsets[row])[inside], h[inside]
