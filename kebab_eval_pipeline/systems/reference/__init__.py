"""The built-in reference RAG system (SPEC §4.1): ingest, chunk, BM25, extractive answers."""

from kebab_eval_pipeline.systems.reference.adapter import ReferenceSystem
from kebab_eval_pipeline.systems.reference.index import ReferenceIndex

__all__ = ["ReferenceIndex", "ReferenceSystem"]
