"""Fusing the lexical and vector channels into one ranking (SPEC §4.1, hybrid).

Three methods, each with a weight per channel:

* ``rrf`` — reciprocal-rank fusion, ``Σ_m w_m / (k_rrf + rank_m(d))`` over the channels that
  returned ``d``, divided by its maximum ``(w_lex + w_vec) / (k_rrf + 1)`` so it lies in
  [0, 1]. With equal weights, rank 1 in both channels scores 1.0 and rank 1 in one channel
  only 0.5. Only ranks are used, so BM25's unbounded scores and cosines need no calibration
  against each other — but a chunk both channels rank middling beats one channel's rank 1.
* ``minmax`` — CombSUM of min-max normalised scores: each channel's scores over the list it
  returned are mapped to [0, 1] (best 1, worst 0; a list of equal scores is all 1), a chunk a
  channel did not return gets 0, and the weighted sum is divided by ``w_lex + w_vec``.
  Unlike ranks, normalised scores keep *how much* better the top hit is.
* ``zscore`` — CombSUM of z-scores: each channel's scores standardised over its list (mean 0,
  standard deviation 1; a constant list is all 0), a missing chunk gets that channel's lowest
  z, weighted sum over ``w_lex + w_vec``. Unbounded, so its ``score_kind`` is ``other``.

**Language-aware weighting.** An embedding model that was trained on one language embeds text
in another script as near-noise (all-MiniLM-L6-v2 on Korean: MRR 0.01 on the demo), and fusing
that noise with equal weight drags good lexical hits down. With ``language_aware`` on, the
vector channel's weight for a candidate is scaled by a trust in [0, 1] — how much of the query
and of the chunk is written in scripts the model covers (see :mod:`.languages` and
``ReferenceIndex.vector_trust``). A Korean query against a Korean chunk then leans on BM25
alone; an English query against an English chunk gets the full vector weight. For a
multilingual model the trust is 1 and the weighting changes nothing.

Every method divides by the weights *that chunk* gets (``w_lex + trust·w_vec``): the fused score
is a weighted mean of the channels, so a chunk scored by BM25 alone is not pushed below chunks
that both channels may vote for merely because it has one vote fewer.

Ties (equal fused score) go to the better best-channel rank, then the lexical channel, then
chunk order — fixed rules, so the same inputs always give the same order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

FusionMethod = Literal["rrf", "minmax", "zscore"]
FUSION_METHODS: tuple[str, ...] = ("rrf", "minmax", "zscore")
RRF_K = 60
# How deep each channel is read before fusing. A document at rank 100 in one
# channel adds 1/160 ≈ 0.006 before normalisation: deeper ranks cannot change the top 10.
RRF_DEPTH = 100


@dataclass(frozen=True)
class FusionSpec:
    """How the hybrid mode fuses its channels; :attr:`version` names it in a run's versions."""

    method: FusionMethod = "rrf"
    lexical_weight: float = 1.0
    vector_weight: float = 1.0
    k_rrf: int = RRF_K
    language_aware: bool = False
    depth: int = RRF_DEPTH

    def __post_init__(self) -> None:
        if self.method not in FUSION_METHODS:
            raise ValueError(
                f"unknown fusion method {self.method!r}; expected one of {', '.join(FUSION_METHODS)}"
            )
        if self.lexical_weight < 0 or self.vector_weight < 0 or self.lexical_weight + self.vector_weight <= 0:
            raise ValueError(
                f"fusion weights must be >= 0 and not both 0, got lexical {self.lexical_weight}, "
                f"vector {self.vector_weight}"
            )
        if self.k_rrf < 1:
            raise ValueError(f"k_rrf must be >= 1, got {self.k_rrf}")
        if self.depth < 1:
            raise ValueError(f"fusion depth must be >= 1, got {self.depth}")

    @property
    def score_kind(self) -> str:
        """The hits' ``score_kind``: ``rrf`` for reciprocal-rank fusion, ``other`` for CombSUM."""
        return "rrf" if self.method == "rrf" else "other"

    @property
    def version(self) -> str:
        """A stable name of every setting that changes the fused order, e.g.
        ``rrf:k=60:w=1/1:depth=100`` or ``minmax:w=1/0.5:lang-aware:depth=100``."""
        parts = [self.method]
        if self.method == "rrf":
            parts.append(f"k={self.k_rrf}")
        parts.append(f"w={self.lexical_weight:g}/{self.vector_weight:g}")
        if self.language_aware:
            parts.append("lang-aware")
        parts.append(f"depth={self.depth}")
        return ":".join(parts)

    def details(self) -> dict[str, str]:
        """The settings as strings, for a system's version details."""
        out = {
            "fusion": self.method,
            "fusion_version": self.version,
            "fusion_weights": f"lexical={self.lexical_weight:g},vector={self.vector_weight:g}",
            "fusion_language_aware": str(self.language_aware).lower(),
            "fusion_depth": str(self.depth),
        }
        if self.method == "rrf":
            out["rrf_k"] = str(self.k_rrf)
        return out


