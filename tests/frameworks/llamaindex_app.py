"""A real LlamaIndex retriever for the test suite, written as a team would write it for an
in-process evaluation — nothing in here knows about kebab-eval.

    Document per Markdown file (metadata ``file_path`` absolute, ``file_name``)
      → MarkdownNodeParser (one node per heading section; ``header_path`` = the parent headings,
        joined by a newline: ``header_path_separator="\\n"``, as the README's recipe sets it)
      → the section's own heading (its first line) as metadata ``header``, as the recipe does
      → BM25Retriever (llama-index-retrievers-bm25: bm25s, English stemming)

Sections are not cut to size here (the README's recipe adds a SentenceSplitter; see
test_heading_recipes.py).

``build(corpus)`` is the factory: ``search(query, k)`` returns ``{"nodes": [NodeWithScore, …]}`` —
LlamaIndex's own objects, unconverted, under the key the documented mapping reads
(docs/examples/frameworks/llamaindex.yaml: ``hits: nodes``). ``ask(query, k)`` runs a
``RetrieverQueryEngine`` over the same retriever with LlamaIndex's offline ``MockLLM`` and returns
its ``Response`` (``response`` text, ``source_nodes``). ``versions()`` names the parser and index.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

TOP_K = 10  # the retriever's depth (the run asks for 10); each search returns the first k


class LlamaIndexBM25:
    def __init__(self, corpus: str) -> None:
        import llama_index.core
        from llama_index.core import Document
        from llama_index.core.llms import MockLLM
        from llama_index.core.node_parser import MarkdownNodeParser
        from llama_index.core.query_engine import RetrieverQueryEngine
        from llama_index.retrievers.bm25 import BM25Retriever

        root = Path(corpus).resolve()
        files = sorted(p for p in root.rglob("*.md") if p.is_file())
        documents = [
            Document(text=p.read_text(encoding="utf-8"), metadata={"file_path": str(p), "file_name": p.name})
            for p in files
        ]
        nodes = MarkdownNodeParser(header_path_separator="\n").get_nodes_from_documents(documents)
        for node in nodes:
            own = re.match(r"#+\s(.*)", node.text)
            node.metadata["header"] = own.group(1).strip() if own else ""
        self.retriever = BM25Retriever.from_defaults(nodes=nodes, similarity_top_k=TOP_K)
        self.engine = RetrieverQueryEngine.from_args(self.retriever, llm=MockLLM(max_tokens=16))
        digest = hashlib.sha256(f"llama-index-core {llama_index.core.__version__}".encode())
        for p in files:
            digest.update(p.relative_to(root).as_posix().encode() + b"\0" + p.read_bytes())
        self._versions = {
            "chunker_version": "llamaindex-markdown-node-parser",
            "index_version": f"llamaindex-bm25:{digest.hexdigest()[:16]}",
            "coverage": {"docs_processed": len(files), "chunks": len(nodes)},
        }

    def search(self, query: str, k: int) -> dict[str, Any]:
        return {"nodes": self.retriever.retrieve(query)[:k]}

    def ask(self, query: str, k: int) -> Any:
        return self.engine.query(query)

    def versions(self) -> dict[str, Any]:
        return self._versions


def build(corpus: str) -> LlamaIndexBM25:
    return LlamaIndexBM25(corpus)
