"""Fusion methods beyond plain RRF: weights, min-max and z-score CombSUM, language-aware trust.

Expected scores are computed by hand from the definitions in reference/fusion.py, and the
invariants are checked on random rankings against a direct (per-chunk, loop) re-computation.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kebab_eval_pipeline.reference.fusion import FusionSpec, fuse
from kebab_eval_pipeline.reference.languages import covered_share, covered_shares, vector_trust

LEX = [(10, 9.0), (20, 6.0), (30, 3.0)]  # BM25 scores
VEC = [(30, 0.8), (40, 0.6), (10, 0.4)]  # cosines


def scores(fused) -> dict[int, float]:
    return {f.index: f.score for f in fused}


def test_weighted_rrf_by_hand() -> None:
    spec = FusionSpec("rrf", lexical_weight=1.0, vector_weight=0.5, k_rrf=60)
    norm = 1.5 / 61
    expected = {
        10: (1 / 61 + 0.5 / 63) / norm,
        20: (1 / 62) / norm,
        30: (1 / 63 + 0.5 / 61) / norm,
        40: (0.5 / 62) / norm,
    }
    fused = fuse(LEX, VEC, k=10, spec=spec)
    assert scores(fused) == pytest.approx(expected, abs=1e-15)
    assert [f.index for f in fused] == [10, 30, 20, 40]
    assert spec.score_kind == "rrf" and spec.version == "rrf:k=60:w=1/0.5:depth=100"


def test_minmax_combsum_by_hand() -> None:
    # lexical 9,6,3 → 1, .5, 0; vector .8,.6,.4 → 1, .5, 0; missing → 0; divided by w sum 2
    fused = fuse(LEX, VEC, k=10, spec=FusionSpec("minmax"))
    assert scores(fused) == pytest.approx({10: 0.5, 20: 0.25, 30: 0.5, 40: 0.25}, abs=1e-15)
    # 10 and 30 tie: same best rank (1), 10 has a lexical rank and 30 too → chunk order;
    # 20 and 40 tie: best rank 2 each, 20 is lexical → first
    assert [f.index for f in fused] == [10, 30, 20, 40]
    assert FusionSpec("minmax").score_kind == "other"


def test_zscore_combsum_by_hand() -> None:
    z = math.sqrt(1.5)  # scores 9,6,3 (and .8,.6,.4) have population std sqrt(6) (sqrt(.02666)) → z ±1.2247
    fused = fuse(LEX, VEC, k=10, spec=FusionSpec("zscore"))
    # missing from a channel → that channel's lowest z (-z)
    expected = {10: (z + -z) / 2, 20: (0 + -z) / 2, 30: (-z + z) / 2, 40: (-z + 0) / 2}
    assert scores(fused) == pytest.approx(expected, abs=1e-12)


def test_constant_channel_counts_only_presence() -> None:
    fused = fuse([(1, 2.0), (2, 2.0)], [(3, 0.5)], k=10, spec=FusionSpec("minmax"))
    assert scores(fused) == pytest.approx({1: 0.5, 2: 0.5, 3: 0.5})
    fused = fuse([(1, 2.0), (2, 2.0)], [], k=10, spec=FusionSpec("zscore"))
    assert scores(fused) == {1: 0.0, 2: 0.0}


def test_language_aware_trust_scales_the_vector_weight_per_chunk() -> None:
    trust = np.zeros(50)
    trust[40] = 1.0  # only chunk 40 is in a script the model covers
    spec = FusionSpec("rrf", language_aware=True)
    fused = scores(fuse(LEX, VEC, k=10, spec=spec, vector_trust=trust))
    # untrusted chunks are scored on BM25 alone (their own weight sum is 1); chunk 40 on both
    assert fused == pytest.approx({10: 1.0, 20: 61 / 62, 30: 61 / 63, 40: (1 / 62) / (2 / 61)})
    # a chunk only the vector channel found, where it is not trusted, has no evidence: left out
    trust[40] = 0.0
    assert set(scores(fuse(LEX, VEC, k=10, spec=spec, vector_trust=trust))) == {10, 20, 30}
    assert set(scores(fuse(LEX, VEC, k=10, spec=FusionSpec("rrf", vector_weight=0.0)))) == {10, 20, 30}
    norm = 2 / 61
    # without language_aware the trust array is ignored
    assert scores(fuse(LEX, VEC, k=10, spec=FusionSpec("rrf"), vector_trust=trust))[30] == pytest.approx(
        (1 / 63 + 1 / 61) / norm
    )


def test_bad_specs_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown fusion method"):
        FusionSpec("combmnz")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not both 0"):
        FusionSpec(lexical_weight=0, vector_weight=0)
    with pytest.raises(ValueError, match="k_rrf"):
        FusionSpec(k_rrf=0)


def test_covered_share_counts_words_by_script() -> None:
    assert covered_share("score_gate 기본값은", ("latin",)) == pytest.approx(2 / 3)  # score, gate | 기본값은
    assert covered_share("김치를 담그는 법", ("latin",)) == 0.0
    assert covered_share("Bake at 230 degrees", ("latin",)) == 1.0  # 230 is not a word
    assert covered_share("1234 !!", ("latin",)) == 1.0  # no words: nothing outside the model
    assert covered_share("김치", ("*",)) == 1.0
    assert covered_share("Москва", ("latin",)) == 0.0
    assert list(covered_shares(["abc", "가나"], ("latin",))) == [1.0, 0.0]


def test_vector_trust_ramp() -> None:
    chunks = np.array([0.0, 0.5, 0.7, 0.85, 1.0])
    assert vector_trust(1.0, chunks) == pytest.approx([0.0, 0.0, 0.0, 0.5, 1.0])
    # the query's own share caps every chunk's
    assert vector_trust(0.85, chunks) == pytest.approx([0.0, 0.0, 0.0, 0.5, 0.5])
    assert vector_trust(0.6, chunks) == pytest.approx([0.0] * 5)


rankings = st.lists(st.integers(0, 40), unique=True, max_size=30)


@given(
    lex=rankings,
    vec=rankings,
    k=st.integers(1, 50),
    method=st.sampled_from(["rrf", "minmax", "zscore"]),
    w_vec=st.sampled_from([0.0, 0.5, 1.0, 2.0]),
    trust=st.lists(st.floats(0, 1), min_size=41, max_size=41),
)
def test_fusion_matches_a_direct_computation(lex, vec, k, method, w_vec, trust) -> None:
    lexical = [(d, float(100 - 3 * r)) for r, d in enumerate(lex)]
    vector = [(d, 0.9 - r / 50) for r, d in enumerate(vec)]
    spec = FusionSpec(method, vector_weight=w_vec, language_aware=True)
    fused = fuse(lexical, vector, k=k, spec=spec, vector_trust=np.array(trust))

    def norm(channel):
        values = np.array([s for _, s in channel])
        if method == "rrf" or not channel:
            return {}, 0.0
        if method == "minmax":
            lo, hi = values.min(), values.max()
            return {d: (1.0 if hi == lo else (s - lo) / (hi - lo)) for d, s in channel}, 0.0
        std = values.std()
        z = {d: (0.0 if std == 0 else (s - values.mean()) / std) for d, s in channel}
        return z, min(z.values())

    lex_n, lex_floor = norm(lexical)
    vec_n, vec_floor = norm(vector)
    expected = {}
    for d in set(lex) | set(vec):
        wv = w_vec * trust[d]
        if method == "rrf":
            part_l = 1 / (60 + lex.index(d) + 1) if d in lex else 0.0
            part_v = 1 / (60 + vec.index(d) + 1) if d in vec else 0.0
            expected[d] = (part_l + wv * part_v) / ((1 + wv) / 61)
        else:
            expected[d] = (lex_n.get(d, lex_floor) + wv * vec_n.get(d, vec_floor)) / (1 + wv)
    # vector-only chunks without trusted weight are no results
    expected = {d: v for d, v in expected.items() if d in lex or w_vec * trust[d] > 0}
    assert len(fused) == min(k, len(expected))
    for f in fused:
        assert f.score == pytest.approx(expected[f.index], rel=1e-9, abs=1e-12)
    got = [f.score for f in fused]
    assert got == sorted(got, reverse=True)
    # nothing left out scores higher than the last one kept
    if fused and len(expected) > k:
        left = max(v for d, v in expected.items() if d not in {f.index for f in fused})
        assert left <= fused[-1].score + 1e-9


def test_config_defaults_are_the_reference_systems_default_fusion() -> None:
    from kebab_eval_pipeline.reference.fusion import DEFAULT_FUSION
    from kebab_eval_pipeline.systems.kinds.reference import FusionSettings, ReferenceSystemSettings

    assert FusionSettings().spec() == DEFAULT_FUSION
    assert ReferenceSystemSettings().fusion.spec() == DEFAULT_FUSION
    settings = ReferenceSystemSettings.model_validate(
        {"mode": "hybrid", "fusion": {"method": "zscore", "vector_weight": 0.5, "language_aware": True}}
    )
    assert settings.fusion.spec() == FusionSpec("zscore", vector_weight=0.5, language_aware=True)
    with pytest.raises(ValueError, match="cannot both be 0"):
        FusionSettings(lexical_weight=0, vector_weight=0)
    with pytest.raises(ValueError, match="method"):
        FusionSettings.model_validate({"method": "combmnz"})