#: The hybrid mode's default, chosen on evidence (benchmarks/bench_fusion.py): RRF with the vector
#: channel weighted 1.5 where it is trusted, and trusted only where the embedding model covers
#: the query's and the chunk's words. On the demo and both kebab-docs golden sets it is at least
#: as good as the better single channel on MRR and hit@5, overall and for Korean and English.
DEFAULT_FUSION = FusionSpec("rrf", lexical_weight=1.0, vector_weight=1.5, k_rrf=RRF_K, language_aware=True)


@dataclass(frozen=True)
class Fused:
    """One fused result: the chunk index, its fused score and each channel's view of it."""

    index: int
    score: float
    lexical_score: float | None
    lexical_rank: int | None
    vector_score: float | None
    vector_rank: int | None


def fuse(
    lexical: list[tuple[int, float]],
    vector: list[tuple[int, float]],
    k: int,
    spec: FusionSpec = DEFAULT_FUSION,
    vector_trust: np.ndarray | None = None,
) -> list[Fused]:
    """Fuse two ranked lists of ``(chunk index, channel score)``, best first, into the top ``k``.

    Inputs: each channel's results in rank order (rank = position + 1; a chunk appears at most
    once per channel); ``k`` ≥ 0; ``spec`` the method and weights; ``vector_trust``, used only
    when ``spec.language_aware``: for every chunk index, a factor in [0, 1] that scales the
    vector channel's weight for that chunk (the caller folds the query's own share in; see
    :mod:`.languages`). None means full trust.

    Output: at most ``k`` :class:`Fused`, highest score first (ties: see the module docstring).
    A chunk missing from a channel has that channel's score and rank ``None``.

    Edge cases: both lists empty or ``k < 1`` → ``[]``; a chunk only the vector channel returned
    is left out when its vector weight (after trust) is 0; a channel whose scores are all equal
    normalises to all 1 (``minmax``) or all 0 (``zscore``), so it then adds the same to each
    of its chunks and only presence matters.
    """
    lex_pos = {idx: pos for pos, (idx, _) in enumerate(lexical)}
    vec_pos = {idx: pos for pos, (idx, _) in enumerate(vector)}
    ids = np.array(sorted(lex_pos.keys() | vec_pos.keys()), dtype=np.int64)
    if ids.size == 0 or k < 1:
        return []
    lex_scores = np.array([s for _, s in lexical], dtype=np.float64)
    vec_scores = np.array([s for _, s in vector], dtype=np.float64)
    # position of each candidate in each channel's list, -1 when the channel did not return it
    lpos = np.array([lex_pos.get(int(i), -1) for i in ids], dtype=np.int64)
    vpos = np.array([vec_pos.get(int(i), -1) for i in ids], dtype=np.int64)
    in_lex, in_vec = lpos >= 0, vpos >= 0

    w_lex = spec.lexical_weight
    w_vec = np.full(ids.size, spec.vector_weight, dtype=np.float64)
    if spec.language_aware and vector_trust is not None:
        w_vec = w_vec * np.clip(vector_trust[ids], 0.0, 1.0)
    # A weighted mean over the channels, per chunk: a chunk whose vector evidence is not trusted
    # is scored on BM25 alone, not penalised against chunks that get both channels' votes.
    total = np.maximum(w_lex + w_vec, 1e-300)

    if spec.method == "rrf":
        lex_part = np.where(in_lex, 1.0 / (spec.k_rrf + lpos + 1), 0.0)
        vec_part = np.where(in_vec, 1.0 / (spec.k_rrf + vpos + 1), 0.0)
        # clipped: rank 1 in both channels is 1.0 exactly, not 1.0000000000000002 from rounding
        score = np.minimum((w_lex * lex_part + w_vec * vec_part) / (total / (spec.k_rrf + 1)), 1.0)
    else:
        normalise = _minmax if spec.method == "minmax" else _zscore
        lex_norm, lex_floor = normalise(lex_scores)
        vec_norm, vec_floor = normalise(vec_scores)
        lex_part = np.where(in_lex, lex_norm[np.maximum(lpos, 0)] if lex_norm.size else 0.0, lex_floor)
        vec_part = np.where(in_vec, vec_norm[np.maximum(vpos, 0)] if vec_norm.size else 0.0, vec_floor)
        score = (w_lex * lex_part + w_vec * vec_part) / total

    # A chunk only the vector channel returned, where that channel is not trusted (or weighs
    # nothing), has no evidence at all: it is not a result, as BM25 returns no non-matching chunk.
    evidenced = in_lex | (in_vec & (w_vec > 0))
    absent = np.iinfo(np.int64).max // 4  # sorts after every real rank
    lex_rank = np.where(in_lex, lpos + 1, absent)
    vec_rank = np.where(in_vec, vpos + 1, absent)
    best_rank = np.minimum(lex_rank, vec_rank)
    # np.lexsort: last key is primary.
    order = np.lexsort((ids, (~in_lex).astype(np.int64), best_rank, -score))
    order = order[evidenced[order]][:k]
    out = []
    for pos in order:
        lp, vp = int(lpos[pos]), int(vpos[pos])
        out.append(
            Fused(
                index=int(ids[pos]),
                score=float(score[pos]),
                lexical_score=float(lex_scores[lp]) if lp >= 0 else None,
                lexical_rank=lp + 1 if lp >= 0 else None,
                vector_score=float(vec_scores[vp]) if vp >= 0 else None,
                vector_rank=vp + 1 if vp >= 0 else None,
            )
        )
    return out


