"""A repeated run's numbers: per-query means over repeats, the headline and the noise floor.

A run with ``repeat: N`` (N > 1) scores each repeat on its own (:func:`score_results` per repeat,
one repeat's scores in memory at a time) and keeps:

- **per query** (the stored ``query_scores`` row): every float metric column (mrr, hit@k,
  recall@k, ndcg@k, answer checks, latencies, …) is the **mean over the repeats where it is
  defined** (NaN when none); ``first_relevant_rank`` and ``refused`` are the **modal** values
  (most frequent; ties: the best rank, a miss worst; see :mod:`.flakiness`); the other columns
  (labels, counts, error text) are repeat 1's; the flakiness columns of
  :func:`~.flakiness.flakiness_columns` are added.
- **the headline**: every metric that is a mean of a per-query value (:func:`per_query_means`:
  retrieval, scope, answers, judge, empty responses) is the usual aggregate of those per-query
  means — the per-query mean over repeats, then the mean over queries (for a metric whose
  denominator is the same in every repeat, e.g. hit@k over the queries with gold, that equals the
  mean of the per-repeat run values). Every other metric (error, timeout and empty-result rates,
  latency percentiles and total suite time, hit-weighted rates, group consistency) is the **mean
  over repeats of the per-repeat run value**. Breakdowns follow the same rule per slice.
- **the noise floor** (:func:`noise_floor`): per metric, the spread of the per-repeat run values —
  sample standard deviation (ddof 1) and min–max (``spread`` = max − min): how much the metric
  moved between runs of one and the same system — and ``se`` = std / √n over its n repeats, the
  standard error of the headline, which is a mean over the repeats: the noise floor of the mean.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from kebab_eval_pipeline.metrics import catalogue
from kebab_eval_pipeline.metrics.aggregate import STORED_DECIMALS, ScoreSummary, summarize_scores
from kebab_eval_pipeline.metrics.flakiness import ABSENT, FLAKINESS_COLUMNS, flakiness_columns

#: The per-repeat run metrics table stored with a repeated run's query_scores.
REPEAT_METRICS_COLUMNS: dict[str, str] = {"repeat": "int32", "metric": "string", "value": "Float64"}
#: The noise floor table: one row per metric.
NOISE_COLUMNS: dict[str, str] = {
    "metric": "string",
    "repeats": "int64",
    "mean": "float64",
    "std": "float64",
    "se": "float64",
    "min": "float64",
    "max": "float64",
    "spread": "float64",
}
#: Counts, not metrics: no noise floor.
_COUNTS = ("n_queries", "n_applicable")


def per_query_means(ks: Sequence[int]) -> set[str]:
    """The metrics whose run value is the mean of a per-query float column (catalogue measures
    with a column, and ``empty_response_rate``): for these the headline of a repeated run is the
    aggregate of the per-query means over repeats."""
    names = {"empty_response_rate"}
    for entry in catalogue.measures():
        for k in ks if entry.at_k else [None]:
            if entry.column_for(k) is not None:
                names.add(entry.metric(k))
    return names


@dataclass
class RepeatedScores:
    """What :class:`RepeatAccumulator` gives: per-query ``scores`` (unrounded; means, modal rank
    and refusal, flakiness columns), the per-repeat run metrics (:data:`REPEAT_METRICS_COLUMNS`,
    rounded as stored) and the per-repeat means of the metrics that are not per-query means
    (``overrides``: metric → value; ``override_breakdowns``: the breakdown rows of those metrics)."""

    scores: pd.DataFrame
    per_repeat: pd.DataFrame
    overrides: dict[str, float | None]
    override_breakdowns: pd.DataFrame


class RepeatAccumulator:
    """Adds up a repeated run's per-repeat ``query_scores`` (all in one query order), repeat after
    repeat: only running sums and counts of the float columns, the few per-repeat values
    flakiness needs (rank, hit@k, refused, answer text) and each repeat's run metrics are kept."""

    def __init__(self, ks: Sequence[int]):
        self.ks = list(ks)
        self.first: pd.DataFrame | None = None
        self.float_columns: list[str] = []
        self.sums: np.ndarray | None = None
        self.counts: np.ndarray | None = None
        self.ranks: list[np.ndarray] = []
        self.hits: dict[int, list[np.ndarray]] = {k: [] for k in self.ks}
        self.refused: list[pd.Series] = []
        self.answers: list[pd.Series] = []
        self.metrics: list[dict[str, float | None]] = []
        self.breakdowns: list[pd.DataFrame] = []

    def add(self, scores: pd.DataFrame, outcomes: pd.DataFrame) -> None:
        """One repeat's unrounded ``query_scores`` and its ``outcomes`` (for the answer text)."""
        if self.first is None:
            self.first = scores
            self.float_columns = [c for c in scores.columns if pd.api.types.is_float_dtype(scores[c].dtype)]
            shape = (len(scores), len(self.float_columns))
            self.sums = np.zeros(shape)
            self.counts = np.zeros(shape, dtype=np.int32)
        elif not np.array_equal(
            scores["query_id"].to_numpy(dtype=object), self.first["query_id"].to_numpy(dtype=object)
        ):
            raise ValueError("the repeats' query_scores list the queries in different orders")
        values = scores[self.float_columns].to_numpy(dtype=np.float64, na_value=np.nan)
        ok = ~np.isnan(values)
        self.sums += np.where(ok, values, 0.0)
        self.counts += ok
        self.ranks.append(scores["first_relevant_rank"].to_numpy(dtype=np.float64, na_value=np.nan))
        for k in self.ks:
            self.hits[k].append(scores[f"hit@{k}"].to_numpy(dtype=np.float64, na_value=np.nan))
        self.refused.append(scores["refused"].reset_index(drop=True))
        self.answers.append(answer_text(scores["query_id"], outcomes))
        summary = summarize_scores(scores, self.ks, round_to=None)
        self.metrics.append(summary.metrics)
        self.breakdowns.append(summary.breakdowns)

    def finish(self) -> RepeatedScores:
        if self.first is None or self.sums is None or self.counts is None:
            raise ValueError("no repeat was added")
        n = len(self.metrics)
        with np.errstate(invalid="ignore", divide="ignore"):
            means = np.where(self.counts > 0, self.sums / np.maximum(self.counts, 1), np.nan)
        out = self.first.copy(deep=False)
        for i, column in enumerate(self.float_columns):
            out[column] = means[:, i]
        applicable = self.first["applicable"].astype("boolean").fillna(False).to_numpy(dtype=bool)
        table, modal_rank, modal_refused = flakiness_columns(
            np.vstack(self.ranks),
            [np.vstack(self.hits[k]) for k in self.ks],
            self.refused,
            self.answers,
            applicable,
        )
        rank = pd.Series(np.where(np.isnan(modal_rank), 0, modal_rank).astype(np.int64), dtype="Int64")
        rank[np.isnan(modal_rank)] = pd.NA
        out["first_relevant_rank"] = rank.array
        refused = pd.Series(modal_refused == 1, dtype="boolean")
        refused[modal_refused == ABSENT] = pd.NA
        out["refused"] = refused.array
        for column in FLAKINESS_COLUMNS:
            out[column] = table[column].array

        means_of = per_query_means(self.ks)
        names = [m for m in self.metrics[0] if m not in _COUNTS]
        rows = [(r + 1, m, self.metrics[r].get(m)) for r in range(n) for m in names]
        per_repeat = pd.DataFrame(
            [(r, m, None if v is None else round(float(v), STORED_DECIMALS)) for r, m, v in rows],
            columns=list(REPEAT_METRICS_COLUMNS),
        ).astype(REPEAT_METRICS_COLUMNS)
        overrides = {}
        for m in names:
            if m in means_of:
                continue
            values = [v for v in (self.metrics[r].get(m) for r in range(n)) if v is not None]
            overrides[m] = None if not values else round(float(np.mean(values)), STORED_DECIMALS)
        frames = [b[~b["metric"].isin(means_of)] for b in self.breakdowns]
        stacked = pd.concat(frames, ignore_index=True)
        override_breakdowns = (
            stacked.groupby(["dimension", "value", "metric"], sort=False, dropna=False)
            .agg(score=("score", "mean"), n=("n", "first"))
            .reset_index()
        )
        override_breakdowns["score"] = override_breakdowns["score"].round(STORED_DECIMALS)
        return RepeatedScores(out, per_repeat, overrides, override_breakdowns)


