"""What changed between two versions of a golden set: queries added, removed, and changed.

A query's *gold* is everything that decides its scores: the question text, ``answerable``, the
answer constraints (``must_contain``, ``forbidden``, ``gold_claim_substr``, ``recency_rule``,
``expected_kind``, ``required_support_groups``) and its supports (every field, in order: a
support's grade is its relevance label, and ``required_support_groups`` points at supports by
position). Labels that only slice the reports (category, tags, difficulty, …) are not gold.
Queries are matched by id.

:func:`diff_golden` compares the ``queries``/``supports`` tables of two sets (``golden.tables``)
and returns a :class:`GoldenDiff`: the ids added (only in b), removed (only in a), with a changed
question, with changed supports, with other gold changed, and how many are unchanged. A
comparison of two runs on different golden sets keeps only the unchanged queries
(``compare.runs``); ``kebab-eval golden diff`` prints the diff (:func:`diff_markdown`,
:func:`diff_document`).

Vectorised: ids are matched by one outer merge; each gold field is compared through one 64-bit
hash per row (``pd.util.hash_pandas_object``), supports hashed per row and combined per query.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from kebab_eval_pipeline.foundation.markdown_text import md_code, md_text
from kebab_eval_pipeline.golden.tables import SUPPORT_COLUMNS

__all__ = [
    "CHANGED_GOLD_COLUMNS",
    "DIFF_KINDS",
    "GOLD_QUERY_FIELDS",
    "GoldenDiff",
    "changed_gold",
    "diff_document",
    "diff_golden",
    "diff_markdown",
    "no_changed_gold",
]

#: Query fields whose change changes how a query is scored, in report order ("query" is the question).
GOLD_QUERY_FIELDS: tuple[str, ...] = (
    "query",
    "answerable",
    "must_contain",
    "forbidden",
    "gold_claim_substr",
    "required_support_groups",
    "recency_rule",
    "expected_kind",
)
#: Gold fields other than the question and the supports (a change of any is "other gold changed").
OTHER_GOLD_FIELDS: tuple[str, ...] = GOLD_QUERY_FIELDS[1:]
#: The columns of :attr:`GoldenDiff.changes`: one flag per gold field, then ``supports``.
CHANGE_FLAGS: tuple[str, ...] = (*GOLD_QUERY_FIELDS, "supports")
_SUPPORT_FIELDS = tuple(c for c in SUPPORT_COLUMNS if c != "query_id")

#: The kinds of difference, in report order: their counts are :meth:`GoldenDiff.counts`.
DIFF_KINDS: tuple[str, ...] = (
    "added",
    "removed",
    "question_changed",
    "supports_changed",
    "other_gold_changed",
)
#: How the reports name each kind.
KIND_LABELS: dict[str, str] = {
    "added": "added",
    "removed": "removed",
    "question_changed": "question changed",
    "supports_changed": "supports changed",
    "other_gold_changed": "other gold changed",
}

#: Columns of :func:`changed_gold`.
CHANGED_GOLD_COLUMNS: dict[str, str] = {"query_id": "string", "fields": "object"}


def _hash_column(values: pd.Series) -> np.ndarray:
    """A stable uint64 per value; lists (and other objects) hash through their text form."""
    if values.dtype == object:
        values = values.map(
            lambda v: None if v is None or v is pd.NA else repr(list(v)) if _is_list(v) else v
        )
        values = values.astype("string")
    return pd.util.hash_pandas_object(values, index=False).to_numpy()


def _is_list(value) -> bool:
    return isinstance(value, (list, tuple, np.ndarray))


def _support_hashes(supports: pd.DataFrame) -> pd.Series:
    """One uint64 per query summarising its supports (all fields, with their order)."""
    if len(supports) == 0:
        return pd.Series(dtype="UInt64")
    combined = np.zeros(len(supports), dtype=np.uint64)
    for field in _SUPPORT_FIELDS:
        if field in supports.columns:
            # Multiply-then-add keeps field positions apart (a ≠ b swapped between fields).
            combined = combined * np.uint64(1_000_003) + _hash_column(supports[field])
    # Mix each row's fields non-linearly: a linear combination summed over rows could not tell
    # which support_idx went with which support.
    combined = pd.util.hash_array(combined)
    keyed = pd.DataFrame({"query_id": supports["query_id"].astype(object), "h": combined})
    # A sum is order-free, but support_idx is hashed in, so reordering supports still shows.
    return keyed.groupby("query_id", sort=False)["h"].sum().astype("UInt64")


def _ids(queries: pd.DataFrame) -> pd.Series:
    return queries["query_id"].astype("string").reset_index(drop=True)


def _changes(
    queries_a: pd.DataFrame,
    supports_a: pd.DataFrame,
    queries_b: pd.DataFrame,
    supports_b: pd.DataFrame,
    ids: pd.Series,
) -> pd.DataFrame:
    """For each id of ``ids`` (in both sets): ``query_id`` and one bool per :data:`CHANGE_FLAGS`."""
    flags: dict[str, np.ndarray] = {}
    if len(ids):
        qa = queries_a.set_index(queries_a["query_id"].astype("string")).loc[ids]
        qb = queries_b.set_index(queries_b["query_id"].astype("string")).loc[ids]
    for field in GOLD_QUERY_FIELDS:
        if len(ids) and field in qa.columns and field in qb.columns:
            flags[field] = _hash_column(qa[field].reset_index(drop=True)) != _hash_column(
                qb[field].reset_index(drop=True)
            )
        else:
            flags[field] = np.zeros(len(ids), dtype=bool)
    keys = ids.astype(object).to_numpy()
    # reindex keeps the exact uint64 hashes (a map through Arrow strings would turn them to floats).
    ha = _support_hashes(supports_a).reindex(keys).reset_index(drop=True)
    hb = _support_hashes(supports_b).reindex(keys).reset_index(drop=True)
    # A query without supports hashes to NA on its side: NA vs a value is a change, NA vs NA is not.
    flags["supports"] = (ha.isna() != hb.isna()).to_numpy(dtype=bool) | (
        ha.notna() & hb.notna() & (ha != hb).fillna(False)
    ).to_numpy(dtype=bool)
    return pd.DataFrame({"query_id": ids.to_numpy(), **flags}).astype({"query_id": "string"})


@dataclass(frozen=True)
class GoldenDiff:
    """The difference from golden set a to golden set b, queries matched by id.

    ``added``/``removed``/``unchanged`` are sorted id Series (string dtype); ``changes`` has one
    row per query in both sets whose gold changed — ``query_id`` and a bool per
    :data:`CHANGE_FLAGS` — sorted by id; ``n_a``/``n_b`` are the sets' sizes."""

    n_a: int
    n_b: int
    added: pd.Series
    removed: pd.Series
    changes: pd.DataFrame
    unchanged: pd.Series

    @property
    def is_empty(self) -> bool:
        """True when both sets hold the same queries with the same gold (labels may differ)."""
        return not (len(self.added) or len(self.removed) or len(self.changes))

    def ids(self, kind: str) -> list[str]:
        """The sorted ids of one of :data:`DIFF_KINDS` (a query may be of several changed kinds)."""
        if kind == "added":
            return self.added.tolist()
        if kind == "removed":
            return self.removed.tolist()
        return self.changes.loc[self._flag(kind), "query_id"].tolist()

    def _flag(self, kind: str) -> np.ndarray:
        c = self.changes
        if kind == "question_changed":
            return c["query"].to_numpy(dtype=bool)
        if kind == "supports_changed":
            return c["supports"].to_numpy(dtype=bool)
        if kind == "other_gold_changed":
            return c[list(OTHER_GOLD_FIELDS)].to_numpy(dtype=bool).any(axis=1)
        raise ValueError(f"unknown kind of golden difference {kind!r}: one of {DIFF_KINDS}")

    def counts(self) -> dict[str, int]:
        """Queries of each of :data:`DIFF_KINDS`, then ``unchanged`` (in both, same gold)."""
        out = {"added": len(self.added), "removed": len(self.removed)}
        out.update({k: int(self._flag(k).sum()) for k in DIFF_KINDS[2:]})
        out["unchanged"] = len(self.unchanged)
        return out

    @property
    def n_dropped(self) -> int:
        """Queries of a or b that are not unchanged in both: what a comparison leaves out."""
        return len(self.added) + len(self.removed) + len(self.changes)

    def changed_fields(self) -> pd.DataFrame:
        """The changed queries as :data:`CHANGED_GOLD_COLUMNS`: ``query_id`` and the list of
        changed fields (from :data:`GOLD_QUERY_FIELDS`, then ``"supports"``)."""
        if not len(self.changes):
            return no_changed_gold()
        matrix = self.changes[list(CHANGE_FLAGS)].to_numpy(dtype=bool)
        names = np.array(CHANGE_FLAGS, dtype=object)
        # one list per changed query (the table's cells are lists): the only per-row step
        fields = [names[row].tolist() for row in matrix]
        return pd.DataFrame({"query_id": self.changes["query_id"].to_numpy(), "fields": fields}).astype(
            CHANGED_GOLD_COLUMNS
        )


