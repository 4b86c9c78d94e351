"""Versions a system reports while it runs, and where they disagree (SPEC §4, §6).

Hits may carry ``index_version`` / ``embedding_model`` / ``chunker_version``; answers
``prompt_template_version`` and ``model``. A run is comparable only if these held
still: the run's system info takes the most common reported value where the adapter
itself did not know one, and every field that saw more than one value is named in
``details["mixed_<field>"]`` with its counts (``mixed_version_rate`` counts the hits).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: reading a version report needs neither (python_versions.py)
    import pandas as pd
    import pyarrow as pa

from kebab_eval_pipeline.contract import COVERAGE_KEYS, SystemInfo

HIT_VERSION_FIELDS = ("index_version", "embedding_model", "chunker_version")
ANSWER_VERSION_FIELDS = ("prompt_template_version", "model")
# Answer `model` is the generator, not the embedding model: stored as details["answer_model"].
_INFO_FIELD = {"model": "answer_model"}


def reported_versions(
    hits: pd.DataFrame | None, outcomes: pd.DataFrame, hit_counts: dict[str, Counter] | None = None
) -> dict[str, dict[str, int]]:
    """``{field: {value: count}}`` over hits (hit fields) and answers (answer fields); the hit
    fields' counts may be given already counted (``hit_counts``, from :func:`count_in_tables`)
    instead of ``hits``.

    Unreported (null) values are not counted; fields nobody reported are absent. Values
    are ordered by descending count, then value.
    """
    counts: dict[str, Counter] = dict(hit_counts or {})
    for frame, fields in ((hits, HIT_VERSION_FIELDS), (outcomes, ANSWER_VERSION_FIELDS)):
        for name in fields:
            if frame is not None and name in frame.columns:
                counts[name] = Counter(frame[name].dropna().astype(str).tolist())
    return {
        name: dict(sorted(c.items(), key=lambda kv: (-kv[1], kv[0])))
        for name in (*HIT_VERSION_FIELDS, *ANSWER_VERSION_FIELDS)
        if (c := counts.get(name))
    }


def count_in_tables(tables: Iterable[pa.Table]) -> dict[str, Counter]:
    """The hit version fields' ``{field: Counter(value → count)}`` over Arrow ``tables`` (a run's hits
    one part at a time): counted in Arrow, never a Python value per hit."""
    import pyarrow.compute as pc

    counts: dict[str, Counter] = {}
    for table in tables:
        for name in HIT_VERSION_FIELDS:
            if name not in table.column_names:
                continue
            column = table.column(name)
            counter = counts.setdefault(name, Counter())
            if column.null_count == len(column):
                continue
            found = pc.value_counts(column.drop_null())
            for value, n in zip(found.field(0).to_pylist(), found.field(1).to_pylist(), strict=True):
                counter[str(value)] += n
    return counts


def with_reported_versions(info: SystemInfo, versions: dict[str, dict[str, int]]) -> SystemInfo:
    """``info`` completed by what the system reported.

    A version the adapter did not know takes the most common reported value. Every field
    that saw more than one value — or whose reported value differs from the adapter's
    own (e.g. a version endpoint) — is named in ``details["mixed_<field>"]`` as
    ``"value (count), …"``.
    """
    update: dict[str, str] = {}
    details = dict(info.details)
    for name, counts in versions.items():
        top = next(iter(counts))
        attr = _INFO_FIELD.get(name, name)
        known = getattr(info, attr, None) if attr in SystemInfo.model_fields else details.get(attr)
        if known is None:
            if attr in SystemInfo.model_fields:
                update[attr] = top
            else:
                details[attr] = top
        elif known not in counts:  # the system's own value is not among its hits' values
            counts = {f"{known} (system)": 0, **counts}
        if len(counts) > 1:
            details[f"mixed_{name}"] = ", ".join(
                value if n == 0 else f"{value} ({n})" for value, n in counts.items()
            )
    return info.model_copy(update={**update, "details": details})


def mixed_versions(info: SystemInfo) -> dict[str, str]:
    """The ``mixed_<field>`` entries of ``info.details`` (empty when versions held still)."""
    return {k: v for k, v in info.details.items() if k.startswith("mixed_")}


def apply_version_report(info: SystemInfo, report: object) -> SystemInfo:
    """``info`` with the versions a system reports about itself (a version endpoint or command).

    ``report`` is parsed JSON: keys naming :class:`SystemInfo` version fields fill those fields;
    a ``coverage`` object fills ``coverage`` (its numeric ``COVERAGE_KEYS``); other scalar keys
    go to ``details["reported_<key>"]``. A plain string (a command printing
    text) becomes ``details["reported_version"]``. Anything else is ignored.
    """
    details = dict(info.details)
    update: dict[str, object] = {}
    if isinstance(report, dict) and isinstance(report.get("coverage"), dict):
        numbers = {
            key: float(value)
            for key, value in report["coverage"].items()
            if key in COVERAGE_KEYS and isinstance(value, int | float) and not isinstance(value, bool)
        }
        if numbers:
            update["coverage"] = numbers
    if isinstance(report, str):
        text = report.strip().splitlines()[0][:200] if report.strip() else ""
        if text:
            details["reported_version"] = text
    elif isinstance(report, dict):
        versions = set(info.versions())
        for key, value in report.items():
            if value is None or isinstance(value, dict | list):
                continue
            if key in versions:
                update[key] = str(value)
            elif key in ("mode",) and info.mode is None:
                update["mode"] = str(value)
            else:
                details[f"reported_{key}"] = str(value)[:200]
    return info.model_copy(update={**update, "details": details})
