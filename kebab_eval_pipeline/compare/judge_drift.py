"""Two runs judged by different judges: their judged numbers are not compared decisively.

A judge score moves when the judge changes — another model, another digest of the same model name,
another prompt version — whether or not the answers did. A comparison whose runs were judged by
different main judges (model digest or prompt version) says so, and on every judged metric (the
``judge`` family and the judge's calibration figures, slices included) it keeps the numbers but
drops the significance mark and the better/worse direction; a regression gate on such a metric is
skipped with the reason. Re-judging one run with the other's judge (``kebab-eval rejudge``, from the
judge cache where it can) makes the two comparable again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from kebab_eval_pipeline.metrics import catalogue

#: Metric families whose numbers a judge produces.
JUDGED_FAMILIES = ("judge", "judge_calibration")


def is_judged_metric(name: str) -> bool:
    """True when metric ``name`` (a slice too: ``judge_groundedness[category=x]``) is a judge's number."""
    entry = catalogue.measure(str(name))
    return entry is not None and entry.family in JUDGED_FAMILIES


def _judge(info: Mapping[str, Any]) -> dict[str, Any] | None:
    judge = (info.get("judge") or {}).get("judge")
    return None if not judge else {k: judge.get(k) for k in ("model", "digest", "prompt_version")}


def judge_drift(info_a: Mapping[str, Any], info_b: Mapping[str, Any], run_a: str, run_b: str) -> dict | None:
    """The drift record of two runs' ``run_metrics`` infos: None unless both were judged and their
    main judges differ in digest or prompt version; else ``{"a": judge, "b": judge, "differs":
    [fields], "note": text}`` (a judge: model, digest, prompt version), the note naming how to re-judge."""
    a, b = _judge(info_a), _judge(info_b)
    if a is None or b is None:
        return None
    differs = [k for k in ("digest", "prompt_version") if a.get(k) != b.get(k)]
    if not differs:
        return None
    shown = {
        side: f"{j['model']} ({j['digest']}, prompt {j['prompt_version']})"
        for side, j in (("a", a), ("b", b))
    }
    note = (
        f"the runs were judged by different judges (a: {shown['a']}; b: {shown['b']}): judged metrics "
        "are shown but not called better or worse, and gates on them are skipped — re-judge one run "
        f"with the other's judge to compare them, e.g. `kebab-eval rejudge {run_b} --model {a['model']} "
        f"--prompt-version {a['prompt_version']}` (with the config naming that judge)"
    )
    return {"a": a, "b": b, "differs": differs, "note": note}


def without_judged_verdicts(table: pd.DataFrame, drift: dict | None) -> pd.DataFrame:
    """``table`` (a comparison's per-metric or per-slice table) with the significance mark and the
    direction dropped on judged metrics when ``drift`` says the judges differ, and ``judge_drift``
    (boolean) marking those rows; unchanged without drift."""
    if drift is None or table.empty:
        return table
    judged = table["metric"].map(is_judged_metric).to_numpy(dtype=bool)
    out = table.copy()
    if "significance" in out.columns:
        out.loc[judged, "significance"] = pd.NA
    if "direction" in out.columns:
        same = (out["direction"] == "same").fillna(False).to_numpy(dtype=bool)
        out.loc[judged & ~same, "direction"] = pd.NA
    out["judge_drift"] = pd.array(judged, dtype="boolean")
    return out
