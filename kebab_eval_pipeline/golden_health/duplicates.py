"""Duplicate questions: the same after normalisation, nearly the same (character n-gram Jaccard),
or the same meaning (sentence-embedding cosine).

A golden set with the same question twice weighs that question double in every mean; two near
copies usually mean a copy-and-edit that forgot to change the question. Members of one intent
``group`` are paraphrases on purpose and are never reported as duplicates of each other.

Kernels are vectorised: the near-duplicate Jaccard is one sparse product of the question × shingle
incidence matrix with its transpose, in row blocks so memory stays bounded (about
:data:`BLOCK_CELLS` candidate pairs at a time); the cosine is a dense product in row blocks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:  # SciPy is imported by the kernel that needs it: a run without golden_health skips it
    from scipy import sparse

from kebab_eval_pipeline.golden_health.text import char_codes, rolling_ngrams

#: Columns of a pair table: row positions ``i < j`` of the two questions and their similarity.
PAIR_COLUMNS: dict[str, str] = {"i": "int64", "j": "int64", "score": "float64"}
#: Upper bound of the pairs a block of rows may produce at once (rows per block × questions).
BLOCK_CELLS = 5_000_000


def _pairs(i: np.ndarray, j: np.ndarray, score: np.ndarray) -> pd.DataFrame:
    frame = pd.DataFrame({"i": i, "j": j, "score": score}).astype(PAIR_COLUMNS)
    return frame.sort_values(["i", "j"], ignore_index=True)


def _block_rows(n: int) -> int:
    return max(1, min(n, BLOCK_CELLS // max(n, 1)))


def _allowed(frame: pd.DataFrame, groups: np.ndarray) -> pd.DataFrame:
    """Pairs not inside one intent group (a null group is no group)."""
    gi, gj = groups[frame["i"].to_numpy()], groups[frame["j"].to_numpy()]
    same = pd.notna(gi) & (gi == gj)
    return frame[~np.asarray(same, dtype=bool)].reset_index(drop=True)


def exact_duplicates(normalised: pd.Series, groups: np.ndarray) -> pd.DataFrame:
    """Pairs of questions whose normalised texts are equal (score 1.0), ``i < j``. Questions that
    normalise to ``""`` (only punctuation) are compared too: they are equal."""
    codes = pd.factorize(normalised.to_numpy(dtype=object))[0]
    rows = pd.DataFrame({"code": codes, "row": np.arange(len(codes))})
    shared = rows[rows["code"].duplicated(keep=False)]
    both = shared.merge(shared, on="code", suffixes=("_i", "_j"))
    both = both[both["row_i"] < both["row_j"]]
    out = _pairs(both["row_i"].to_numpy(), both["row_j"].to_numpy(), np.ones(len(both)))
    return _allowed(out, groups)


def shingle_matrix(normalised: pd.Series, k: int) -> sparse.csr_matrix:
    """The question × character-k-gram incidence matrix (1 where the question's normalised text
    holds the k-gram; a text shorter than ``k`` has an empty row)."""
    from scipy import sparse

    codes, offsets = char_codes(normalised)
    row, _, h = rolling_ngrams(codes, offsets, k)
    col = pd.factorize(h)[0]
    m = sparse.csr_matrix(
        (np.ones(len(row), dtype=np.float64), (row, col)),
        shape=(len(normalised), int(col.max(initial=-1)) + 1),
    )
    m.sum_duplicates()
    m.data[:] = 1.0  # a k-gram twice in one question is one element of its set
    return m


def near_duplicates(normalised: pd.Series, groups: np.ndarray, k: int, threshold: float) -> pd.DataFrame:
    """Pairs ``i < j`` of questions with different normalised texts whose sets of character
    k-grams have a Jaccard similarity ``|A ∩ B| / |A ∪ B| ≥ threshold`` (``score``). Questions with
    no k-gram (shorter than k) are never near anything."""
    a = shingle_matrix(normalised, k)
    n = a.shape[0]
    sizes = np.diff(a.indptr).astype(np.float64)
    at = a.T.tocsr()
    parts_i, parts_j, parts_s = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)], [np.zeros(0)]
    step = _block_rows(n)
    for lo in range(0, n, step):  # blocks of rows: the product of one block is bounded
        block = (a[lo : lo + step] @ at).tocoo()
        i, j, inter = block.row.astype(np.int64) + lo, block.col.astype(np.int64), block.data
        upper = j > i
        i, j, inter = i[upper], j[upper], inter[upper]
        score = inter / (sizes[i] + sizes[j] - inter)
        keep = score >= threshold
        parts_i.append(i[keep])
        parts_j.append(j[keep])
        parts_s.append(score[keep])
    out = _pairs(np.concatenate(parts_i), np.concatenate(parts_j), np.concatenate(parts_s))
    text = normalised.to_numpy(dtype=object)
    out = out[text[out["i"].to_numpy()] != text[out["j"].to_numpy()]].reset_index(drop=True)
    return _allowed(out, groups)


def semantic_duplicates(
    questions: list[str], groups: np.ndarray, encode: Callable[[list[str]], np.ndarray], threshold: float
) -> pd.DataFrame:
    """Pairs ``i < j`` whose sentence embeddings (``encode``: unit-length rows, one per question)
    have a cosine ``≥ threshold`` (``score``, rounded to 4 decimals as stored metrics are)."""
    n = len(questions)
    if n < 2:
        return _pairs(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0))
    e = np.asarray(encode(questions), dtype=np.float32)
    parts_i, parts_j, parts_s = [], [], []
    step = _block_rows(n)
    for lo in range(0, n, step):
        cos = e[lo : lo + step] @ e.T
        i, j = np.nonzero(cos >= threshold)
        i = i + lo
        upper = j > i
        parts_i.append(i[upper])
        parts_j.append(j[upper])
        parts_s.append(cos[i[upper] - lo, j[upper]].astype(np.float64))
    score = np.round(np.concatenate(parts_s), 4)
    return _allowed(_pairs(np.concatenate(parts_i), np.concatenate(parts_j), score), groups)
