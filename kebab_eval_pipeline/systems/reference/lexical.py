"""BM25 retrieval over pre-tokenized chunks, backed by ``bm25s``.

We hand bm25s token *ids* plus our own vocabulary instead of raw token lists:
bm25s builds its vocabulary from a ``set``, whose order changes with Python's
string hashing between processes, and a sorted vocabulary keeps saved indexes
byte-identical across rebuilds. Scoring is bm25s's default (Lucene variant,
k1=1.5, b=0.75).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import bm25s
import numpy as np

BM25_METHOD = "lucene"
_META_FILE = "lexical.json"


class LexicalIndex:
    """A BM25 index over documents given as token lists (one per chunk, in chunk order)."""

    def __init__(self, retriever: bm25s.BM25 | None, n_docs: int) -> None:
        self._retriever = retriever
        self.n_docs = n_docs
        if retriever is not None:
            indptr = retriever.scores["indptr"]
            # The score matrix is CSC with one column per vocabulary entry and
            # an entry only where the token occurs (Lucene BM25 scores are > 0),
            # so a column's length is that token's document frequency.
            self._df = np.diff(indptr).astype(np.int64)
            self._vocab: dict[str, int] = retriever.vocab_dict
        else:
            self._df = np.zeros(0, dtype=np.int64)
            self._vocab = {}

    @classmethod
    def build(cls, token_lists: list[list[str]]) -> LexicalIndex:
        """Index ``token_lists`` (document i = chunk i).

        Edge cases: an empty corpus gives an index that returns no hits;
        documents with no tokens are allowed and never match.
        """
        if not token_lists:
            return cls(None, 0)
        vocab = {tok: i for i, tok in enumerate(sorted({t for toks in token_lists for t in toks}))}
        ids = [[vocab[t] for t in toks] for toks in token_lists]
        retriever = bm25s.BM25(method=BM25_METHOD)
        retriever.index((ids, vocab), show_progress=False)
        return cls(retriever, len(token_lists))

    def search(self, query_tokens: list[str], k: int) -> list[tuple[int, float]]:
        """Top-``k`` (document index, BM25 score), best first.

        Ties are broken by document order (lower index first) so equal scores
        rank the same way every time. Documents scoring 0 (no query token at
        all) are never returned, so a query sharing no token with the corpus
        returns ``[]``. ``k < 1`` returns ``[]``.
        """
        if self._retriever is None or k < 1:
            return []
        known = [t for t in query_tokens if t in self._vocab]
        if not known:
            return []
        scores = np.asarray(self._retriever.get_scores(known), dtype=np.float64)
        candidates = np.flatnonzero(scores > 0)
        if candidates.size > k:
            # Select the k best in O(n) before sorting: measured 37 µs against 109 µs for
            # sorting every chunk of a 1,170-chunk index. Ties at the cut are all kept.
            cut = np.partition(scores[candidates], candidates.size - k)[candidates.size - k]
            candidates = candidates[scores[candidates] >= cut]
        order = candidates[np.lexsort((candidates, -scores[candidates]))][:k]
        return [(int(i), float(scores[i])) for i in order]

    def doc_freq(self, token: str) -> int:
        """Number of indexed documents containing ``token`` (0 when unseen)."""
        idx = self._vocab.get(token)
        return 0 if idx is None else int(self._df[idx])

    def idf(self, token: str) -> float:
        """Lucene BM25 IDF, ``ln(1 + (N - df + 0.5) / (df + 0.5))``.

        An unseen token gets the largest possible IDF (df = 0): a query word
        the corpus never uses is the strongest sign that the corpus cannot
        answer it. An empty index returns 0.
        """
        if self.n_docs == 0:
            return 0.0
        df = self.doc_freq(token)
        return math.log(1.0 + (self.n_docs - df + 0.5) / (df + 0.5))

    def save(self, directory: Path) -> None:
        """Write the index under ``directory`` (bm25s's own format plus a small JSON)."""
        directory.mkdir(parents=True, exist_ok=True)
        meta = {"n_docs": self.n_docs, "method": BM25_METHOD, "bm25s": bm25s.__version__}
        (directory / _META_FILE).write_text(json.dumps(meta), encoding="utf-8")
        if self._retriever is not None:
            self._retriever.save(str(directory), show_progress=False)

    @classmethod
    def load(cls, directory: Path) -> LexicalIndex:
        """Read an index written by :meth:`save`; ``ValueError`` when the files are missing."""
        meta_path = directory / _META_FILE
        if not meta_path.is_file():
            raise ValueError(f"no lexical index in {directory}")
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        n_docs = int(meta["n_docs"])
        if n_docs == 0:
            return cls(None, 0)
        retriever = bm25s.BM25.load(str(directory), show_progress=False, verbosity=0)
        return cls(retriever, n_docs)
