"""Paired significance tests over per-query scores of two runs (SPEC §8, used by §7 regression gates).

Two runs of the same golden set each have a ``query_scores`` table (one row per query, see
:func:`~kebab_eval_pipeline.metrics.aggregate.build_query_scores`). Most aggregate metrics are the
mean of one per-query column over the queries where it is defined, so a difference between two
runs can be tested *paired*, query by query:

Which test applies is the metric catalogue's ``test`` (:mod:`kebab_eval_pipeline.metrics.catalogue`):

- **binary** metrics (``hit@k``, ``recall_any@k``, ``recall_all@k``, ``scope_miss_rate``, every
  answer metric) — exact McNemar: the two-sided exact binomial (sign) test at ½ on the discordant
  pairs, :func:`sign_test_p` (equal to ``scipy.stats.binomtest(n01, n01 + n10, 0.5)``). (This is
  also exactly the sign-flip randomization test on differences in {−1, 0, 1}.)
- **graded** metrics (``mrr``, ``recall@k``, ``doc_recall@k``, ``precision@k``, ``ndcg@k``) — paired
  randomization (sign-flip) test of the mean difference, two-sided; exact enumeration of every sign
  vector when ``2**m <= n_resamples`` (``m`` non-zero differences, as ``scipy.stats.permutation_test`` does),
  Monte Carlo otherwise, with p = (#{|T*| ≥ |T|} + 1) / (n_resamples + 1).
- the CI of the mean difference (b − a) is, for both, a paired bootstrap percentile interval.

Every random draw comes from ``numpy.random.default_rng`` seeded by ``seed``: the same inputs and
seed give identical results, and results do not depend on the order of the pairs.

Cost (R resamples, n pairs, m non-zero differences, U distinct values): the sign flips cost
O(R·U) when U is small (per-value Binomial counts) else O(R·m/8) (byte look-up tables); the
bootstrap O(R·U) (Multinomial counts) else O(R·m) index draws — the one expensive case is a
graded metric whose differences are nearly all distinct (e.g. ``ndcg@k`` on a huge set). Memory
is bounded by fixed chunk sizes whatever n and R.

Metrics that are not per-query means (counts, group consistency, operational rates, latency
percentiles, suite time) are reported as not testable — ``p_value`` null with the catalogue's reason.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from kebab_eval_pipeline.compare.paired_score import difference_sums
from kebab_eval_pipeline.metrics import catalogue
from kebab_eval_pipeline.metrics.columns import float_column

__all__ = [
    "SIGNIFICANCE_COLUMNS",
    "TEST_MCNEMAR",
    "TEST_RANDOMIZATION",
    "PairedTest",
    "binary_test",
    "bootstrap_ci",
    "compare_query_scores",
    "paired_test",
    "sign_test_p",
]

TEST_MCNEMAR = "mcnemar_exact"
TEST_RANDOMIZATION = "randomization"

#: Columns (and dtypes) of :func:`compare_query_scores`; floats are NaN where null.
SIGNIFICANCE_COLUMNS: dict[str, str] = {
    "metric": "string",
    "column": "string",
    "n": "Int64",
    "mean_a": "float64",
    "mean_b": "float64",
    "delta": "float64",
    "p_value": "float64",
    "ci_low": "float64",
    "ci_high": "float64",
    "se": "float64",
    "gain_sum": "float64",
    "loss_sum": "float64",
    "square_sum": "float64",
    "test": "string",
    "note": "string",
}

# Work sizes of the vectorised resampling loops: enough per NumPy call to amortise its overhead,
# small enough (a few MB of temporaries) to stay cache-friendly and bound memory at any n.
_CHUNK_ELEMENTS = 1 << 19
# Sign-flip lookup tables: 64 groups × 256 float64 = 128 kB per block and ~1.2 MB of temporaries per
# step stay in L2; measured 4-6× faster than 512-group blocks at 100k differences.
_LUT_GROUPS = 64
_LUT_CHUNK_ELEMENTS = 1 << 17
# Per-distinct-value draws (one Binomial/Multinomial cell, ~100 ns) replace per-value work (a sign
# flip ~1 ns, a bootstrap index ~6 ns) when #distinct × factor ≤ #values.
_GROUPED_FLIP_FACTOR = 128
_GROUPED_BOOT_FACTOR = 16


@dataclass(frozen=True)
class PairedTest:
    """Result of :func:`paired_test`. Every float is ``None`` when no complete pair exists (``n == 0``).

    ``delta`` is the mean of the per-pair differences b − a (``mean_b − mean_a`` up to rounding);
    ``ci_low``/``ci_high`` bound it; ``test`` is ``"mcnemar_exact"``, ``"randomization"`` or
    ``None``; ``note`` says what was dropped and how p and the CI were computed.
    """

    n: int
    mean_a: float | None
    mean_b: float | None
    delta: float | None
    p_value: float | None
    ci_low: float | None
    ci_high: float | None
    test: str | None
    note: str
    se: float | None = None  # standard error of the mean difference, sd(b − a)/√n (None when n < 2)
    # Σ max(d, 0), Σ max(−d, 0), Σ d² of d = b − a: the score bounds of margin decisions
    # (:mod:`.paired_score`); None when n = 0 or a score lies outside [0, 1].
    gain_sum: float | None = None
    loss_sum: float | None = None
    square_sum: float | None = None


def sign_test_p(k: int, n: int) -> float:
    """Two-sided p-value of the exact binomial (sign) test of ``k`` successes in ``n`` trials at
    probability ½ — exact McNemar when ``k`` and ``n − k`` are the two kinds of discordant pairs.

    The outcomes at most as likely as ``k`` are the two tails beyond ``j = min(k, n − k)``:
    p = P(X ≤ j) + P(X ≥ n − j), capped at 1; ``k = n/2`` (a tie) gives 1, and so does ``n = 0``
    (no discordant pair: nothing speaks for either run), where ``scipy.stats.binomtest`` refuses
    ``n < 1``. Each tail is the regularized incomplete beta function that ``scipy.stats.binom``
    evaluates (both are Boost's ``ibeta``), summed as ``binomtest(k, n, 0.5)`` sums them, so the
    two agree to ~1e-14 relative (≤ 1e-12 up to millions of pairs; the tests check random
    inputs) — without importing scipy.stats (0.5–0.8 s; scipy.special takes ~0.1 s). Raises
    ``ValueError`` unless ``0 <= k <= n``."""
    k, n = int(k), int(n)
    if not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    if 2 * k == n:  # n = 0 included
        return 1.0
    from scipy.special import betainc, betaincc  # imported by the first binary test only

    j = min(k, n - k)
    # P(X <= j) = I_{1/2}^c(j + 1, n − j) and P(X >= n − j) = I_{1/2}(n − j, j + 1): equal by
    # symmetry, but scipy.stats computes one of each, so this does too (same rounding).
    lower, upper = float(betaincc(j + 1, n - j, 0.5)), float(betainc(n - j, j + 1, 0.5))
    # Far out (p below ~1e-250) the second form underflows to 0 before the first: the tails are
    # equal, so the surviving one counts twice (else p came out half its value there).
    return min(1.0, lower + (upper if upper > 0.0 else lower))


def binary_test(metric: str, *values: np.ndarray) -> bool:
    """Whether ``metric`` is tested by exact McNemar on these per-query values: a catalogue binary
    metric whose every non-NaN value is 0 or 1. A repeated run's per-query means over repeats
    (0.5, 0.75, …) are fractions and go to the randomization test. The one decision every paired
    test of a metric makes (run-level, per slice, per ranked pair)."""
    return catalogue.test_kind(metric) == "binary" and all(
        np.isin(v[~np.isnan(v)], (0.0, 1.0)).all() for v in values
    )


def paired_test(
    a: np.ndarray,
    b: np.ndarray,
    *,
    binary: bool | None = None,
    seed: int = 0,
    n_resamples: int = 10_000,
    confidence: float = 0.95,
    ci: bool = True,
) -> PairedTest:
    """Paired two-sided test of ``mean(b − a) = 0`` over per-query scores of two runs.

    Inputs: ``a``, ``b`` — 1-D, same length, element ``i`` of both is the same query; NaN (or
    ``None``) marks a score that is not defined for that query. ``binary`` — ``True`` for 0/1 scores
    (exact McNemar), ``False`` for graded ones (sign-flip randomization), ``None`` to infer (every
    value in {0, 1} ⇒ binary). ``seed`` fixes every random draw; ``n_resamples`` is the Monte
    Carlo size of the randomization test and of the bootstrap; ``confidence`` the CI level;
    ``ci=False`` skips the bootstrap (CI fields ``None``: per-slice tests report p only).

    Output: a :class:`PairedTest`. Edge cases:

    - pairs where either side is NaN are dropped (counted in ``note``);
    - no complete pair ⇒ ``n = 0`` and every other field ``None``;
    - no discordant pair (binary) or all differences zero (continuous) ⇒ ``p = 1.0``, and when all
      differences are zero the CI is ``[0, 0]``;
    - the Monte Carlo p-value is never below ``1 / (n_resamples + 1)``;
    - the CI is a bootstrap percentile interval; with very few discordant/non-zero pairs it is
      narrow and can exclude 0 while the (exact) p-value is large — decide on ``p_value``.

    Raises ``ValueError`` on mismatched shapes, infinite values, ``binary=True`` with values
    outside {0, 1}, ``n_resamples < 1`` or ``confidence`` outside (0, 1).
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.ndim != 1 or a.shape != b.shape:
        raise ValueError(f"a and b must be 1-D of the same length, got shapes {a.shape} and {b.shape}")
    if int(n_resamples) != n_resamples or n_resamples < 1:
        raise ValueError(f"n_resamples must be a positive integer, got {n_resamples!r}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    n_resamples = int(n_resamples)
    keep = ~(np.isnan(a) | np.isnan(b))
    a, b = a[keep], b[keep]
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("scores must be finite (or NaN for 'not defined')")
    notes: list[str] = []
    n_dropped = int(keep.size - keep.sum())
    if n_dropped:
        notes.append(f"dropped {n_dropped} pair(s) with a NaN side")
    n = int(a.size)
    if n == 0:
        notes.append("no complete pair: nothing to test")
        return PairedTest(0, None, None, None, None, None, None, None, "; ".join(notes), None)

    zero_one = bool(np.isin(a, (0.0, 1.0)).all() and np.isin(b, (0.0, 1.0)).all())
    if binary is None:
        binary = zero_one
    elif binary and not zero_one:
        raise ValueError("binary=True needs every score in {0, 1}")
    # Sorted so that results do not depend on the order of the pairs (only the multiset matters).
    d = np.sort(b - a)
    # Independent streams, so the CI does not depend on how many draws the test consumed.
    rng_test, rng_ci = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(2))

    if binary:
        n01, n10 = int((d > 0).sum()), int((d < 0).sum())
        p = sign_test_p(n01, n01 + n10)
        test = TEST_MCNEMAR
        notes.append(f"exact McNemar on {n01 + n10} discordant pair(s): {n01} 0→1, {n10} 1→0")
    else:
        p, how = _sign_flip_p(d, n_resamples, rng_test)
        test = TEST_RANDOMIZATION
        notes.append(how)
    sums = difference_sums(d) if float(np.abs(d).max()) <= 1.0 + 1e-12 else (None, None, None)
    low = high = None
    if ci:
        low, high = bootstrap_ci(d, n_resamples, confidence, rng_ci)
        notes.append(f"CI: paired bootstrap percentile ({n_resamples} resamples, seed {seed})")
    return PairedTest(
        n=n,
        # Means of sorted values: bit-identical whatever the order of the pairs.
        mean_a=float(np.sort(a).mean()),
        mean_b=float(np.sort(b).mean()),
        delta=float(d.mean()),
        p_value=min(1.0, p),
        ci_low=low,
        ci_high=high,
        test=test,
        note="; ".join(notes),
        # The minimum detectable effect (compare/power.py) and the t fallback bound need it.
        se=float(np.std(d, ddof=1) / math.sqrt(n)) if n > 1 else None,
        gain_sum=sums[0],
        loss_sum=sums[1],
        square_sum=sums[2],
    )


def compare_query_scores(
    scores_a: pd.DataFrame,
    scores_b: pd.DataFrame,
    metrics: list[str],
    *,
    seed: int = 0,
    n_resamples: int = 10_000,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Paired significance of b − a for each aggregate metric in ``metrics``, one row each, in order.

    Inputs: two ``query_scores`` tables (baseline ``a``, candidate ``b``) with unique, non-null
    ``query_id``; aggregate metric names (see :func:`~kebab_eval_pipeline.metrics.aggregate.metric_names`).

    Rows are inner-joined on ``query_id``: queries in only one run are excluded and counted in
    every testable row's ``note`` (and in ``attrs`` ``n_joined``/``n_only_a``/``n_only_b``). A
    metric is tested with :func:`paired_test` on its per-query column (:func:`metric_column`) over
    the joined queries where *both* runs define it; the catalogue's binary metrics always use exact
    McNemar, graded ones the randomization test (chosen by metric, not by the data, so the test
    name is stable).

    Output columns :data:`SIGNIFICANCE_COLUMNS`: ``metric, column, n, mean_a, mean_b, delta,
    p_value, ci_low, ci_high, test, note``. ``mean_a``/``mean_b`` are means over the pairs used,
    so they can differ from each run's stored aggregate when the golden set drifted or when a
    run-dependent denominator (e.g. ``chr``: answered queries) differs between the runs. A metric
    that is not a per-query mean, or whose column is missing from either table, has null ``n``,
    statistics and ``test`` and the reason in ``note``.
    """
    ids_a, ids_b = _query_ids(scores_a, "a"), _query_ids(scores_b, "b")
    common = ids_a.intersection(ids_b).sort_values()
    pos_a, pos_b = ids_a.get_indexer(common), ids_b.get_indexer(common)
    n_only_a, n_only_b = len(ids_a) - len(common), len(ids_b) - len(common)
    drift = (
        f"{n_only_a} query(ies) only in a and {n_only_b} only in b excluded" if n_only_a or n_only_b else ""
    )
    rows: list[dict] = []
    for name in metrics:
        column = catalogue.metric_column(name)
        row: dict = {"metric": name, "column": column}
        missing = [r for r, qs in (("a", scores_a), ("b", scores_b)) if column and column not in qs.columns]
        if column is None:
            row["note"] = catalogue.untestable_reason(name)
        elif missing:
            row["note"] = f"column {column!r} missing in run {' and '.join(missing)}"
        else:
            x_a, x_b = float_column(scores_a, column)[pos_a], float_column(scores_b, column)[pos_b]
            binary = binary_test(name, x_a, x_b)
            result = paired_test(
                x_a,
                x_b,
                binary=binary,
                seed=seed,
                n_resamples=n_resamples,
                confidence=confidence,
            )
            row.update({k: getattr(result, k) for k in SIGNIFICANCE_COLUMNS if k not in ("metric", "column")})
            row["note"] = "; ".join(x for x in (drift, result.note) if x)
        rows.append(row)
    # Each column built with its dtype (null where a row lacks it): a frame of object columns
    # cast afterwards cost ~5 ms a comparison, most of this function's time outside the tests.
    frame = pd.DataFrame(
        {
            c: np.array([_nan_if_none(r.get(c)) for r in rows], dtype=np.float64)
            if t == "float64"
            else pd.array([r.get(c) for r in rows], dtype=t)
            for c, t in SIGNIFICANCE_COLUMNS.items()
        },
        index=pd.RangeIndex(len(rows)),
    )
    frame.attrs.update({"n_joined": len(common), "n_only_a": n_only_a, "n_only_b": n_only_b})
    return frame


# --------------------------------------------------------------------------------------------


def _nan_if_none(value: float | None) -> float:
    return np.nan if value is None else value


def _query_ids(qs: pd.DataFrame, run: str) -> pd.Index:
    if "query_id" not in qs.columns:
        raise ValueError(f"query_scores of run {run} has no query_id column")
    ids = qs["query_id"]
    if ids.isna().any():
        raise ValueError(f"query_scores of run {run} has null query ids")
    index = pd.Index(ids.astype(str).to_numpy(dtype=object))
    if index.has_duplicates:
        dups = sorted(set(index[index.duplicated()]))[:5]
        raise ValueError(f"query_scores of run {run} has duplicate query ids: {', '.join(dups)}")
    return index


def _sign_flip_p(d: np.ndarray, n_resamples: int, rng: np.random.Generator) -> tuple[float, str]:
    """Two-sided p of the paired randomization test: T = Σ dᵢ against T* = Σ sᵢ|dᵢ|, sᵢ = ±1 fair.

    Zero differences add 0 to T* whatever their sign, so only the ``m`` non-zero ones are flipped
    (exact, and the cost is O(m) not O(n)). Comparing sums equals comparing means (same n).
    """
    mag = np.abs(d[d != 0.0])
    m = int(mag.size)
    if m == 0:
        return 1.0, "all differences are zero"
    t_obs = abs(float(d.sum()))
    # Sums of the same terms in another order differ by rounding; without a tolerance the
    # observed configuration (and its exact ties) could count as "less extreme" than itself.
    threshold = t_obs - 1e-10 * float(mag.sum())
    if m < 63 and 2**m <= n_resamples:
        return _exact_sign_flip(mag, threshold), f"randomization exact over all 2^{m} sign flips"
    values, counts = np.unique(mag, return_counts=True)
    if values.size * _GROUPED_FLIP_FACTOR <= m:
        null = _grouped_sign_flips(values, counts, n_resamples, rng)
    else:
        null = _lut_sign_flips(mag, n_resamples, rng)
    hits = int(np.count_nonzero(np.abs(null) >= threshold))
    return (hits + 1) / (n_resamples + 1), (
        f"randomization Monte Carlo ({n_resamples} sign-flip resamples of {m} non-zero difference(s))"
    )


def _exact_sign_flip(mag: np.ndarray, threshold: float) -> float:
    """Share of all 2^m sign vectors whose |Σ sᵢ|dᵢ|| reaches the threshold (chunked)."""
    m = mag.size
    total = 1 << m
    shifts = np.arange(m, dtype=np.int64)
    hits = 0
    step = max(1, _CHUNK_ELEMENTS // m)
    for start in range(0, total, step):
        codes = np.arange(start, min(total, start + step), dtype=np.int64)
        signs = 1.0 - 2.0 * ((codes[:, None] >> shifts) & 1)
        hits += int(np.count_nonzero(np.abs(signs @ mag) >= threshold))
    return hits / total


def _grouped_sign_flips(
    values: np.ndarray, counts: np.ndarray, n_resamples: int, rng: np.random.Generator
) -> np.ndarray:
    """T* when few distinct magnitudes: of the c_v differences of size v, Binomial(c_v, ½) are +v.

    Same distribution as flipping each sign, at O(#distinct) per resample — graded metrics (mrr,
    precision@k, recall@k) take few distinct values, so this is the usual path.
    """
    out = np.empty(n_resamples)
    step = max(1, _CHUNK_ELEMENTS // values.size)
    for start in range(0, n_resamples, step):
        size = min(step, n_resamples - start)
        plus = rng.binomial(counts, 0.5, size=(size, values.size))
        out[start : start + size] = (2 * plus - counts) @ values
    return out


def _lut_sign_flips(mag: np.ndarray, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """T* for many distinct magnitudes: one random byte signs 8 differences at once.

    The magnitudes are cut into groups of 8; a 256-entry table per group holds Σ sᵢ|dᵢ| for every
    sign pattern, so a resample is a sum of m/8 table look-ups. Blocks of groups keep the table
    slice in cache and memory bounded.
    """
    groups = math.ceil(mag.size / 8)
    padded = np.zeros(groups * 8)
    padded[: mag.size] = mag
    padded = padded.reshape(groups, 8)
    # patterns[byte, j] = ±1: the sign of the group's j-th difference under that random byte.
    patterns = 2.0 * np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1) - 1.0
    out = np.zeros(n_resamples)
    for g0 in range(0, groups, _LUT_GROUPS):
        block = padded[g0 : g0 + _LUT_GROUPS]
        table = (block @ patterns.T).ravel()
        offsets = np.arange(block.shape[0], dtype=np.intp) * 256
        step = max(1, _LUT_CHUNK_ELEMENTS // block.shape[0])
        for start in range(0, n_resamples, step):
            size = min(step, n_resamples - start)
            draws = np.frombuffer(rng.bytes(size * block.shape[0]), dtype=np.uint8)
            out[start : start + size] += table[draws.reshape(size, -1) + offsets].sum(axis=1)
    return out


def bootstrap_ci(
    d: np.ndarray, n_resamples: int, confidence: float, rng: np.random.Generator
) -> tuple[float, float]:
    """Percentile interval of the mean of ``d`` resampled with replacement (the paired bootstrap).

    Few distinct differences (binary metrics: {−1, 0, 1}; most graded ones): a resample is fully
    described by how often each value is drawn, Multinomial(n, counts/n) — same distribution,
    O(#distinct) per resample. Otherwise indices are drawn; draws that land on a zero difference
    add nothing, so only the number of them (Binomial) is drawn, not the draws themselves.
    """
    n = d.size
    values, counts = np.unique(d, return_counts=True)
    if values.size == 1:  # every resample has the same mean
        return float(values[0]), float(values[0])
    sums = np.empty(n_resamples)
    if values.size * _GROUPED_BOOT_FACTOR <= n:
        step = max(1, _CHUNK_ELEMENTS // values.size)
        for start in range(0, n_resamples, step):
            size = min(step, n_resamples - start)
            sums[start : start + size] = rng.multinomial(n, counts / n, size=size) @ values
    else:
        nonzero = d[d != 0.0]
        m = nonzero.size
        step = max(1, _CHUNK_ELEMENTS // m)
        for start in range(0, n_resamples, step):
            size = min(step, n_resamples - start)
            k = np.full(size, n) if m == n else rng.binomial(n, m / n, size=size)
            draws = nonzero[rng.integers(0, m, size=int(k.sum()))]
            chunk = np.zeros(size)
            some = k > 0
            if draws.size:
                ends = np.cumsum(k)
                chunk[some] = np.add.reduceat(draws, (ends - k)[some])
            sums[start : start + size] = chunk
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(sums / n, [alpha, 1.0 - alpha])
    return float(low), float(high)
