"""Which judged items a person labels, and in what order: a seeded, proportionally stratified design.

The items are a run's judged items of one criterion (each with the judge's score). They are split
into **strata**: the query's slice (its category) × the judge's verdict band (``pass`` for a score
at or above the judge's pass score, ``fail`` below it). The labelling order interleaves the strata
so that **every prefix of it is a proportionally stratified sample**: after the first ``n`` items,
stratum ``h`` holding ``N_h`` of the ``N`` items has ``n·N_h/N`` of them, rounded one way or the
other. A person may stop at any point and the labels so far still represent every slice and both
verdicts in their shares.

How: within a stratum the items are put in a seeded random order (a hash of the seed and the item,
so the order does not depend on how the run listed them and an item keeps its place when others
are added). The strata then take turns by Tijdeman's solution of the "chairman assignment"
problem (1980): with ``H`` strata and ``σ = 1 − 1/(2(H − 1))``, the ``n``-th item comes, among
the strata at least ``1 − σ`` below their share ``n·N_h/N``, from the one whose deadline
``(taken_h + σ)/share_h`` comes first (ties to a seeded order of the strata). That keeps every
stratum within ``σ`` (< 1) of its share at every prefix; the simpler "largest deficit first" rule
does not (a fresh-clone run's hypothesis draw found it 1.03 items off at 5 strata), and the tests
check the bound on random designs.

Why proportional: every item has (up to the rounding) the same chance ``n/N`` of being labelled,
so the labelled items are a simple random sample as far as a mean is concerned: the corrected
estimates (prediction-powered inference) and the agreement figures apply to them unweighted, and
stratifying can only lower their variance.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd

#: The columns of :func:`labelling_order`'s table, after the items' own.
ORDER_COLUMNS = ("stratum", "position")


def _unit(seed: int, key: str) -> float:
    """A seeded number in [0, 1) from a hash of ``key`` (one stratum's tie order)."""
    digest = hashlib.sha256(f"{seed}:{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def _draws(keys: pd.Series, seed: int) -> np.ndarray:
    """A seeded number in [0, 1) per key, vectorised (pandas' keyed SipHash of each key, the key
    derived from the seed): the same key and seed give the same number on every machine."""
    hash_key = hashlib.sha256(f"seed:{seed}".encode()).hexdigest()[:16]
    hashed = pd.util.hash_pandas_object(keys.astype(str), index=False, hash_key=hash_key)
    return hashed.to_numpy(dtype=np.uint64) / 2.0**64


def labelling_order(
    items: pd.DataFrame, pass_score: float, seed: int = 0, limit: int | None = None
) -> pd.DataFrame:
    """``items`` (columns ``item_hash``, ``slice`` and ``judge_score``; one row per item) in
    labelling order (module doc), with ``stratum`` (``"<slice> / pass"`` or ``"<slice> / fail"``)
    and ``position`` (0, 1, 2 …). Only the first ``limit`` items when given. Items without a judge
    score are left out (there is no judge verdict to calibrate). The same items and seed give the
    same order.

    Items with a ``band`` column instead (text; no ``judge_score`` needed) are stratified by slice ×
    that band: a design over units that have no judge verdict yet (the queries whose unjudged hits
    a person labels for relevance, banded by whether their relevant hit was found)."""
    if "band" in items.columns:
        scored = items[items["band"].notna()].drop_duplicates("item_hash").copy()
    else:
        scored = items[items["judge_score"].notna()].drop_duplicates("item_hash").copy()
    if scored.empty:
        return scored.assign(
            stratum=pd.Series([], dtype="string"), position=pd.Series([], dtype="int64")
        ).reset_index(drop=True)
    if "band" in scored.columns:
        band = scored["band"].astype(str).to_numpy()
    else:
        band = np.where(scored["judge_score"].to_numpy(dtype=float) >= pass_score, "pass", "fail")
    scored["stratum"] = pd.array(scored["slice"].astype(str) + " / " + band, dtype="string")
    scored["_draw"] = _draws(scored["item_hash"], seed)
    scored = scored.sort_values(["stratum", "_draw", "item_hash"], kind="stable").reset_index(drop=True)
    names = list(dict.fromkeys(scored["stratum"]))
    names.sort(key=lambda s: _unit(seed, f"stratum:{s}"))  # the strata's tie order, seeded
    groups = scored.groupby("stratum", observed=True, sort=False).indices
    starts = [groups[s] for s in names]  # each stratum's rows, in its seeded order
    size = np.array([len(rows) for rows in starts], dtype=float)
    share = size / size.sum()
    taken = np.zeros(len(names), dtype=np.int64)
    total = int(size.sum()) if limit is None else min(int(size.sum()), max(limit, 0))
    sigma = 1.0 - 1.0 / (2 * (len(names) - 1)) if len(names) > 1 else 0.0
    picked = np.empty(total, dtype=np.int64)
    for n in range(total):
        # Tijdeman: among the strata far enough below their share, the earliest deadline first
        eligible = (taken < size) & ((n + 1) * share - taken >= 1.0 - sigma - 1e-9)
        deadline = np.where(eligible, (taken + sigma) / share, np.inf)
        h = int(np.argmin(deadline))  # first minimum: the seeded tie order
        picked[n] = starts[h][taken[h]]
        taken[h] += 1
    ordered = scored.iloc[picked].drop(columns="_draw").reset_index(drop=True)
    return ordered.assign(position=np.arange(total, dtype=np.int64))
