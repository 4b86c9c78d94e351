"""Index the real kebab docs corpus kept beside the repo (skipped when it is not there)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kebab_eval_pipeline.reference.index import ReferenceIndex
from kebab_eval_pipeline.reference.ingest import read_corpus
from tests.conftest import SHARED_CORPUS

KEBAB_DOCS = SHARED_CORPUS


@pytest.mark.skipif(not KEBAB_DOCS.is_dir(), reason=f"real corpus not present at {KEBAB_DOCS}")
def test_index_real_kebab_docs(tmp_path: Path) -> None:
    index = ReferenceIndex.build(KEBAB_DOCS)
    docs = {d.doc_id: d for d in read_corpus(KEBAB_DOCS)}
    assert index.stats.docs_processed == len(docs) > 0
    assert index.stats.chunks == len(index.chunks) > len(docs)
    for chunk in index.chunks:
        doc = docs[chunk.doc_id]
        assert 1 <= chunk.line_start <= chunk.line_end <= len(doc.lines)
        assert chunk.text in "\n".join(doc.lines[chunk.line_start - 1 : chunk.line_end])
        headings_inside = [h for h in doc.headings if chunk.line_start < h.line <= chunk.line_end]
        assert headings_inside == []
    if "CLAUDE.md" in docs:
        top = index.search("facade rule", k=3)[0]
        assert (top.doc_path, top.heading_path[-1]) == ("CLAUDE.md", "The facade rule")
    index.save(tmp_path / "idx")
    loaded = ReferenceIndex.load(tmp_path / "idx")
    assert [h.chunk_id for h in loaded.search("hybrid search RRF", k=10)] == [
        h.chunk_id for h in index.search("hybrid search RRF", k=10)
    ]
