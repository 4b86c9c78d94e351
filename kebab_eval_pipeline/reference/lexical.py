"""BM25 retrieval over pre-tokenized chunks, backed by ``bm25s``.

We hand bm25s token *ids* plus our own vocabulary instead of raw token lists:
bm25s builds its vocabulary from a ``set``, whose order changes with Python's
string hashing between processes, and a sorted vocabulary keeps saved indexes
byte-identical across rebuilds. Scoring is bm25s's default (Lucene variant,
k1=1.5, b=0.75).

Only building needs bm25s. Searching reads bm25s's saved score matrix (CSC:
one column per vocabulary entry holding that token's per-document BM25 score)
and sums the query tokens' columns with NumPy, in the same float32 order bm25s
uses, so scores are bit-identical while ``kebab-eval ref search`` — what the
command adapter runs once per query — starts without importing bm25s or SciPy.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

BM25_METHOD = "lucene"
_META_FILE = "lexical.json"
# bm25s's saved files: the CSC score matrix and the vocabulary (token → column).
_MATRIX_FILES = {name: f"{name}.csc.index.npy" for name in ("data", "indices", "indptr")}
_VOCAB_FILE = "vocab.index.json"
_PARAMS_FILE = "params.index.json"


class LexicalIndex:
    """A BM25 index over documents given as token lists (one per chunk, in chunk order)."""

    def __init__(
        self,
        n_docs: int,
        matrix: dict[str, np.ndarray] | None = None,
        vocab: dict[str, int] | None = None,
        params: dict | None = None,
    ) -> None:
        self.n_docs = n_docs
        self._params = params or {}  # bm25s's parameters, written back for bm25s.BM25.load
        self._data = matrix["data"] if matrix else np.zeros(0, dtype=np.float32)
        self._indices = matrix["indices"] if matrix else np.zeros(0, dtype=np.int32)
        self._indptr = matrix["indptr"] if matrix else np.zeros(1, dtype=np.int64)
        # An entry exists only where the token occurs (Lucene BM25 scores are > 0),
        # so a column's length is that token's document frequency.
        self._df = np.diff(self._indptr).astype(np.int64)
        self._vocab: dict[str, int] = vocab or {}

    @classmethod
    def build(cls, token_lists: list[list[str]]) -> LexicalIndex:
        """Index ``token_lists`` (document i = chunk i).

        Edge cases: an empty corpus gives an index that returns no hits;
        documents with no tokens are allowed and never match.
        """
        if not token_lists:
            return cls(0)
        import bm25s  # building only; searching needs NumPy alone

        vocab = {tok: i for i, tok in enumerate(sorted({t for toks in token_lists for t in toks}))}
        ids = [[vocab[t] for t in toks] for toks in token_lists]
        retriever = bm25s.BM25(method=BM25_METHOD)
        retriever.index((ids, vocab), show_progress=False)
        matrix = {name: np.asarray(retriever.scores[name]) for name in _MATRIX_FILES}
        params = {
            "k1": retriever.k1,
            "b": retriever.b,
            "delta": retriever.delta,
            "method": retriever.method,
            "idf_method": retriever.idf_method,
            "dtype": retriever.dtype,
            "int_dtype": retriever.int_dtype,
            "num_docs": len(token_lists),
            "version": bm25s.__version__,
            "backend": "numpy",
        }
        return cls(len(token_lists), matrix, dict(retriever.vocab_dict), params)

    def scores(self, query_tokens: list[str]) -> np.ndarray:
        """BM25 score of every document for ``query_tokens`` (float32, one per document).

        Unknown tokens are ignored; a repeated token counts again (as in bm25s). Sums the
        tokens' matrix columns with ``np.add.at`` in token order — bm25s's own NumPy
        kernel — so results are bit-identical to ``bm25s.BM25.get_scores``.
        """
        scores = np.zeros(self.n_docs, dtype=self._data.dtype)
        ids = [self._vocab[t] for t in query_tokens if t and t in self._vocab]
        if not ids:
            return scores
        starts, ends = self._indptr[ids], self._indptr[np.asarray(ids) + 1]
        rows = np.concatenate([self._indices[s:e] for s, e in zip(starts, ends, strict=True)])
        values = np.concatenate([self._data[s:e] for s, e in zip(starts, ends, strict=True)])
        np.add.at(scores, rows, values)
        return scores

    def search(self, query_tokens: list[str], k: int) -> list[tuple[int, float]]:
        """Top-``k`` (document index, BM25 score), best first.

        Ties are broken by document order (lower index first) so equal scores
        rank the same way every time. Documents scoring 0 (no query token at
        all) are never returned, so a query sharing no token with the corpus
        returns ``[]``. ``k < 1`` returns ``[]``.
        """
        if self.n_docs == 0 or k < 1 or not any(t and t in self._vocab for t in query_tokens):
            return []
        scores = self.scores(query_tokens).astype(np.float64)
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
        """Write the index under ``directory`` in bm25s's file layout (``bm25s.BM25.load`` reads
        it) plus a small JSON of our own."""
        directory.mkdir(parents=True, exist_ok=True)
        if self.n_docs:
            for name, file in _MATRIX_FILES.items():
                np.save(directory / file, getattr(self, f"_{name}"), allow_pickle=False)
            (directory / _VOCAB_FILE).write_text(
                json.dumps(self._vocab, ensure_ascii=False), encoding="utf-8"
            )
            (directory / _PARAMS_FILE).write_text(json.dumps(self._params, indent=4), encoding="utf-8")
        meta = {"n_docs": self.n_docs, "method": BM25_METHOD, "bm25s": self._params.get("version")}
        (directory / _META_FILE).write_text(json.dumps(meta), encoding="utf-8")

    @classmethod
    def load(cls, directory: Path) -> LexicalIndex:
        """Read an index written by :meth:`save`; ``ValueError`` when the files are missing."""
        meta_path = directory / _META_FILE
        if not meta_path.is_file():
            raise ValueError(f"no lexical index in {directory}")
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        n_docs = int(meta["n_docs"])
        if n_docs == 0:
            return cls(0)
        try:
            matrix = {name: np.load(directory / f, allow_pickle=False) for name, f in _MATRIX_FILES.items()}
            vocab = json.loads((directory / _VOCAB_FILE).read_text(encoding="utf-8"))
            params = json.loads((directory / _PARAMS_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ValueError(f"unreadable BM25 index in {directory}: {exc}") from None
        indptr = matrix["indptr"]
        if (
            not isinstance(vocab, dict)
            or len(matrix["data"]) != len(matrix["indices"])
            or (len(indptr) and int(indptr[-1]) != len(matrix["data"]))
        ):
            raise ValueError(f"inconsistent BM25 index in {directory}")
        # bm25s appends an empty-string padding token whose id is one past the last column.
        columns = len(indptr) - 1
        if any(not isinstance(i, int) or i < 0 or (i >= columns and t) for t, i in vocab.items()):
            raise ValueError(f"inconsistent BM25 index in {directory}: vocabulary and matrix disagree")
        return cls(n_docs, matrix, vocab, params)
