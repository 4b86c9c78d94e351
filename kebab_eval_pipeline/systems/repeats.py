"""A run's repeats: each query asked again, ``repeat`` times in all, every answer kept.

A nondeterministic system under test (sampling at temperature > 0, approximate vector search, a
judge in the loop) gives different results to the same query. With ``repeat: N`` (N > 1) each
shard asks its queries N times. Repeat 1 is the run's ordinary ``retrieval_results`` tables,
unchanged (a reader that knows nothing of repeats sees one complete, ordinary run); repeats 2..N
are stored beside them in three tables of the same columns plus ``repeat`` (int32, 2..N):
``repeat_outcomes``, ``repeat_hits``, ``repeat_citations`` (:data:`REPEAT_TABLES`), rows ordered by
repeat, then in the golden set's order. A run with ``repeat: 1`` has none of these tables: its
artifacts are byte for byte those of a run before repeats existed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from kebab_eval_pipeline.systems.base import CITATION_COLUMNS, HIT_COLUMNS, OUTCOME_COLUMNS
from kebab_eval_pipeline.systems.runner import RetrievalPiece, RetrievalResults

REPEAT_COLUMN = "repeat"
REPEAT_DTYPE = "int32"
#: Stored table name → the ordinary table it repeats, and that table's declared columns.
REPEAT_TABLES: dict[str, tuple[str, dict[str, str]]] = {
    "repeat_outcomes": ("outcomes", OUTCOME_COLUMNS),
    "repeat_hits": ("hits", HIT_COLUMNS),
    "repeat_citations": ("citations", CITATION_COLUMNS),
}


@dataclass
class RepeatTables:
    """Repeats 2..``count`` of a run (or of one shard): outcomes, hits and citations, each with a
    ``repeat`` column. ``hits_reader``: when set, reads one repeat's hits (the scoring step reads
    them from the store a repeat at a time instead of holding every repeat's hits)."""

    count: int
    outcomes: pd.DataFrame
    hits: pd.DataFrame
    citations: pd.DataFrame
    hits_reader: Callable[[int], pd.DataFrame] | None = None

    def tables(self) -> dict[str, pd.DataFrame]:
        """The stored tables (:data:`REPEAT_TABLES`)."""
        return {
            "repeat_outcomes": self.outcomes,
            "repeat_hits": self.hits,
            "repeat_citations": self.citations,
        }

    @classmethod
    def from_tables(cls, tables: dict[str, pd.DataFrame], count: int) -> RepeatTables | None:
        """The repeats among stored ``tables`` (None when there are none: a run of one repeat)."""
        if "repeat_outcomes" not in tables:
            return None
        return cls(count, tables["repeat_outcomes"], tables["repeat_hits"], tables["repeat_citations"])

    def hits_of(self, repeat: int) -> pd.DataFrame:
        """Repeat ``repeat``'s hits (2..count), without the ``repeat`` column, index from 0."""
        if self.hits_reader is not None:
            return self.hits_reader(repeat)
        return _one(self.hits, repeat)

    def results_of(self, repeat: int, first: RetrievalResults) -> RetrievalResults:
        """Repeat ``repeat`` (2..count) as a run's results: its outcomes, hits and citations, with
        ``first``'s known chunks and system info (one system, asked again)."""
        return RetrievalResults(
            outcomes=_one(self.outcomes, repeat),
            hits=self.hits_of(repeat),
            citations=_one(self.citations, repeat),
            known_chunks=first.known_chunks,
            system=first.system,
        )


def _one(frame: pd.DataFrame, repeat: int) -> pd.DataFrame:
    if REPEAT_COLUMN not in frame.columns:
        raise ValueError("this repeats table was read without its repeat column")
    keep = frame[REPEAT_COLUMN].to_numpy() == repeat
    return frame.loc[keep].drop(columns=REPEAT_COLUMN).reset_index(drop=True)


def tagged(frame: pd.DataFrame, repeat: int) -> pd.DataFrame:
    """``frame`` with a ``repeat`` column (last) set to ``repeat``."""
    out = frame.copy(deep=False)
    out[REPEAT_COLUMN] = np.full(len(frame), repeat, dtype=REPEAT_DTYPE)
    return out


def repeat_tables(pieces: dict[int, RetrievalPiece], count: int) -> RepeatTables:
    """The repeats table of one shard from its pieces of repeats 2..``count`` (``{repeat: piece}``,
    each a :func:`~.runner.run_piece` of the shard's queries)."""
    ordered = sorted(pieces.items())

    def table(name: str, columns: dict[str, str]) -> pd.DataFrame:
        frames = [tagged(getattr(p, name), r) for r, p in ordered]
        return pd.concat(frames, ignore_index=True).astype({**columns, REPEAT_COLUMN: REPEAT_DTYPE})

    return RepeatTables(
        count,
        table("outcomes", OUTCOME_COLUMNS),
        table("hits", HIT_COLUMNS),
        table("citations", CITATION_COLUMNS),
    )


def merge_repeat_tables(parts: list[RepeatTables | None]) -> RepeatTables | None:
    """The run's repeats from its shards' (in shard order): rows by repeat, then shard order (so
    each repeat lists the golden queries in order). None when no shard has repeats."""
    found = [p for p in parts if p is not None]
    if not found:
        return None
    if len(found) != len(parts):
        raise ValueError("some shards of this run have repeats and some do not")
    count = found[0].count

    def table(name: str) -> pd.DataFrame:
        frames = [getattr(p, name) for p in found]
        merged = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
        if len(frames) == 1:
            return merged
        # Stable: within a repeat, shards stay in order.
        order = np.argsort(merged[REPEAT_COLUMN].to_numpy(), kind="stable")
        return merged.iloc[order].reset_index(drop=True)

    return RepeatTables(count, table("outcomes"), table("hits"), table("citations"))
