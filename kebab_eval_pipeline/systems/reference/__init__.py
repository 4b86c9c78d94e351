"""The built-in reference RAG system (SPEC §4.1): ingest, chunk, BM25 + MiniLM + RRF, extractive answers.

The two public classes are imported on first use, so ``kebab-eval ref`` does not
pay for pandas (the adapter's tables) when it only searches an index.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kebab_eval_pipeline.systems.reference.adapter import ReferenceSystem
    from kebab_eval_pipeline.systems.reference.index import ReferenceIndex

__all__ = ["ReferenceIndex", "ReferenceSystem"]


def __getattr__(name: str):
    if name == "ReferenceIndex":
        from kebab_eval_pipeline.systems.reference.index import ReferenceIndex

        return ReferenceIndex
    if name == "ReferenceSystem":
        from kebab_eval_pipeline.systems.reference.adapter import ReferenceSystem

        return ReferenceSystem
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
