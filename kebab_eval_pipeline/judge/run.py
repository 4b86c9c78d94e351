"""Judge a run: every answered query scored for groundedness and correctness, a fixed-seed sample
judged a second time (spot check), every reply cached by (judge digest, prompt version, input hash).

Pure of Dagster: the ``judge`` asset (which ``kebab-eval rejudge`` materializes again) judges each
shard with :func:`judge_piece` and joins the shards with :func:`merge_judge_pieces`;
:func:`judge_run` does both for a whole run in one call.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd

from kebab_eval_pipeline.judge.asking import CachedJudge
from kebab_eval_pipeline.judge.backends import backend_key, build_backend
from kebab_eval_pipeline.judge.cache import JudgeCache
from kebab_eval_pipeline.judge.completion import JudgeBackend
from kebab_eval_pipeline.judge.config import JudgeModelSettings, JudgeSettings
from kebab_eval_pipeline.judge.inputs import judge_inputs
from kebab_eval_pipeline.judge.prompts import CRITERIA, JudgeInput
from kebab_eval_pipeline.judge.relevance import RelevanceInput, ask_relevance
from kebab_eval_pipeline.judge.self_consistency import shuffled_evidence

JUDGE_VERSION = "judge-1"
# calibration: the relevance sample; shuffled: the self-consistency check (evidence reordered)
ROLES = ("primary", "spot_check", "calibration", "shuffled")
#: One row per (query, criterion, role). Lists are claims; JSON columns hold the full judge input.
JUDGEMENT_COLUMNS: dict[str, str] = {
    "query_id": "string",
    "criterion": "string",
    "role": "string",
    "backend": "string",
    "model": "string",
    "digest": "string",
    "prompt_version": "string",
    "input_hash": "string",
    "score": "float64",
    "method": "string",
    "expected_score": "float64",
    "digit_mass": "float64",
    "supported_claims": "object",
    "unsupported_claims": "object",
    "reasoning": "string",
    "problem": "string",
    "error": "string",
    "cached": "bool",
    "prompt_tokens": "Int64",
    "completion_tokens": "Int64",
    "cost_usd": "float64",
    "latency_ms": "float64",
    "finish_reason": "string",
    "reply": "string",
    "judge_input": "string",  # JudgeInput JSON: what a re-judge needs
    "messages": "string",  # the rendered chat messages (JSON): exactly what the model read
}


def empty_judgements() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series([], dtype=t) for c, t in JUDGEMENT_COLUMNS.items()})


def spot_check_sample(query_ids: Sequence[str], rate: float, seed: int) -> list[str]:
    """A fixed-seed sample of ``ceil(rate × n)`` queries (at least one when ``rate > 0``): the first
    ones in one global order, a seeded hash of each query id — so the sample does not depend on the
    order of the ids, and a query sampled in one run stays sampled while the golden set keeps its
    size. Returned in the given order."""
    ids = list(dict.fromkeys(map(str, query_ids)))
    if rate <= 0 or not ids:
        return []
    # The rate as written (0.07, not the binary float 0.07000000000000000666): 7% of 100 is 7, not 8.
    n = min(len(ids), max(1, math.ceil(Fraction(repr(float(rate))) * len(ids))))
    ranked = sorted(ids, key=lambda q: hashlib.sha256(f"{seed}:{q}".encode()).hexdigest())
    chosen = set(ranked[:n])
    return [q for q in ids if q in chosen]


def judge_piece(
    settings: JudgeSettings,
    items: dict[str, JudgeInput],
    sample: Sequence[str],
    cache: JudgeCache | None,
    make_backend: Callable[[JudgeModelSettings], JudgeBackend] = build_backend,
    progress: Callable[[int, int], None] | None = None,
    relevance: pd.DataFrame | None = None,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Judge one shard of a run: ``items`` (query id → judge input) on both criteria with the main
    judge, then those of them in the run's spot-check ``sample`` again with the second judge (its
    backend is built only when the shard has some), then the hits of ``relevance`` (the run's
    relevance sample, ``relevance_calibration.RELEVANCE_ITEM_COLUMNS``) with the main judge and the
    relevance prompt (rows of criterion ``relevance``, role ``calibration``). Returns the shard's judgements
    (``JUDGEMENT_COLUMNS``: primary rows, then spot-check rows) and what :func:`merge_judge_pieces`
    needs: both judges described (None: not used here), model calls and cache hits. A failed call is
    a row with ``error`` set and a null score — never a missing row, never a crashed run."""
    main_settings = settings.judge_model()
    spot_settings = settings.spot_check_judge()
    backends: dict[tuple, JudgeBackend] = {}

    def backend(s: JudgeModelSettings) -> JudgeBackend:
        key = backend_key(s)
        if key not in backends:
            backends[key] = make_backend(s)
        return backends[key]

    main = CachedJudge(main_settings, backend(main_settings), cache, settings.price(main_settings))
    in_sample = set(sample)
    sampled = [q for q in items if q in in_sample]
    spot = (
        CachedJudge(spot_settings, backend(spot_settings), cache, settings.price(spot_settings))
        if sampled
        else None
    )
    plan = [(q, c, "primary", main, items[q]) for q in items for c in CRITERIA]
    plan += [(q, c, "spot_check", spot, items[q]) for q in sampled for c in CRITERIA]
    if settings.self_consistency:  # each item again, its evidence in another order: the judge's own noise
        shuffled = {q: shuffled_evidence(items[q], q, settings.spot_check_seed) for q in items}
        plan += [(q, c, "shuffled", main, item) for q, item in shuffled.items() if item for c in CRITERIA]
    asked = [] if relevance is None else list(relevance.itertuples(index=False))
    total = len(plan) + len(asked)
    rows = []
    for done, (query_id, criterion, role, judge, item) in enumerate(plan, start=1):
        rows.append(judge.judge(query_id, criterion, role, item))
        if progress is not None:
            progress(done, total)
    for done, hit in enumerate(asked, start=len(plan) + 1):  # the relevance sample: the golden set's labels
        item = RelevanceInput.from_json(str(hit.judge_input))
        rows.append(ask_relevance(main, str(hit.query_id), "calibration", item))
        if progress is not None:
            progress(done, total)
    table = pd.DataFrame(rows, columns=list(JUDGEMENT_COLUMNS)) if rows else empty_judgements()
    info = {
        "judge": main.describe(),
        "spot_check_judge": spot.describe() if spot else None,
        "model_calls": main.model_calls + (spot.model_calls if spot else 0),
        "cache_hits": main.cache_hits + (spot.cache_hits if spot else 0),
    }
    return _typed(table), info


