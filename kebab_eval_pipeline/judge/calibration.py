"""A judge against a person's labels: agreement and corrected means, per criterion.

For one run's judgements and a labels file (:mod:`.labels`), per criterion the main judge scored:

- **agreement** of the judge's score with the person's label on the items both scored:
  Cohen's κ weighted quadratically on the 0–5 scale (``graded``) and unweighted on the verdict
  (``binary``: at or above the pass score, or not), each with its bootstrap interval, confusion
  matrix and the labels' base rate (:mod:`.agreement`); the verdict κ per slice too;
- the **judged mean** over every judged item with its naive interval (the judge taken as right);
- the **corrected mean**: the prediction-powered (PPI++) estimate of the mean a person would have
  given every item, and its interval (:mod:`.ppi`) — null with the reason when fewer than two items
  are labelled or no item is left unlabelled (then the labels' own mean is the number).

Items are matched to labels by what the person saw (``item_hash``), never by query id alone: an
answer that changed since it was labelled is unlabelled. The judge's scores are rounded to the
0–5 grid for κ (a logprob-weighted score can be fractional); the means use them as they are.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from kebab_eval_pipeline.judge.agreement import agreement
from kebab_eval_pipeline.judge.labels import LABEL_MAX, LABEL_MIN, item_hash
from kebab_eval_pipeline.judge.metrics import calibration_names
from kebab_eval_pipeline.judge.ppi import ppi_mean

GRID = tuple(range(LABEL_MIN, LABEL_MAX + 1))
#: Below this many labelled items the corrected interval undercovers (benchmarks/bench_ppi_coverage.py).
FEW_LABELS = 50
#: One row per judged item of the main judge (see :func:`answer_items`).
ITEM_COLUMNS = (
    "query_id",
    "criterion",
    "item_hash",
    "judge_score",
    "model",
    "digest",
    "prompt_version",
    "judge_input",
)


def answer_items(judgements: pd.DataFrame) -> pd.DataFrame:
    """The main judge's scored items of a run's ``judgements`` (``judge.run.JUDGEMENT_COLUMNS``):
    one row per (query, criterion) with a score, its ``item_hash`` (of the stored ``judge_input``:
    what a labeller is shown) and the judge (``model``, ``digest``, ``prompt_version``)."""
    primary = judgements[(judgements["role"] == "primary") & judgements["score"].notna()]
    out = pd.DataFrame(
        {
            "query_id": primary["query_id"].astype(str).to_numpy(),
            "criterion": primary["criterion"].astype(str).to_numpy(),
            "item_hash": [item_hash(str(j)) for j in primary["judge_input"]],
            "judge_score": primary["score"].to_numpy(dtype=float),
            "model": primary["model"].astype(str).to_numpy(),
            "digest": primary["digest"].astype(str).to_numpy(),
            "prompt_version": primary["prompt_version"].astype(str).to_numpy(),
            "judge_input": primary["judge_input"].astype(str).to_numpy(),
        }
    )
    return out


@dataclass(frozen=True)
class CriterionCalibration:
    """The calibration of one judge on one criterion (module doc). ``judge``: model, digest and
    prompt version; ``items``: judged items; ``labelled``: those with a person's label;
    ``labellers``: the people; ``graded``/``binary``: :class:`~.agreement.Agreement` as dicts
    (None without a labelled item); ``slices``: the verdict κ per slice; ``judged_mean`` and its
    naive ``judged_ci``; ``corrected``: a :class:`~.ppi.PpiMean` as a dict, or None with
    ``corrected_note`` saying why (the note also warns when fewer than :data:`FEW_LABELS` items
    stand behind a corrected interval)."""

    criterion: str
    judge: dict[str, str]
    pass_score: float
    items: int
    labelled: int
    labellers: list[str]
    graded: dict[str, Any] | None
    binary: dict[str, Any] | None
    slices: list[dict[str, Any]] = field(default_factory=list)
    judged_mean: float | None = None
    judged_ci: tuple[float, float] | None = None
    corrected: dict[str, Any] | None = None
    corrected_note: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _grid(scores: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(scores), LABEL_MIN, LABEL_MAX).astype(np.int64)


def _naive_interval(scores: np.ndarray, alpha: float) -> tuple[float, float] | None:
    from scipy.special import ndtri

    if scores.size < 2:
        return None
    half = float(ndtri(1 - alpha / 2)) * float(np.std(scores, ddof=1)) / np.sqrt(scores.size)
    mean = float(scores.mean())
    return (mean - half, mean + half)


def calibrate_criterion(
    items: pd.DataFrame,
    references: pd.DataFrame,
    labels: pd.DataFrame,
    slices: pd.Series,
    criterion: str,
    pass_score: float,
    *,
    alpha: float = 0.05,
    seed: int = 0,
) -> CriterionCalibration:
    """One criterion's :class:`CriterionCalibration`.

    ``items``: :func:`answer_items` rows; ``references``: ``labels.reference_labels`` (one label
    per item); ``labels``: every label (for the labellers' names); ``slices``: query id → slice;
    ``alpha``: 1 − the intervals' level; ``seed``: the bootstrap's."""
    mine = items[items["criterion"] == criterion].drop_duplicates("item_hash")
    judge = {k: str(mine[k].iloc[0]) for k in ("model", "digest", "prompt_version")} if len(mine) else {}
    refs = references[references["criterion"] == criterion][["item_hash", "label"]]
    joined = mine.merge(refs, on="item_hash", how="left")
    is_labelled = joined["label"].notna().to_numpy()
    scores = joined["judge_score"].to_numpy(dtype=float)
    labelled = joined[is_labelled]
    people = labels[(labels["criterion"] == criterion) & labels["item_hash"].isin(labelled["item_hash"])]
    y = labelled["label"].to_numpy(dtype=float)
    f = labelled["judge_score"].to_numpy(dtype=float)
    graded = binary = None
    per_slice: list[dict[str, Any]] = []
    if len(labelled):
        graded = agreement(y.astype(np.int64), _grid(f), GRID, weights="quadratic", seed=seed).as_dict()
        verdict_y, verdict_f = _verdicts(y, pass_score), _verdicts(f, pass_score)
        binary = agreement(verdict_y, verdict_f, ["fail", "pass"], seed=seed).as_dict()
        slice_of = labelled["query_id"].map(slices).fillna("").astype(str).to_numpy()
        for name in sorted(set(slice_of)):
            inside = slice_of == name
            one = agreement(verdict_y[inside], verdict_f[inside], ["fail", "pass"], seed=seed)
            per_slice.append(
                {
                    "slice": name,
                    "n": one.n,
                    "kappa": one.kappa,
                    "ci_low": one.ci_low,
                    "ci_high": one.ci_high,
                    "base_rate_pass": one.base_rate.get("pass"),
                    "note": one.note,
                }
            )
    corrected, note = None, ""
    unlabelled = scores[~is_labelled]
    if len(labelled) < 2:
        note = f"{len(labelled)} labelled item(s): the corrected mean needs at least 2"
    elif unlabelled.size == 0:
        note = "every judged item is labelled: the labels' own mean is the number"
    else:
        corrected = ppi_mean(y, f, unlabelled, alpha=alpha).as_dict()
        if len(labelled) < FEW_LABELS:
            note = (
                f"only {len(labelled)} labelled items: below {FEW_LABELS} the interval runs narrow "
                "(it held the truth in 88–92% of simulated runs at 20 labels, not 95%; "
                "benchmarks/bench_ppi_coverage.py)"
            )
    return CriterionCalibration(
        criterion=criterion,
        judge=judge,
        pass_score=pass_score,
        items=len(mine),
        labelled=len(labelled),
        labellers=sorted(people["labeller"].astype(str).unique()),
        graded=graded,
        binary=binary,
        slices=per_slice,
        judged_mean=float(scores.mean()) if scores.size else None,
        judged_ci=_naive_interval(scores, alpha),
        corrected=corrected,
        corrected_note=note,
    )


def _verdicts(scores: np.ndarray, pass_score: float) -> np.ndarray:
    return np.where(scores >= pass_score, "pass", "fail")


def calibrate_run(
    judgements: pd.DataFrame,
    labels: pd.DataFrame,
    queries: pd.DataFrame,
    pass_score: float,
    *,
    alpha: float = 0.05,
    seed: int = 0,
) -> list[CriterionCalibration]:
    """A :class:`CriterionCalibration` per criterion the run's main judge scored (in the order the
    judgements list them), from its ``judgements``, every label read (``labels.read_labels``) and
    the golden ``queries`` table (``query_id``, ``category``: the slices)."""
    from kebab_eval_pipeline.judge.labels import reference_labels

    items = answer_items(judgements)
    references = reference_labels(labels)
    slices = pd.Series(
        queries["category"].astype(str).to_numpy(), index=queries["query_id"].astype(str).to_numpy()
    )
    return [
        calibrate_criterion(items, references, labels, slices, c, pass_score, alpha=alpha, seed=seed)
        for c in dict.fromkeys(items["criterion"])
    ]


def _check(
    report: list[CriterionCalibration], kind: str, min_kappa: float, min_labels: int
) -> dict[str, Any]:
    """The ``judge_calibration`` verdict: failed when a criterion with ``min_labels`` labelled items
    has its κ (``kind``) below ``min_kappa``; skipped when no criterion could be checked."""
    checked, failing, unchecked, kappas = [], [], [], []
    for c in report:
        agreement = c.graded if kind == "graded" else c.binary
        kappa = None if agreement is None else agreement["kappa"]
        if c.labelled < min_labels or kappa is None:
            why = (
                f"{c.labelled} labelled item(s), fewer than min_labels {min_labels}"
                if c.labelled < min_labels
                else f"κ undefined ({agreement['note'] if agreement else 'no label'})"
            )
            unchecked.append(f"{c.criterion}: {why}")
            continue
        line = f"{c.criterion} κ {kappa:.2f} over {c.labelled}"
        checked.append(line)
        kappas.append(kappa)
        if kappa < min_kappa:
            failing.append(line)
    if not checked:
        status = "skipped"
        reason = "no criterion could be checked — " + "; ".join(unchecked or ["the judge scored no item"])
    elif failing:
        status = "failed"
        reason = f"the judge agrees with the labels below κ {min_kappa:g} ({kind}): " + "; ".join(failing)
    else:
        status = "passed"
        reason = f"the judge agrees with the labels at κ ≥ {min_kappa:g} ({kind}): " + "; ".join(checked)
    if unchecked and checked:
        reason += " (not checked: " + "; ".join(unchecked) + ")"
    # value: the lowest κ checked (what the bound is held against); None when nothing was checked
    return {"status": status, "reason": reason, "value": min(kappas) if kappas else None}


def run_calibration(
    settings: Any, judgements: pd.DataFrame, queries: pd.DataFrame, pass_score: float
) -> tuple[dict[str, float | None], dict[str, int], dict[str, Any]]:
    """A judged run measured against ``settings.labels`` (``judge.config.JudgeCalibrationSettings``):
    its run-level metrics (:func:`~.metrics.calibration_names` per criterion: the corrected mean, κ
    graded and on the verdict; null when not measurable), their denominators (labelled items) and
    the ``judge_calibration`` info — the labels file and its sha256, every criterion's
    :class:`CriterionCalibration`, and the check's status (passed / failed / skipped) and reason.
    An absent labels file is no label (the check is skipped, saying so); a bad one raises
    InputError naming every bad line."""
    from pathlib import Path

    from kebab_eval_pipeline.judge.labels import read_labels_file

    path = Path(settings.labels)
    labels, digest = read_labels_file(path)
    report = calibrate_run(judgements, labels, queries, pass_score)
    metrics: dict[str, float | None] = {}
    denominators: dict[str, int] = {}
    for c in report:
        corrected, graded, verdict = calibration_names(c.criterion)
        metrics[corrected] = None if c.corrected is None else round(c.corrected["estimate"], 4)
        metrics[graded] = (
            None if c.graded is None or c.graded["kappa"] is None else round(c.graded["kappa"], 4)
        )
        metrics[verdict] = (
            None if c.binary is None or c.binary["kappa"] is None else round(c.binary["kappa"], 4)
        )
        denominators.update({corrected: c.labelled, graded: c.labelled, verdict: c.labelled})
    check = _check(report, settings.kappa, settings.min_kappa, settings.min_labels)
    if digest is None:
        check = {
            "status": "skipped",
            "reason": f"no labels file at {path} yet: label the run with `kebab-eval judge label`",
            "value": None,
        }
    info = {
        "labels": str(path),
        "labels_sha256": digest,
        "labels_read": len(labels),
        "kappa": settings.kappa,
        "min_kappa": settings.min_kappa,
        "min_labels": settings.min_labels,
        "blocking": settings.blocking,
        "pass_score": pass_score,
        "criteria": [c.as_dict() for c in report],
        "check": check,
    }
    return metrics, denominators, info
