"""Compact letter display of many pairwise tests (Piepho 2004, "An algorithm for a letter-based
representation of all-pairwise comparisons", J. Comput. Graph. Stat. 13(2)).

Given which pairs of N runs differ significantly, give each run one or more letters so that two
runs share a letter exactly when they are *not* significantly different. Piepho's
insert-and-absorb algorithm does it for any pattern of significances:

1. start with one letter (column) holding every run;
2. for each significant pair (i, j), every column holding both is split in two — one without i,
   one without j — and every column that is now a subset of another is absorbed (dropped);
3. sweep: a run keeps a letter only when the letter is needed to connect it with some other run
   (a pair covered by another letter too does not need it), and a run always keeps one letter.

After step 2 no column holds a significant pair (splits only remove runs), and every
non-significant pair still shares a column (a split keeps the pair in at least one of the two
copies; absorption only drops a column contained in another). The sweep keeps both properties,
so the display always represents the significances exactly. It does not promise the fewest
letters (that is NP-hard); N runs need at most a handful in practice.

The work is over sets of runs, not rows: N is the number of runs compared (tens at most).
"""

from __future__ import annotations

import string
from collections.abc import Sequence

import numpy as np

__all__ = ["better_than", "letter_names", "letters", "shares_letter"]


def letters(significant: np.ndarray, order: Sequence[int] | None = None) -> list[list[str]]:
    """Each run's letters (Piepho's insert-and-absorb, then the sweep).

    Input: ``significant`` — N × N boolean matrix, ``[i, j]`` True when runs i and j differ
    significantly (symmetric; the diagonal is ignored); ``order`` — the runs best first (default
    0 … N−1): the letter ``a`` goes to the column holding the best run, ``b`` to the next, ….
    Output: for each run (input order) its letters in alphabetical order, never empty. N = 0 gives
    ``[]``; N = 1 gives ``[["a"]]``. Raises ValueError on a non-square or asymmetric matrix.
    """
    sig = np.asarray(significant, dtype=bool)
    if sig.ndim != 2 or sig.shape[0] != sig.shape[1]:
        raise ValueError(f"significant must be a square matrix, got shape {sig.shape}")
    n = sig.shape[0]
    sig = sig & ~np.eye(n, dtype=bool)
    if not np.array_equal(sig, sig.T):
        raise ValueError("significant must be symmetric")
    if n == 0:
        return []
    columns: list[frozenset[int]] = [frozenset(range(n))]
    for i, j in zip(*np.nonzero(np.triu(sig)), strict=True):
        columns = _insert(columns, int(i), int(j))
    columns = _sweep(columns, sig)
    rank = {run: pos for pos, run in enumerate(order if order is not None else range(n))}
    # Letters follow the runs' order: "a" for the column with the best run, ties by the next best.
    columns.sort(key=lambda c: sorted(rank[r] for r in c))
    names = letter_names(len(columns))
    out: list[list[str]] = [[] for _ in range(n)]
    for name, column in zip(names, columns, strict=True):
        for run in column:
            out[run].append(name)
    return out


def _insert(columns: list[frozenset[int]], i: int, j: int) -> list[frozenset[int]]:
    """Split every column holding both i and j, then absorb columns contained in others."""
    split: list[frozenset[int]] = []
    for column in columns:
        if i in column and j in column:
            split += [column - {i}, column - {j}]
        else:
            split.append(column)
    return _absorb(split)


def _absorb(columns: list[frozenset[int]]) -> list[frozenset[int]]:
    """Drop empty columns, duplicates and every column that is a subset of another (keeping order)."""
    unique = list(dict.fromkeys(c for c in columns if c))
    return [c for c in unique if not any(c < other for other in unique)]


def _sweep(columns: list[frozenset[int]], sig: np.ndarray) -> list[frozenset[int]]:
    """Piepho's sweeping: remove a run from a column when every non-significant pair it forms
    there is also covered by another column and the run keeps some other letter; then absorb."""
    cols = [set(c) for c in columns]
    for c, column in enumerate(cols):
        for run in sorted(column):
            others = [k for k in range(len(cols)) if k != c and run in cols[k]]
            if not others:
                continue  # its only letter
            partners = column - {run}
            covered = all(any(p in cols[k] for k in others) for p in partners)
            if covered:
                column.discard(run)
    return _absorb([frozenset(c) for c in cols])


def letter_names(count: int) -> list[str]:
    """``count`` letter names: a … z, then aa, ab, … (a display with more than 26 letters uses
    two-letter names; :func:`shares_letter` compares names, not characters)."""
    alphabet = string.ascii_lowercase
    names = list(alphabet[:count])
    width = 2
    while len(names) < count:
        for index in np.ndindex(*(len(alphabet),) * width):
            names.append("".join(alphabet[k] for k in index))
            if len(names) == count:
                break
        width += 1
    return names


def shares_letter(display: Sequence[Sequence[str]]) -> np.ndarray:
    """N × N boolean matrix: ``[i, j]`` True when runs i and j share a letter (diagonal True)."""
    sets = [set(x) for x in display]
    n = len(sets)
    return np.array([[bool(sets[i] & sets[j]) for j in range(n)] for i in range(n)], dtype=bool).reshape(n, n)


def better_than(significant: np.ndarray, better: np.ndarray) -> list[list[int]]:
    """ranx-style superscripts: for each run i, the runs j it is significantly better than
    (``significant[i, j]`` and ``better[i, j]``), ascending. ``better``: N × N boolean, True when
    run i's mean is better than run j's (the metric's direction applied)."""
    sig = np.asarray(significant, dtype=bool) & np.asarray(better, dtype=bool)
    return [[int(j) for j in np.nonzero(row)[0]] for row in sig]
