"""Stale-golden detection (SPEC §3.3): gold references the system's index does not hold.

A golden set curated months ago points at chunk ids, documents, files and sections; after a
re-chunk, a rename or a deleted note some of those no longer exist, and every query that
relies on them silently scores 0. Checking against the index's catalogue before any query
runs turns that into a list a curator can fix. Pending queries are skipped: by definition
the corpus does not hold their answer yet.
"""

from __future__ import annotations

import pandas as pd
import pyarrow as pa

from kebab_eval_pipeline.golden.tables import typed_frame
from kebab_eval_pipeline.metrics.matching import HEADING_SEPARATOR, normalise_headings, normalise_paths
from kebab_eval_pipeline.metrics.verification import files_exist

STALE_COLUMNS: dict[str, str] = {
    "query_id": "string",
    "support_idx": "int64",
    "field": "string",
    "value": "string",
    "reason": "string",
    "severity": "string",  # error: never resolvable | warning: chunk id gone, its document still indexed
}


def _paths(values: pd.Series) -> pd.Series:
    normalised = normalise_paths(
        pa.array(values.astype("string").to_numpy(na_value=None), type=pa.large_string())
    )
    return pd.Series(normalised.to_pandas().to_numpy(), index=values.index, dtype="string")


def _section_keys(doc_paths: pd.Series, heading_paths: pd.Series) -> pd.Series:
    """``path\0heading > path`` per row, aligned by position (exploded frames repeat index labels)."""
    headings = normalise_headings(list(heading_paths)).to_pandas().to_numpy()
    paths = _paths(doc_paths.reset_index(drop=True)).to_numpy()
    return pd.Series(paths, dtype="string") + "\0" + pd.Series(headings, dtype="string")


def stale_references(queries: pd.DataFrame, supports: pd.DataFrame, catalogue: pd.DataFrame) -> pd.DataFrame:
    """Gold references missing from ``catalogue`` (``CATALOGUE_COLUMNS``, one row per indexed chunk).

    Inputs: the golden ``queries`` and ``supports`` tables. Checks each non-pending support's
    ``chunk_id`` (a chunk of the index), ``doc_id`` (a document of the index), ``rel_path`` (a
    document path of the index, normalised) and ``heading_path`` (a section of that document:
    some chunk's heading path starts with it). Output: :data:`STALE_COLUMNS`, one row per
    missing reference, ordered by query and support; empty when everything resolves. ``severity``
    is ``warning`` only for a chunk id whose support also names a document the index holds.
    """
    pending = queries.loc[queries["pending"].astype(bool), "query_id"]
    s = supports[~supports["query_id"].isin(pending)]
    found: list[pd.DataFrame] = []

    def report(
        rows: pd.DataFrame, field: str, values: pd.Series, reason: str, severity: str = "error"
    ) -> None:
        if len(rows):
            columns = {
                "query_id": rows["query_id"],
                "support_idx": rows["support_idx"],
                "field": field,
                "value": values.astype("string"),
                "reason": reason,
                "severity": severity,
            }
            found.append(pd.DataFrame(columns))

    known_paths = set(_paths(catalogue["doc_path"]).dropna())
    # A chunk id from another chunker version is the common case while iterating on chunking:
    # when the support also names a document the index holds, document-level matching (and the
    # comparison's fallback) still works, so it is a warning; otherwise nothing can ever match.
    has_chunk = s["chunk_id"].notna() & (s["chunk_id"] != "")
    missing = s[has_chunk & ~s["chunk_id"].isin(catalogue["chunk_id"])]
    doc_known = (
        missing["doc_id"].isin(catalogue["doc_id"]) | _paths(missing["rel_path"]).isin(known_paths)
    ).to_numpy()
    reason = "no chunk with this id in the index"
    report(missing[~doc_known], "chunk_id", missing.loc[~doc_known, "chunk_id"], reason)
    report(
        missing[doc_known],
        "chunk_id",
        missing.loc[doc_known, "chunk_id"],
        reason + " (its document is indexed: chunk-level matching will miss)",
        "warning",
    )

    has_doc = s["doc_id"].notna() & (s["doc_id"] != "")
    missing = s[has_doc & ~s["doc_id"].isin(catalogue["doc_id"])]
    report(missing, "doc_id", missing["doc_id"], "no document with this id in the index")

    has_path = s["rel_path"].notna() & (s["rel_path"] != "")
    gold_paths = _paths(s.loc[has_path, "rel_path"])
    path_missing = ~gold_paths.isin(known_paths)
    rows = s.loc[has_path][path_missing.to_numpy()]
    report(rows, "rel_path", rows["rel_path"], "no document at this path in the index")

    # Sections: every prefix of every chunk's heading path is a section the index can return.
    with_heading = s.loc[has_path][~path_missing.to_numpy()]
    with_heading = with_heading[with_heading["heading_path"].map(lambda h: h is not None and len(h) > 0)]
    if len(with_heading):
        prefixes = catalogue[["doc_path", "heading_path"]].copy()
        prefixes["heading_path"] = prefixes["heading_path"].map(
            lambda h: [list(h[: i + 1]) for i in range(len(h))] if h is not None else []
        )
        prefixes = prefixes.explode("heading_path").dropna(subset=["heading_path"])
        known_sections = set(_section_keys(prefixes["doc_path"], prefixes["heading_path"]).dropna())
        keys = _section_keys(with_heading["rel_path"], with_heading["heading_path"])
        rows = with_heading[~keys.isin(known_sections).to_numpy()]
        shown = rows["heading_path"].map(lambda h: HEADING_SEPARATOR.join(map(str, h)))
        report(rows, "heading_path", shown, "no section with this heading path in that document")

    if not found:
        return typed_frame([], STALE_COLUMNS)
    out = pd.concat(found, ignore_index=True).astype(STALE_COLUMNS)
    return out.sort_values(["query_id", "support_idx", "field"], kind="stable", ignore_index=True)


def missing_documents(queries: pd.DataFrame, supports: pd.DataFrame, source_root: str) -> pd.DataFrame:
    """Gold documents missing from the source tree, for a system that cannot list its index.

    A system that cannot list what it holds (a command, a service, a python object without
    ``catalogue()``) still has its documents somewhere: the run config's ``source_root``, where its
    hits are verified. Each non-pending support's ``rel_path`` that names no regular file under
    ``source_root`` (a path escaping it, or a symlink out of it, names none) is one row of
    :data:`STALE_COLUMNS` (field ``rel_path``, severity ``error``): the query can never be found
    again. Chunk ids, doc ids and sections cannot be checked this way and are not."""
    pending = queries.loc[queries["pending"].astype(bool), "query_id"]
    s = supports[~supports["query_id"].isin(pending)]
    s = s[s["rel_path"].notna() & (s["rel_path"] != "")]
    if not len(s):
        return typed_frame([], STALE_COLUMNS)
    paths = _paths(s["rel_path"])
    exists = files_exist(source_root, paths.fillna("").tolist())
    rows = s[~exists]
    if not len(rows):
        return typed_frame([], STALE_COLUMNS)
    out = pd.DataFrame(
        {
            "query_id": rows["query_id"],
            "support_idx": rows["support_idx"],
            "field": "rel_path",
            "value": rows["rel_path"].astype("string"),
            "reason": "no file at this path under source_root",
            "severity": "error",
        }
    ).astype(STALE_COLUMNS)
    return out.sort_values(["query_id", "support_idx"], kind="stable", ignore_index=True)