def diff_golden(
    queries_a: pd.DataFrame,
    supports_a: pd.DataFrame,
    queries_b: pd.DataFrame,
    supports_b: pd.DataFrame,
) -> GoldenDiff:
    """The :class:`GoldenDiff` from golden set a to b, given each set's ``queries`` and
    ``supports`` tables (:func:`~kebab_eval_pipeline.golden.tables.queries_table`,
    :func:`~kebab_eval_pipeline.golden.tables.supports_table`, or a stored run's golden set).

    Ids are matched with one outer merge: only in b is *added*, only in a *removed*; the queries in
    both are compared field by field (see the module docstring for what counts as gold)."""
    ids_a, ids_b = _ids(queries_a), _ids(queries_b)
    merged = pd.DataFrame({"query_id": ids_a}).merge(
        pd.DataFrame({"query_id": ids_b}), on="query_id", how="outer", indicator=True, sort=True
    )
    side = merged["_merge"]
    both = merged.loc[side == "both", "query_id"].reset_index(drop=True)
    changes = _changes(queries_a, supports_a, queries_b, supports_b, both)
    changed = changes[list(CHANGE_FLAGS)].to_numpy(dtype=bool).any(axis=1)
    return GoldenDiff(
        n_a=len(ids_a),
        n_b=len(ids_b),
        added=merged.loc[side == "right_only", "query_id"].reset_index(drop=True),
        removed=merged.loc[side == "left_only", "query_id"].reset_index(drop=True),
        changes=changes[changed].reset_index(drop=True),
        unchanged=both[~changed].reset_index(drop=True),
    )