def _typed(table: pd.DataFrame) -> pd.DataFrame:
    return table.astype({c: t for c, t in JUDGEMENT_COLUMNS.items() if t != "object"})


def judge_calls(items: int, sample: int, shuffled: int = 0) -> int:
    """How many judgements a run of ``items`` queries with a spot-check ``sample`` makes, and
    ``shuffled`` of them judged again with their evidence reordered (the self-consistency check)."""
    return (items + sample + shuffled) * len(CRITERIA)


def merge_judge_pieces(
    settings: JudgeSettings,
    pieces: Sequence[tuple[pd.DataFrame, dict[str, Any]]],
    judged_queries: int,
    sample: list[str],
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The run's judgements from its shards' pieces (:func:`judge_piece`, in shard order): every
    primary row, then every spot-check row — the table one unsharded call makes — and the run's
    ``info``: the judges described (the spot-check one by the first shard that used it), the whole
    run's ``sample`` and ``judged_queries``, model calls and cache hits summed."""
    tables = [t for t, _ in pieces]
    if len(tables) == 1:
        table = tables[0]
    else:
        joined = pd.concat(tables, ignore_index=True)
        # Stable: within a role, shard order is the run's query order.
        order = np.argsort((joined["role"] != "primary").to_numpy(dtype=bool), kind="stable")
        table = _typed(joined.iloc[order].reset_index(drop=True))
    infos = [i for _, i in pieces]
    spot = next((i["spot_check_judge"] for i in infos if i["spot_check_judge"] is not None), None)
    info = {
        "enabled": True,
        "judge_version": JUDGE_VERSION,
        "judge": infos[0]["judge"],
        "spot_check_judge": spot,
        "spot_check_rate": settings.spot_check_rate,
        "spot_check_seed": settings.spot_check_seed,
        "spot_check_queries": sample,
        "disagreement_warn": settings.disagreement_warn,
        "context_k": settings.context_k,
        "context_chars": settings.context_chars,
        "judged_queries": judged_queries,
        "relevance_sample_size": settings.relevance_sample,
        "self_consistency": settings.self_consistency,
        "relevance_sample": next((i["relevance_sample"] for i in infos if i.get("relevance_sample")), []),
        "model_calls": sum(int(i["model_calls"]) for i in infos),
        "cache_hits": sum(int(i["cache_hits"]) for i in infos),
    }
    return table, info


def judge_items(
    settings: JudgeSettings,
    items: dict[str, JudgeInput],
    cache: JudgeCache | None,
    make_backend: Callable[[JudgeModelSettings], JudgeBackend] = build_backend,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Judge ``items`` (query id → judge input) on both criteria with the main judge, and the
    spot-check sample again with the second judge, in one piece. Returns the judgements table
    (``JUDGEMENT_COLUMNS``) and ``info``: both judges described (model, digest, prompt version,
    decoding), the sample, model calls and cache hits (see :func:`merge_judge_pieces`)."""
    sample = spot_check_sample(list(items), settings.spot_check_rate, settings.spot_check_seed)
    piece = judge_piece(settings, items, sample, cache, make_backend, progress)
    return merge_judge_pieces(settings, [piece], len(items), sample)


def judge_run(
    settings: JudgeSettings,
    queries: pd.DataFrame,
    outcomes: pd.DataFrame,
    hits: pd.DataFrame,
    citations: pd.DataFrame,
    cache: JudgeCache | None,
    make_backend: Callable[[JudgeModelSettings], JudgeBackend] = build_backend,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """:func:`judge_items` over the answered queries of a run (see ``inputs.judge_inputs``)."""
    items = judge_inputs(queries, outcomes, hits, citations, settings.context_k, settings.context_chars)
    return judge_items(settings, items, cache, make_backend, progress)