def rrf_fuse(
    lexical: list[tuple[int, float]],
    vector: list[tuple[int, float]],
    k: int,
    k_rrf: int = RRF_K,
) -> list[Fused]:
    """Plain, equally weighted reciprocal-rank fusion: :func:`fuse` with ``FusionSpec(k_rrf=k_rrf)``.

    Edge cases: ``k_rrf < 1`` raises ``ValueError``; both lists empty → ``[]``.
    """
    return fuse(lexical, vector, k, FusionSpec(method="rrf", k_rrf=k_rrf))


def _minmax(scores: np.ndarray) -> tuple[np.ndarray, float]:
    """Scores mapped to [0, 1] over the list (all 1 when they are equal); a missing chunk gets 0."""
    if scores.size == 0:
        return scores, 0.0
    low, high = float(scores.min()), float(scores.max())
    if high - low <= 0:
        return np.ones_like(scores), 0.0
    return (scores - low) / (high - low), 0.0


def _zscore(scores: np.ndarray) -> tuple[np.ndarray, float]:
    """Scores standardised over the list (all 0 when equal); a missing chunk gets the lowest z."""
    if scores.size == 0:
        return scores, 0.0
    std = float(scores.std())
    if std <= 0:
        return np.zeros_like(scores), 0.0
    z = (scores - float(scores.mean())) / std
    return z, float(z.min())