def no_changed_gold() -> pd.DataFrame:
    """The empty :func:`changed_gold` table (identical golden sets)."""
    return pd.DataFrame(columns=list(CHANGED_GOLD_COLUMNS)).astype(CHANGED_GOLD_COLUMNS)


def changed_gold(
    queries_a: pd.DataFrame,
    supports_a: pd.DataFrame,
    queries_b: pd.DataFrame,
    supports_b: pd.DataFrame,
) -> pd.DataFrame:
    """Queries present in both golden sets whose gold differs, with the fields that changed:
    :data:`CHANGED_GOLD_COLUMNS` — ``query_id`` and ``fields`` (a list drawn from
    :data:`GOLD_QUERY_FIELDS` plus ``"supports"``), ordered by query id; empty when nothing
    changed or no query is shared (:meth:`GoldenDiff.changed_fields` of :func:`diff_golden`)."""
    return diff_golden(queries_a, supports_a, queries_b, supports_b).changed_fields()


def diff_document(diff: GoldenDiff, a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """The diff as one JSON-ready mapping: ``a`` and ``b`` (what each side is: given as is, e.g.
    source, kind, name, sha256, queries), ``identical``, ``counts`` (:meth:`GoldenDiff.counts`),
    then the ids of each of :data:`DIFF_KINDS` — ``other_gold_changed`` as ``{query_id, fields}``
    rows, the fields other than the question and the supports."""
    doc: dict[str, Any] = {"a": dict(a), "b": dict(b), "identical": diff.is_empty, "counts": diff.counts()}
    for kind in DIFF_KINDS[:-1]:
        doc[kind] = diff.ids(kind)
    doc["other_gold_changed"] = _other_rows(diff)
    return doc


def _other_rows(diff: GoldenDiff, limit: int | None = None) -> list[dict[str, Any]]:
    """``{query_id, fields}`` of the queries whose gold other than question and supports changed
    (the first ``limit``)."""
    other = diff.changes[diff._flag("other_gold_changed")]
    other = other if limit is None else other.head(limit)
    fields = other[list(OTHER_GOLD_FIELDS)].to_numpy(dtype=bool)
    names = np.array(OTHER_GOLD_FIELDS, dtype=object)
    return [
        {"query_id": q, "fields": names[row].tolist()}
        for q, row in zip(other["query_id"].tolist(), fields, strict=True)
    ]


def diff_markdown(diff: GoldenDiff, a: Mapping[str, Any], b: Mapping[str, Any], max_ids: int = 50) -> str:
    """The diff as Markdown: a title naming both sides (``source`` of ``a`` and ``b``, with their
    ``name``, ``sha256`` and ``queries`` when given), a table of counts per kind, then one line
    per kind that has queries listing their ids (the first ``max_ids``, then how many more)."""
    lines = [f"# Golden-set diff: {md_code(a.get('source'))} → {md_code(b.get('source'))}", ""]
    for letter, side in (("a", a), ("b", b)):
        lines.append(f"- {letter}: {_side_text(side)}")
    lines.append("")
    counts = diff.counts()
    if diff.is_empty:
        lines.append(
            f"No difference: the same {counts['unchanged']} queries, with the same questions, supports "
            "and other gold."
        )
        return "\n".join(lines) + "\n"
    lines += ["| change | queries |", "|---|---:|"]
    lines += [f"| {KIND_LABELS[k]} | {counts[k]} |" for k in DIFF_KINDS]
    lines += [f"| unchanged | {counts['unchanged']} |", ""]
    for kind in DIFF_KINDS:
        if not counts[kind]:
            continue
        if kind == "other_gold_changed":
            ids = [f"{r['query_id']} ({', '.join(r['fields'])})" for r in _other_rows(diff, max_ids)]
        else:
            ids = diff.ids(kind)
        shown = ", ".join(md_text(i) for i in ids[:max_ids])
        more = (
            f", … {counts[kind] - max_ids} more (--format json lists all)" if counts[kind] > max_ids else ""
        )
        lines.append(f"- {KIND_LABELS[kind]} ({counts[kind]}): {shown}{more}")
    return "\n".join(lines) + "\n"


def _side_text(side: Mapping[str, Any]) -> str:
    bits = [md_code(side.get("source"))]
    details = []
    if side.get("kind") == "run":
        details.append("stored run")
    if side.get("name"):
        details.append(f"golden set {md_text(side['name'])}")
    if side.get("sha256"):
        details.append(f"sha256 {md_text(str(side['sha256'])[:12])}")
    if side.get("queries") is not None:
        details.append(f"{side['queries']} queries")
    return bits[0] + (f" ({', '.join(details)})" if details else "")
