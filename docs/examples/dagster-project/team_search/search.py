"""The team's search service over its index (BM25 with bm25s), as an evaluation system.

``kind: python, callable: "team_search.search:IndexSearch", args: {index: <folder>}`` — the
evaluation builds it once and asks ``search(query, k)``; ``versions()`` names the index.
"""

from __future__ import annotations

import json
from pathlib import Path

import bm25s


class IndexSearch:
    def __init__(self, index: str):
        folder = Path(index)
        self.chunks = [json.loads(line) for line in (folder / "chunks.jsonl").read_text().splitlines()]
        self.version = json.loads((folder / "version.json").read_text())
        corpus = [" ".join([*c["heading_path"], c["text"]]) for c in self.chunks]
        self.retriever = bm25s.BM25()
        self.retriever.index(bm25s.tokenize(corpus, stopwords="en", show_progress=False), show_progress=False)

    def search(self, query: str, k: int) -> dict:
        k = min(k, len(self.chunks))
        ids, scores = self.retriever.retrieve(
            bm25s.tokenize([query], stopwords="en", show_progress=False), k=k, show_progress=False
        )
        hits = []
        for rank, (i, score) in enumerate(zip(ids[0], scores[0], strict=True), start=1):
            c = self.chunks[int(i)]
            hits.append(
                {
                    "rank": rank,
                    "chunk_id": c["chunk_id"],
                    "doc_path": c["doc_path"],
                    "heading_path": c["heading_path"],
                    "line_start": c["line_start"],
                    "line_end": c["line_end"],
                    "score": float(score),
                }
            )
        return {"hits": hits}

    def versions(self) -> dict:
        return {
            "chunker_version": self.version["chunker_version"],
            "index_version": self.version["chunker_version"],
        }
