"""equi_join: the NumPy path for small inputs and Acero's hash join give the same pairs, in the same
order, as a brute-force comparison of every (left, right) pair — nulls never join, chunked columns,
string, large_string and integer keys, one to three key columns."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from kebab_eval_pipeline.metrics import columns
from kebab_eval_pipeline.metrics.columns import equi_join


def _column(rng: np.random.Generator, n: int, kind: str, chunked: bool) -> pa.Array | pa.ChunkedArray:
    values = rng.integers(0, 4, n)
    null = rng.random(n) < 0.15
    if kind == "int":
        arr = pa.array(values, type=pa.int64(), mask=null)
    else:
        arr = pa.array([None if z else f"v{v}" for v, z in zip(values, null, strict=True)], type=kind)
    if chunked and n > 1:
        return pa.chunked_array([arr[: n // 2], arr[n // 2 :]])
    return arr


def _brute(left: list, right: list) -> tuple[np.ndarray, np.ndarray]:
    lv = list(zip(*(c.to_pylist() for c in left), strict=True))
    rv = list(zip(*(c.to_pylist() for c in right), strict=True))
    pairs = [(i, j) for i, a in enumerate(lv) for j, b in enumerate(rv) if None not in a and a == b]
    return np.array([p[0] for p in pairs], np.int64), np.array([p[1] for p in pairs], np.int64)


def test_small_and_acero_joins_equal_brute_force(monkeypatch) -> None:
    total = 0
    for seed in range(40):
        rng = np.random.default_rng(seed)
        n_keys = int(rng.integers(1, 4))
        kinds = [str(rng.choice(["int", "string", "large_string"])) for _ in range(n_keys)]
        n_left, n_right = int(rng.integers(1, 60)), int(rng.integers(1, 25))
        left = [_column(rng, n_left, k, bool(rng.integers(2))) for k in kinds]
        right = [_column(rng, n_right, k, bool(rng.integers(2))) for k in kinds]
        want_i, want_j = _brute(left, right)
        total += len(want_i)
        keys = [columns._join_key(c) for c in left], [columns._join_key(c) for c in right]
        assert columns._small_join(*keys) is not None, seed
        for threshold in (columns._SMALL_JOIN, 0):  # the NumPy path, then Acero's hash join
            monkeypatch.setattr(columns, "_SMALL_JOIN", threshold)
            got_i, got_j = equi_join(left, right)
            np.testing.assert_array_equal(got_i, want_i, err_msg=f"seed {seed}, threshold {threshold}")
            np.testing.assert_array_equal(got_j, want_j, err_msg=f"seed {seed}, threshold {threshold}")
            assert got_i.dtype == got_j.dtype == np.int64
        monkeypatch.undo()
    assert total > 300  # the cases do find pairs (and nulls, which never join)


def test_mixed_key_types_fall_back_to_acero() -> None:
    left = [pa.array(["a", "b"], pa.string())]
    right = [pa.array(["b", "a", "b"], pa.large_string())]
    assert columns._small_join(left, [pa.array([1, 2, 3])]) is None
    i, j = equi_join(left, right)
    assert i.tolist() == [0, 1, 1] and j.tolist() == [1, 0, 2]
