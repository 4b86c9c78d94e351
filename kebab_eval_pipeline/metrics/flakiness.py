"""Per-query flakiness: how often a query's outcome changed across a run's repeats.

Inputs are ``(N, Q)`` arrays, one row per repeat, one column per golden query (in query order).
A query's *modal* outcome is its most frequent one (ties: the smallest code, which for ranks is
the best rank, a miss counting as worse than any rank); its *flips* are the repeats whose outcome
differs from the modal one — 0 for a deterministic query, at most N − 1.

Columns of :func:`flakiness_columns` (all ``Int64``; :data:`FLAKINESS_COLUMNS`):

- ``repeats`` — N.
- ``flips`` — repeats whose whole outcome (first relevant rank, refusal, answer text) differs from
  the modal whole outcome: the number the flakiest queries are ranked by.
- ``rank_flips`` — repeats whose ``first_relevant_rank`` (a miss is a value of its own) differs
  from the modal one; ``distinct_ranks`` — how many different ones there were; ``rank_best`` /
  ``rank_worst`` — the best and worst rank found (NA when no repeat found a relevant hit);
  ``miss_repeats`` — repeats without a relevant hit. NA where retrieval does not apply (no gold).
- ``hit_flips`` — repeats whose hit@k verdicts (every k at once) differ from the modal ones; NA
  where retrieval does not apply.
- ``refusal_flips`` — repeats whose refused flag differs from the modal one (a missing answer is a
  value of its own); NA where no repeat has an answer.
- ``answer_flips`` — repeats whose answer text differs from the modal text; NA where no repeat
  has an answer.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

#: A miss (no relevant hit), as a rank code: after every real rank.
MISS = np.iinfo(np.int64).max
#: A missing value of a flag or a text, as a code.
ABSENT = -1

FLAKINESS_COLUMNS: dict[str, str] = {
    "repeats": "Int64",
    "flips": "Int64",
    "rank_flips": "Int64",
    "distinct_ranks": "Int64",
    "rank_best": "Int64",
    "rank_worst": "Int64",
    "miss_repeats": "Int64",
    "hit_flips": "Int64",
    "refusal_flips": "Int64",
    "answer_flips": "Int64",
}


def modal(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(flips, distinct, mode)`` per column of the ``(N, Q)`` integer array ``values``: repeats
    differing from the column's most frequent value (ties: the smallest), how many distinct values
    it holds, and that value. One sort per column, no loop over queries (O(N·Q·log N))."""
    values = np.asarray(values)
    n, q = values.shape
    if q == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty.copy(), np.zeros(0, dtype=values.dtype)
    ordered = np.sort(values, axis=0)
    starts = np.ones((n, q), dtype=bool)
    starts[1:] = ordered[1:] != ordered[:-1]
    run = np.cumsum(starts, axis=0) - 1  # (N, Q): the run of equal values each sorted row is in
    flat = (run + np.arange(q)[None, :] * n).ravel()
    counts = np.bincount(flat, minlength=q * n).reshape(q, n)
    top = counts.argmax(axis=1)  # the first longest run: the smallest of the most frequent values
    first = np.argmax(run == top[None, :], axis=0)
    return (
        n - counts.max(axis=1).astype(np.int64),
        run[-1].astype(np.int64) + 1,
        ordered[first, np.arange(q)],
    )


def rank_codes(ranks: np.ndarray) -> np.ndarray:
    """First relevant ranks (float, NaN = miss) as integer codes (:data:`MISS` for a miss)."""
    out = np.full(ranks.shape, MISS, dtype=np.int64)
    found = ~np.isnan(ranks)
    out[found] = ranks[found].astype(np.int64)
    return out


def hit_codes(hits: list[np.ndarray]) -> np.ndarray:
    """The hit@k verdicts of every k (each an ``(N, Q)`` float array, NaN = not applicable) as one
    code per repeat and query: bit i set when hit@k_i is 1; :data:`ABSENT` where not applicable."""
    if not hits:
        raise ValueError("hit_codes needs at least one hit@k array")
    code = np.zeros(hits[0].shape, dtype=np.int64)
    for i, h in enumerate(hits):
        code |= (np.nan_to_num(h) >= 1).astype(np.int64) << i
    return np.where(np.isnan(hits[0]), ABSENT, code)


