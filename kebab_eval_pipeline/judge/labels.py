"""A person's labels of judged items: the file the labelling command writes and calibration reads.

A labels file is JSON Lines, one label per line::

    {"criterion": "groundedness", "query_id": "q7", "item_hash": "<64 hex>", "label": 4,
     "labeller": "ana", "labelled_at": "2026-12-06T15:10:00+00:00", "run_id": "nightly-12", "note": ""}

- ``criterion`` — ``groundedness`` or ``correctness`` (an answer), ``relevance`` (a retrieved hit);
- ``label`` — the person's score on the judge's own 0–5 scale (the prompt's wording is shown to
  the labeller), so agreement can be weighted by distance and a corrected mean is on the judge's
  scale;
- ``item_hash`` — what the person saw: the SHA-256 of the judged item (question, answer, citations
  and context passages; for relevance the question and passage). A label belongs to that exact
  item, so it is reused by any run whose item is the same, whichever judge scored it, and never
  applied to an answer that changed;
- ``labeller`` and ``labelled_at`` (ISO 8601 with a time zone) — who and when: a label is a
  person's record, never a judge's;
- ``run_id`` (where it was labelled) and ``note`` — informational.

One labeller labelling an item again replaces their earlier label (the later line wins); several
labellers on one item each keep theirs, and the item's reference label is their lower median.
Reading a bad file lists every bad line at once (file, line, query id, field, reason).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Literal

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from kebab_eval_pipeline.foundation.errors import InputError, Offender

LabelCriterion = Literal["groundedness", "correctness", "relevance"]
LABEL_CRITERIA: tuple[str, ...] = ("groundedness", "correctness", "relevance")
LABEL_MIN, LABEL_MAX = 0, 5
#: One row per label as read (latest per item and labeller).
LABEL_COLUMNS: dict[str, str] = {
    "criterion": "string",
    "query_id": "string",
    "item_hash": "string",
    "label": "int64",
    "labeller": "string",
    "labelled_at": "string",
    "run_id": "string",
    "note": "string",
}
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


class Label(BaseModel):
    """One person's verdict on one judged item (module doc)."""

    model_config = ConfigDict(extra="forbid")

    criterion: LabelCriterion
    query_id: str = Field(min_length=1)
    item_hash: str
    label: int = Field(ge=LABEL_MIN, le=LABEL_MAX, strict=True)
    labeller: str = Field(min_length=1)
    labelled_at: datetime
    run_id: str = ""
    note: str = ""

    @field_validator("item_hash")
    @classmethod
    def _hex(cls, value: str) -> str:
        if not _HEX64.match(value):
            raise ValueError("must be 64 lower-case hex digits (the SHA-256 of the labelled item)")
        return value

    @field_validator("labeller")
    @classmethod
    def _named(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must name the person who labelled")
        return value.strip()

    @field_validator("labelled_at")
    @classmethod
    def _zoned(cls, value: datetime) -> datetime:
        if value.tzinfo is None:
            raise ValueError("needs a time zone (e.g. 2026-12-06T15:10:00+00:00)")
        return value

    def to_line(self) -> str:
        """The label as one JSON line (no newline)."""
        return json.dumps(self.model_dump(mode="json"), ensure_ascii=False, sort_keys=False)


def item_hash(item_json: str) -> str:
    """The SHA-256 (hex) of a judged item's canonical JSON (``JudgeInput.to_json()`` or
    ``RelevanceInput.to_json()``): what a label is attached to."""
    return hashlib.sha256(item_json.encode("utf-8")).hexdigest()


def _offenders(path: str, line: int, raw: object, exc: ValidationError) -> list[Offender]:
    query_id = raw.get("query_id") if isinstance(raw, dict) else None
    out = []
    for error in exc.errors():
        field = ".".join(str(p) for p in error["loc"]) or None
        reason = error["msg"].removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            reason = f"unknown field (known: {', '.join(Label.model_fields)})"
        out.append(Offender(path, reason, f"line {line}", str(query_id) if query_id else None, field))
    return out


def parse_labels(text: str, source: str) -> list[Label]:
    """The labels of a labels file's ``text`` (``source`` names it in errors), in file order.

    Raises :class:`InputError` listing every bad line: not JSON, not an object, a missing or
    unknown field, a label outside 0–5 or not an integer, a bad hash, no labeller, a time without
    a zone. Blank lines are skipped."""
    labels: list[Label] = []
    offenders: list[Offender] = []
    # Lines end at "\n" only: a label's text may hold U+0085 or U+2028, which splitlines() breaks at.
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            offenders.append(Offender(source, f"not JSON: {exc.msg}", f"line {number}, column {exc.colno}"))
            continue
        if not isinstance(raw, dict):
            offenders.append(Offender(source, "a label is a JSON object", f"line {number}"))
            continue
        try:
            labels.append(Label.model_validate(raw))
        except ValidationError as exc:
            offenders += _offenders(source, number, raw, exc)
    if offenders:
        raise InputError(f"{source}: {len(offenders)} problem(s) in the labels file", offenders)
    return labels


def read_labels(path: Path) -> pd.DataFrame:
    """The labels of the file at ``path`` as a table (:data:`LABEL_COLUMNS`), one row per item
    and labeller (a later line replaces an earlier one of the same labeller and item); an absent
    file is no label. Raises :class:`InputError` for a bad file (see :func:`parse_labels`)."""
    return read_labels_file(path)[0]


def read_labels_file(path: Path) -> tuple[pd.DataFrame, str | None]:
    """:func:`read_labels` and the SHA-256 of the bytes read (None: no file), from one read."""
    if not path.exists():
        return labels_table([]), None
    try:
        data = path.read_bytes()
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError("cannot read the labels file", [Offender(str(path), str(exc))]) from None
    return labels_table(parse_labels(text, str(path))), hashlib.sha256(data).hexdigest()


def labels_table(labels: Iterable[Label]) -> pd.DataFrame:
    """``labels`` as a table (:data:`LABEL_COLUMNS`), the latest per (criterion, item, labeller)."""
    rows = [label.model_dump(mode="json") for label in labels]
    table = pd.DataFrame(rows, columns=list(LABEL_COLUMNS))
    table = table.drop_duplicates(["criterion", "item_hash", "labeller"], keep="last")
    return table.reset_index(drop=True).astype(LABEL_COLUMNS)


#: One reference label per (criterion, item): :func:`reference_labels`.
REFERENCE_COLUMNS: dict[str, str] = {
    "criterion": "string",
    "query_id": "string",
    "item_hash": "string",
    "label": "int64",
    "labellers": "int64",
}


def reference_labels(labels: pd.DataFrame) -> pd.DataFrame:
    """One reference label per (criterion, item) (:data:`REFERENCE_COLUMNS`): the lower median of
    its labellers' labels (one labeller: their label), with ``labellers`` — how many people
    labelled it. Vectorised: the labels sorted within each item, the ``(n − 1) // 2``-th taken."""
    if labels.empty:
        return pd.DataFrame({c: pd.Series([], dtype=t) for c, t in REFERENCE_COLUMNS.items()})
    ordered = labels.sort_values(["criterion", "item_hash", "label"], kind="stable")
    group = ordered.groupby(["criterion", "item_hash"], sort=False, observed=True)
    size = group["label"].transform("size").to_numpy()
    median = ordered[group.cumcount().to_numpy() == (size - 1) // 2]
    counts = group["labeller"].nunique().rename("labellers").reset_index()
    out = median[["criterion", "query_id", "item_hash", "label"]].merge(counts, on=["criterion", "item_hash"])
    return out[list(REFERENCE_COLUMNS)].astype(REFERENCE_COLUMNS).reset_index(drop=True)


def append_label(path: Path, label: Label) -> None:
    """Append one label to the file at ``path`` (created with its folder when absent), flushed and
    synced before returning: a session that ends anywhere keeps every label given before."""
    path.parent.mkdir(parents=True, exist_ok=True)
    needs_newline = False  # a hand-edited file without its last newline: read its last byte only
    if path.exists() and path.stat().st_size > 0:
        with path.open("rb") as tail:
            tail.seek(-1, os.SEEK_END)
            needs_newline = tail.read(1) != b"\n"
    with path.open("a", encoding="utf-8") as handle:
        handle.write(("\n" if needs_newline else "") + label.to_line() + "\n")
        handle.flush()
        os.fsync(handle.fileno())
