"""A ``kind: python`` system over an index file, written as a team would write one — nothing in here
knows about kebab-eval.

The factory (the class) loads the index once; ``versions()`` reports what was loaded, remembered at
construction (as ``tests/frameworks/llamaindex_app.py`` does): asking the same object again after
the file was rebuilt gives the old versions. Only an object built after the rebuild knows the new
ones. The index file is JSON: ``{"chunker_version": ..., "docs": [{"id", "path", "text"}, ...]}``;
its ``index_version`` is the content hash of the docs and the chunker version.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any


def write_index(index_file: Path, docs: list[dict[str, str]], chunker_version: str = "lines-1") -> str:
    """(Re)build the index at ``index_file`` in place; returns its ``index_version``."""
    index_file.write_text(json.dumps({"chunker_version": chunker_version, "docs": docs}), encoding="utf-8")
    return index_version_of(json.loads(index_file.read_text(encoding="utf-8")))


def index_version_of(data: dict[str, Any]) -> str:
    body = json.dumps([data["chunker_version"], data["docs"]], sort_keys=True).encode()
    return "idx-" + hashlib.sha256(body).hexdigest()[:12]


class IndexedSystem:
    def __init__(self, index_file: str) -> None:
        data = json.loads(Path(index_file).read_text(encoding="utf-8"))
        self.docs = data["docs"]
        self._versions = {"chunker_version": data["chunker_version"], "index_version": index_version_of(data)}

    def search(self, query: str, k: int) -> dict[str, Any]:
        words = set(query.lower().split())
        scored = sorted(
            ((len(words & set(d["text"].lower().split())), d) for d in self.docs), key=lambda s: -s[0]
        )
        hits = [{"chunk_id": d["id"], "doc_path": d["path"], "score": s} for s, d in scored[:k] if s]
        return {"hits": hits}

    def versions(self) -> dict[str, str]:
        return dict(self._versions)