def answer_text(query_ids: pd.Series, outcomes: pd.DataFrame) -> pd.Series:
    """The answer text of each query of ``query_ids`` (NA: none) from one repeat's outcomes."""
    if "answer_text" not in outcomes.columns:
        return pd.Series(pd.NA, index=range(len(query_ids)), dtype="string")
    text = outcomes["answer_text"].astype("string")
    ids = outcomes["query_id"].to_numpy(dtype=object)
    wanted = query_ids.to_numpy(dtype=object)
    if np.array_equal(ids, wanted):
        return text.reset_index(drop=True)
    where = pd.Index(ids).get_indexer(wanted)
    picked = text.to_numpy(dtype=object, na_value=None)[np.maximum(where, 0)]
    return pd.Series(np.where(where >= 0, picked, None), dtype="string")


def repeated_summary(summary: ScoreSummary, repeated: RepeatedScores) -> ScoreSummary:
    """The headline of a repeated run: ``summary`` (the aggregate of the per-query means) with
    the metrics that are not per-query means — and their breakdown rows — replaced by their mean
    over repeats (``repeated.overrides``)."""
    metrics = dict(summary.metrics)
    for name, value in repeated.overrides.items():
        if name in metrics:
            metrics[name] = value
    b = summary.breakdowns
    o = repeated.override_breakdowns
    if len(o) and len(b):
        key = ["dimension", "value", "metric"]
        joined = b[key].merge(o[[*key, "score"]], on=key, how="left")["score"].to_numpy()
        replace = b["metric"].isin(set(repeated.overrides)).to_numpy()
        b = b.copy()
        b.loc[replace, "score"] = joined[replace]
    return ScoreSummary(metrics, summary.denominators, b)


