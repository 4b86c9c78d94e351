"""Reciprocal-rank fusion of the lexical and vector channels (SPEC §4.1, hybrid).

``rrf(d) = Σ_m 1 / (k_rrf + rank_m(d))`` over the channels that returned ``d``,
divided by the two-channel maximum ``2 / (k_rrf + 1)`` so it lies in [0, 1]:
rank 1 in both channels scores exactly 1.0; rank 1 in one channel only scores
``(k_rrf + 1) / (2 (k_rrf + 1)) = 0.5``; rank 1 in one and rank 2 in the other
scores just under 1.0. Only ranks are used, so BM25's unbounded scores and
cosines in [-1, 1] need no calibration against each other.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

RRF_K = 60
# How deep each channel is read before fusing. A document at rank 100 in one
# channel adds 1/160 ≈ 0.006 before normalisation: deeper ranks cannot change the top 10.
RRF_DEPTH = 100


@dataclass(frozen=True)
class Fused:
    """One fused result: the chunk index, its normalised RRF score and each channel's view of it."""

    index: int
    score: float
    lexical_score: float | None
    lexical_rank: int | None
    vector_score: float | None
    vector_rank: int | None


def rrf_fuse(
    lexical: list[tuple[int, float]],
    vector: list[tuple[int, float]],
    k: int,
    k_rrf: int = RRF_K,
) -> list[Fused]:
    """Fuse two ranked lists of ``(chunk index, channel score)``, best first, into the top ``k``.

    Inputs: each channel's results in rank order (rank = position + 1; a chunk
    appears at most once per channel), ``k`` ≥ 0, ``k_rrf`` ≥ 1.

    Output: at most ``k`` :class:`Fused`, highest score first. Ties (equal fused
    score, e.g. lexical-only rank 1 against vector-only rank 1) go to the better
    best-channel rank, then the lexical channel, then chunk order — fixed rules,
    so the same inputs always give the same order. A chunk missing from a
    channel has that channel's score and rank ``None``.

    Edge cases: both lists empty → ``[]``; ``k_rrf < 1`` raises ``ValueError``.
    """
    if k_rrf < 1:
        raise ValueError(f"k_rrf must be >= 1, got {k_rrf}")
    lex = {idx: (rank, score) for rank, (idx, score) in enumerate(lexical, start=1)}
    vec = {idx: (rank, score) for rank, (idx, score) in enumerate(vector, start=1)}
    ids = np.array(sorted(lex.keys() | vec.keys()), dtype=np.int64)
    if ids.size == 0 or k < 1:
        return []
    big = np.iinfo(np.int64).max // 4  # "absent" rank: sorts after every real rank, contributes 0
    lex_rank = np.array([lex[i][0] if i in lex else big for i in ids], dtype=np.int64)
    vec_rank = np.array([vec[i][0] if i in vec else big for i in ids], dtype=np.int64)
    raw = np.where(lex_rank < big, 1.0 / (k_rrf + lex_rank), 0.0) + np.where(
        vec_rank < big, 1.0 / (k_rrf + vec_rank), 0.0
    )
    score = raw / (2.0 / (k_rrf + 1))
    best_rank = np.minimum(lex_rank, vec_rank)
    lexical_missing = (lex_rank == big).astype(np.int64)
    # np.lexsort: last key is primary.
    order = np.lexsort((ids, lexical_missing, best_rank, -score))[:k]
    out = []
    for pos in order:
        idx = int(ids[pos])
        lr = lex.get(idx)
        vr = vec.get(idx)
        out.append(
            Fused(
                index=idx,
                score=float(score[pos]),
                lexical_score=lr[1] if lr else None,
                lexical_rank=lr[0] if lr else None,
                vector_score=vr[1] if vr else None,
                vector_rank=vr[0] if vr else None,
            )
        )
    return out
