"""The judge's own noise floor: the same item judged twice, its evidence in another order.

With ``judge.self_consistency: true`` every judged item with two context passages or more is judged
a second time by the main judge with the passages reordered (a seeded permutation that moves at
least one; each passage keeps its ``ref``, so the answer's citations still point at it). Nothing a
careful reader would notice changed, so a judge worth its place gives the same verdict. The run
reports per criterion ``judge_<criterion>_flip_rate`` — the share of items whose verdict (pass at
3) differs between the two judgements — over the items both judgements scored, with the mean
absolute score change beside it. Order effects are a known failure of LLM judges: a flip rate
tells how much of a judged difference between two runs the judge could produce on its own.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd

from kebab_eval_pipeline.judge.metrics import flip_rate_name
from kebab_eval_pipeline.judge.prompts import CRITERIA, JudgeInput


def shuffled_evidence(item: JudgeInput, query_id: str, seed: int) -> JudgeInput | None:
    """``item`` with its context passages in another order — a seeded permutation that moves at
    least one passage (each keeps its own ``ref``, so the answer's citations still point at it) —
    for the self-consistency check; None with fewer than two passages (no other order exists)."""
    n = len(item.context)
    if n < 2:
        return None
    rng = np.random.default_rng(
        int.from_bytes(hashlib.sha256(f"{seed}:{query_id}".encode()).digest()[:8], "big")
    )
    order = rng.permutation(n)
    if (order == np.arange(n)).all():  # the identity: rotate by one instead
        order = np.roll(order, 1)
    return JudgeInput(item.question, item.answer, item.citations, tuple(item.context[i] for i in order))


def reorderable(items: dict[str, JudgeInput], self_consistency: bool) -> int:
    """How many of ``items`` the self-consistency check judges again (those with two passages or
    more); 0 when it is off."""
    return sum(len(item.context) >= 2 for item in items.values()) if self_consistency else 0


def flip_rates(
    judgements: pd.DataFrame, pass_score: float
) -> tuple[dict[str, float | None], dict[str, int], dict[str, dict]]:
    """Per criterion, from a run's judgements (``primary`` and ``shuffled`` rows of the main
    judge): the flip rate (metric; null when no item has both scores), its denominator (items with
    both scores) and details (``flips``, ``n``, ``mean_abs_change`` of the score)."""
    metrics: dict[str, float | None] = {}
    denominators: dict[str, int] = {}
    details: dict[str, dict] = {}
    scored = judgements[judgements["score"].notna() & judgements["role"].isin(["primary", "shuffled"])]
    for criterion in CRITERIA:
        rows = scored[scored["criterion"] == criterion]
        wide = rows.pivot_table(index="query_id", columns="role", values="score", aggfunc="first")
        if not {"primary", "shuffled"} <= set(wide.columns):
            wide = pd.DataFrame(columns=["primary", "shuffled"], dtype=float)
        wide = wide.dropna(subset=["primary", "shuffled"])
        first, again = wide["primary"].to_numpy(dtype=float), wide["shuffled"].to_numpy(dtype=float)
        flips = int(((first >= pass_score) != (again >= pass_score)).sum())
        n = len(wide)
        name = flip_rate_name(criterion)
        metrics[name] = None if n == 0 else round(flips / n, 4)
        denominators[name] = n
        details[criterion] = {
            "flips": flips,
            "n": n,
            "mean_abs_change": None if n == 0 else float(np.abs(again - first).mean()),
        }
    return metrics, denominators, details