def noise_floor(per_repeat: pd.DataFrame) -> pd.DataFrame:
    """Per metric (:data:`NOISE_COLUMNS`, in first-seen order): over the n repeats where it has a
    value, their count, mean, sample standard deviation (ddof 1; NaN with fewer than 2), its
    standard error ``se`` = std / √n (the noise floor of the mean over the repeats), min, max and
    ``spread`` (max − min). Rounded to the stored 4 decimals (``se`` from the unrounded std)."""
    v = per_repeat.dropna(subset=["value"])
    order = list(dict.fromkeys(per_repeat["metric"].tolist()))
    grouped = v.assign(value=v["value"].astype("float64")).groupby("metric", sort=False)["value"]
    stats = grouped.agg(["count", "mean", "std", "min", "max"]).reindex(order)
    out = pd.DataFrame(
        {
            "metric": pd.array(order, dtype="string"),
            "repeats": stats["count"].fillna(0).to_numpy(dtype=np.int64),
            "mean": stats["mean"].to_numpy(dtype=np.float64),
            "std": stats["std"].to_numpy(dtype=np.float64),
            "se": (stats["std"] / np.sqrt(stats["count"])).to_numpy(dtype=np.float64),
            "min": stats["min"].to_numpy(dtype=np.float64),
            "max": stats["max"].to_numpy(dtype=np.float64),
        }
    )
    out["spread"] = out["max"] - out["min"]
    for c in ("mean", "std", "se", "min", "max", "spread"):
        out[c] = out[c].round(STORED_DECIMALS)
    return out.astype(NOISE_COLUMNS)


#: How many of the flakiest queries a run's repeats summary lists.
FLAKIEST_SHOWN = 10
#: Per-query columns of a flaky query in the summary.
FLAKY_FIELDS = (
    "flips",
    "rank_flips",
    "distinct_ranks",
    "rank_best",
    "rank_worst",
    "refusal_flips",
    "answer_flips",
)


def flakiest(scores: pd.DataFrame, top: int = FLAKIEST_SHOWN) -> pd.DataFrame:
    """The ``top`` queries of a repeated run's ``query_scores`` with the most ``flips`` (then rank
    flips, answer flips; ties in query order), flips > 0 only: ``query_id`` and
    :data:`FLAKY_FIELDS`. Empty for a run without flakiness columns."""
    if "flips" not in scores.columns:
        return pd.DataFrame(columns=["query_id", *FLAKY_FIELDS])
    keys = ["flips", "rank_flips", "answer_flips"]
    table = scores[["query_id", *FLAKY_FIELDS]].reset_index(drop=True)
    ranked = table.assign(_order=np.arange(len(table)))
    for k in keys:
        ranked[k + "_"] = ranked[k].fillna(0).astype(np.int64)
    ranked = ranked[ranked["flips_"] > 0].sort_values(
        [k + "_" for k in keys] + ["_order"], ascending=[False] * len(keys) + [True], kind="stable"
    )
    return ranked[["query_id", *FLAKY_FIELDS]].head(top).reset_index(drop=True)


def repeats_info(scores: pd.DataFrame, per_repeat: pd.DataFrame, count: int) -> dict:
    """A repeated run's repeats summary (JSON-able, for the run's metadata and reports): ``count``,
    the ``headline`` rule, per-metric ``noise_floor`` (:func:`noise_floor`: ``std``, ``se``,
    ``min``, ``max``, ``spread``, ``mean``; None for NaN), flip totals over queries (``flaky_queries``:
    queries with flips > 0; ``rank_flips``, ``hit_flips``, ``refusal_flips``, ``answer_flips``:
    sums), ``deterministic`` (no query flipped) and the ``flakiest`` queries (:func:`flakiest`)."""

    def num(x) -> float | int | None:
        return None if x is None or pd.isna(x) else (int(x) if isinstance(x, np.integer | int) else float(x))

    noise = noise_floor(per_repeat)
    fields = ("std", "se", "min", "max", "spread", "mean", "repeats")
    floor = {str(r.metric): {c: num(getattr(r, c)) for c in fields} for r in noise.itertuples(index=False)}
    flips = {
        c: int(scores[c].fillna(0).astype(np.int64).sum())
        for c in ("flips", "rank_flips", "hit_flips", "refusal_flips", "answer_flips")
        if c in scores.columns
    }
    flaky = int((scores["flips"].fillna(0) > 0).sum()) if "flips" in scores.columns else 0
    top = flakiest(scores)
    return {
        "count": count,
        "headline": "per-query mean over repeats, then the usual aggregate over queries "
        "(rates, latencies and group consistency: the mean of the per-repeat run values)",
        "noise_floor": floor,
        "flaky_queries": flaky,
        "flips": flips,
        "deterministic": flaky == 0,
        "flakiest": [
            {k: num(v) if k != "query_id" else str(v) for k, v in row.items()}
            for row in top.to_dict("records")
        ],
    }
