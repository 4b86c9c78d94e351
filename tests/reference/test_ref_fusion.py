"""Reciprocal-rank fusion: the SPEC §4.1 formula, its normalisation and its tie rules."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kebab_eval_pipeline.reference.fusion import RRF_K, rrf_fuse


def test_both_channels_rank_one_is_exactly_one() -> None:
    fused = rrf_fuse([(7, 12.5), (3, 9.0)], [(7, 0.91), (4, 0.80)], k=10)
    assert fused[0].index == 7
    assert fused[0].score == 1.0
    assert (fused[0].lexical_rank, fused[0].vector_rank) == (1, 1)
    assert (fused[0].lexical_score, fused[0].vector_score) == (12.5, 0.91)


def test_one_channel_rank_one_only_is_one_half() -> None:
    fused = {f.index: f for f in rrf_fuse([(1, 5.0)], [(2, 0.7)], k=10)}
    assert fused[1].score == 0.5 and fused[2].score == 0.5
    assert fused[1].vector_rank is None and fused[1].vector_score is None
    assert fused[2].lexical_rank is None and fused[2].lexical_score is None


def test_hand_computed_scores_and_order() -> None:
    # chunk 10: lexical 1, vector 3; chunk 20: lexical 2 only; chunk 30: vector 1, lexical 3.
    fused = rrf_fuse([(10, 3.0), (20, 2.0), (30, 1.0)], [(30, 0.9), (40, 0.8), (10, 0.7)], k=10)
    norm = 2 / (RRF_K + 1)
    expected = {
        10: (1 / 61 + 1 / 63) / norm,
        30: (1 / 63 + 1 / 61) / norm,
        40: (1 / 62) / norm,
        20: (1 / 62) / norm,
    }
    assert {f.index: f.score for f in fused} == pytest.approx(expected, abs=1e-15)
    # 10 and 30 tie exactly (ranks 1+3 each): equal best rank 1, both have a lexical rank → chunk order.
    # 40 and 20 tie at rank 2 in one channel: the lexical one (20) goes first.
    assert [f.index for f in fused] == [10, 30, 20, 40]


def test_k_cuts_and_empty_inputs() -> None:
    assert rrf_fuse([], [], k=5) == []
    assert rrf_fuse([(1, 1.0)], [(2, 1.0)], k=0) == []
    assert [f.index for f in rrf_fuse([(1, 1.0), (2, 0.5)], [(3, 1.0)], k=2)] == [1, 3]
    with pytest.raises(ValueError, match="k_rrf"):
        rrf_fuse([(1, 1.0)], [], k=1, k_rrf=0)


rankings = st.lists(st.integers(0, 60), unique=True, max_size=40)


@given(lex=rankings, vec=rankings, k=st.integers(1, 50), k_rrf=st.integers(1, 100))
def test_fusion_invariants(lex: list[int], vec: list[int], k: int, k_rrf: int) -> None:
    lexical = [(doc, float(100 - r)) for r, doc in enumerate(lex)]
    vector = [(doc, 1.0 - r / 100) for r, doc in enumerate(vec)]
    fused = rrf_fuse(lexical, vector, k=k, k_rrf=k_rrf)
    union = set(lex) | set(vec)
    assert len(fused) == min(k, len(union))
    assert len({f.index for f in fused}) == len(fused)
    scores = [f.score for f in fused]
    assert scores == sorted(scores, reverse=True)
    assert all(0.0 < s <= 1.0 for s in scores)
    for f in fused:
        raw = sum(1 / (k_rrf + r) for r in (f.lexical_rank, f.vector_rank) if r is not None)
        assert f.score == pytest.approx(raw * (k_rrf + 1) / 2, rel=1e-12)
        if f.lexical_rank is not None:
            assert lex[f.lexical_rank - 1] == f.index
        if f.vector_rank is not None:
            assert vec[f.vector_rank - 1] == f.index
    # Nothing left out scores higher than the last one kept.
    if fused and len(union) > k:
        kept = {f.index for f in fused}
        best_left = (
            max(sum(1 / (k_rrf + seq.index(d) + 1) for seq in (lex, vec) if d in seq) for d in union - kept)
            * (k_rrf + 1)
            / 2
        )
        assert best_left <= fused[-1].score + 1e-15
