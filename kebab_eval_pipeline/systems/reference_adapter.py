"""The reference system as a :class:`~kebab_eval_pipeline.systems.base.SystemUnderTest`."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from kebab_eval_pipeline.contract import Answer, Hit, SystemInfo
from kebab_eval_pipeline.golden.tables import typed_frame
from kebab_eval_pipeline.reference.answer import DEFAULT_GATE_FEATURE, GATE_FEATURES
from kebab_eval_pipeline.reference.fusion import FusionSpec
from kebab_eval_pipeline.reference.index import ReferenceIndex
from kebab_eval_pipeline.systems.base import CATALOGUE_COLUMNS
from kebab_eval_pipeline.systems.capabilities import Capabilities
from kebab_eval_pipeline.systems.kinds.reference import REFERENCE_CAPABILITIES
from kebab_eval_pipeline.systems.outcome import QueryRequest
from kebab_eval_pipeline.systems.per_query import PerQueryAdapter, SearchReply


class ReferenceSystem(PerQueryAdapter):
    """In-process adapter over a :class:`ReferenceIndex` (one query at a time: the work is
    CPU-bound and in-process, so threads would only contend for the GIL).

    ``mode`` is fixed per system (a run compares systems, and the mode is part
    of what a system *is*). ``gate_threshold`` overrides the index's answer
    score-gate threshold; None keeps the index default. ``fusion`` (hybrid mode) likewise
    overrides the index's :class:`~kebab_eval_pipeline.reference.fusion.FusionSpec`.
    """

    def __init__(
        self,
        index: ReferenceIndex,
        mode: str = "lexical",
        gate_threshold: float | None = None,
        fusion: FusionSpec | None = None,
        gate_feature: str | None = None,
    ) -> None:
        # Fail at construction, not on the first query: a misconfigured mode (or a
        # missing vectors extra) would otherwise turn every row of a run into the same error.
        index.check_mode(mode)
        self.index = index
        self.mode = mode
        self.gate_threshold = index.gate_threshold if gate_threshold is None else gate_threshold
        self.fusion = index.fusion if fusion is None else fusion
        self.gate_feature = DEFAULT_GATE_FEATURE if gate_feature is None else gate_feature
        if self.gate_feature not in GATE_FEATURES:
            raise ValueError(
                f"unknown gate feature {gate_feature!r}; expected one of {', '.join(GATE_FEATURES)}"
            )

    def capabilities(self) -> Capabilities:
        """What its runs carry (``kinds.reference.REFERENCE_CAPABILITIES``)."""
        return REFERENCE_CAPABILITIES

    def info(self) -> SystemInfo:
        """Versions and settings; ``details["gate_threshold"]`` and ``["gate_feature"]`` are this
        adapter's refusal gate."""
        info = self.index.info(self.mode, self.fusion)
        info.details["gate_threshold"] = f"{self.gate_threshold:g}"
        info.details["gate_feature"] = self.gate_feature
        return info

    def search(self, query: str, k: int) -> list[Hit]:
        """Top-``k`` hits in this system's mode (``ValueError`` for ``k < 1``)."""
        return self.index.search(query, k=k, mode=self.mode, fusion=self.fusion)

    def ask(self, query: str, hits: list[Hit]) -> Answer:
        """Extractive answer from the hits' full chunk texts (snippet for unknown chunk ids)."""
        return self.index.ask(query, hits, gate_threshold=self.gate_threshold, gate_feature=self.gate_feature)

    def search_one(self, request: QueryRequest, k: int) -> SearchReply:
        # columns straight from the index's chunks: no Hit model per hit on the way to the table
        return SearchReply(
            self.index.search_block(request.query, k=k, mode=self.mode, fusion=self.fusion), [], 1
        )

    def ask_one(self, request: QueryRequest, k: int, hits: Sequence[Hit]) -> tuple[Answer, int]:
        return self.ask(request.query, hits), 1

    def known_chunk_ids(self) -> frozenset[str]:
        """All chunk ids of the index."""
        return self.index.known_chunk_ids()

    def catalogue(self) -> pd.DataFrame:
        """Every chunk of the index (``CATALOGUE_COLUMNS``), for stale-golden checks."""
        chunks = self.index.chunks
        return typed_frame(
            {
                "chunk_id": [c.chunk_id for c in chunks],
                "doc_id": [c.doc_id for c in chunks],
                "doc_path": [c.doc_path for c in chunks],
                "heading_path": [list(c.heading_path) for c in chunks],
            },
            CATALOGUE_COLUMNS,
        )
