"""The built-in reference RAG system (SPEC §4.1): ingest, chunk, BM25 + MiniLM + RRF, extractive answers.

A system under test in its own right, with its own CLI (``kebab-eval ref``) and HTTP server; the
evaluation reaches it through its adapter, ``ReferenceSystem`` in
:mod:`kebab_eval_pipeline.systems.reference_adapter`. It imports nothing from the evaluation side
of the package (systems, metrics, compare, judge, orchestration, the CLI, settings): only the
foundation modules (contract, paths).

:class:`ReferenceIndex` is imported on first use, so ``import kebab_eval_pipeline.reference`` costs
nothing until an index is needed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kebab_eval_pipeline.reference.index import ReferenceIndex

__all__ = ["ReferenceIndex"]


def __getattr__(name: str):
    if name == "ReferenceIndex":
        from kebab_eval_pipeline.reference.index import ReferenceIndex

        return ReferenceIndex
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