def text_codes(texts: list[pd.Series]) -> np.ndarray:
    """Answer texts (one Series per repeat, NA = no answer) as 64-bit hashes, ``(N, Q)``;
    :data:`ABSENT` for a missing text (a hash collision with it is 1 in 2^64)."""
    rows = []
    for t in texts:
        s = t.astype("string")
        h = pd.util.hash_pandas_object(s.fillna(""), index=False).to_numpy().view(np.int64)
        rows.append(np.where(s.isna().to_numpy(), ABSENT, h))
    return np.vstack(rows) if rows else np.zeros((0, 0), dtype=np.int64)


def flag_codes(flags: list[pd.Series]) -> np.ndarray:
    """Boolean flags (one Series per repeat, NA allowed) as codes 0/1, :data:`ABSENT` for NA."""
    rows = []
    for f in flags:
        b = f.astype("boolean")
        rows.append(np.where(b.isna().to_numpy(), ABSENT, b.fillna(False).to_numpy(dtype=np.int64)))
    return np.vstack(rows)


def combined_codes(*codes: np.ndarray) -> np.ndarray:
    """Several ``(N, Q)`` code arrays as one code per repeat and query (equal iff all are equal,
    up to a 64-bit hash collision)."""
    n, q = codes[0].shape
    frame = pd.DataFrame({i: c.ravel() for i, c in enumerate(codes)})
    return pd.util.hash_pandas_object(frame, index=False).to_numpy().view(np.int64).reshape(n, q)


def flakiness_columns(
    ranks: np.ndarray,
    hit_arrays: list[np.ndarray],
    refused: list[pd.Series],
    answers: list[pd.Series],
    applicable: np.ndarray,
) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """The flakiness table (:data:`FLAKINESS_COLUMNS`, one row per query) from the repeats'
    ``ranks`` (``(N, Q)`` first relevant ranks, NaN = miss), ``hit_arrays`` (one ``(N, Q)`` hit@k
    array per k), ``refused`` and ``answers`` (a Series per repeat: the refused flag and the answer
    text, NA without an answer) and ``applicable`` (``(Q,)``: retrieval applies to the query).

    Also returns the modal first relevant rank (float, NaN = miss) and the modal refused code
    (:func:`flag_codes`) per query: what a repeated run stores as the query's rank and refusal."""
    n, q = ranks.shape
    rank = rank_codes(ranks)
    rank_flips, distinct, mode = modal(rank)
    hit_flips, _, _ = modal(hit_codes(hit_arrays))
    refusal = flag_codes(refused)
    refusal_flips, _, refusal_mode = modal(refusal)
    text = text_codes(answers)
    answer_flips, _, _ = modal(text)
    flips, _, _ = modal(combined_codes(rank, refusal, text))

    found = rank != MISS
    misses = (~found).sum(axis=0)
    best = np.where(found, rank, MISS).min(axis=0)
    worst = np.where(found, rank, -1).max(axis=0)
    any_found = found.any(axis=0)
    has_answer = (text != ABSENT).any(axis=0) | (refusal != ABSENT).any(axis=0)

    def col(values: np.ndarray, valid: np.ndarray) -> pd.Series:
        out = pd.Series(np.where(valid, values, 0).astype(np.int64), dtype="Int64")
        out[~valid] = pd.NA
        return out

    everywhere = np.ones(q, dtype=bool)
    table = pd.DataFrame(
        {
            "repeats": col(np.full(q, n), everywhere),
            "flips": col(flips, everywhere),
            "rank_flips": col(rank_flips, applicable),
            "distinct_ranks": col(distinct, applicable),
            "rank_best": col(best, applicable & any_found),
            "rank_worst": col(worst, applicable & any_found),
            "miss_repeats": col(misses, applicable),
            "hit_flips": col(hit_flips, applicable),
            "refusal_flips": col(refusal_flips, has_answer),
            "answer_flips": col(answer_flips, has_answer),
        }
    )
    modal_rank = np.where(mode == MISS, np.nan, mode.astype(np.float64))
    return table.astype(FLAKINESS_COLUMNS), modal_rank, refusal_mode
