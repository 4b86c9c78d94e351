"""The reference system's index: build, save/load, search, ask (SPEC §4.1).

On disk an index is a folder of plain files::

    manifest.json   versions, chunking parameters, corpus hash, stats, warnings
    chunks.jsonl    one chunk per line, in chunk order (= BM25 document order)
    bm25/           the BM25 matrix in bm25s's own format

``search`` dispatches on the retrieval mode. Only ``lexical`` exists in this
version; ``vector`` and ``hybrid`` are reserved for the embedding channel and
reciprocal-rank fusion, which will add their own files and versions here.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

from kebab_eval_pipeline.systems.base import Answer, Hit, SystemInfo
from kebab_eval_pipeline.systems.reference.answer import (
    DEFAULT_GATE_THRESHOLD,
    PROMPT_TEMPLATE_VERSION,
    Evidence,
    ExtractiveAnswerer,
)
from kebab_eval_pipeline.systems.reference.chunk import Chunk, ChunkStats, chunk_corpus, chunker_version
from kebab_eval_pipeline.systems.reference.ingest import PARSER_VERSION, corpus_sha256, read_corpus
from kebab_eval_pipeline.systems.reference.lexical import LexicalIndex
from kebab_eval_pipeline.systems.reference.tokenize import TOKENIZER_VERSION, tokenize

INDEX_FORMAT = "kebab-eval-reference-index/1"
EMBEDDING_VERSION = "none"  # no vector channel yet; part of index_version so adding one changes it
SNIPPET_CHARS = 1000
ALL_MODES = ("lexical", "vector", "hybrid")
SUPPORTED_MODES = ("lexical",)

MANIFEST_FILE = "manifest.json"
CHUNKS_FILE = "chunks.jsonl"
BM25_DIR = "bm25"


def compute_index_version(chunker: str, corpus_hash: str, embedding_version: str = EMBEDDING_VERSION) -> str:
    """Short hash naming everything that decides search results.

    Parser, chunker (with size/overlap), tokenizer and embedding versions plus
    the corpus content hash: change any one and results may differ, so the
    version differs too.
    """
    payload = json.dumps(
        {
            "parser": PARSER_VERSION,
            "chunker": chunker,
            "tokenizer": TOKENIZER_VERSION,
            "embedding": embedding_version,
            "corpus": corpus_hash,
        },
        sort_keys=True,
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]


def search_text(chunk: Chunk) -> str:
    """What BM25 indexes for a chunk: its heading path, then its text.

    The heading path makes a continuation chunk of a long section (whose text
    no longer holds the heading line) findable by its section's name, and lets
    document-level words (the H1) reach every chunk of the document.
    """
    return "\n".join([*chunk.heading_path, chunk.text])


class ReferenceIndex:
    """A built (or loaded) reference index. Construct with :meth:`build` or :meth:`load`."""

    def __init__(
        self,
        chunks: list[Chunk],
        lexical: LexicalIndex,
        manifest: dict,
        gate_threshold: float = DEFAULT_GATE_THRESHOLD,
    ) -> None:
        self.chunks = chunks
        self.lexical = lexical
        self.manifest = manifest
        self.stats = ChunkStats.model_validate(manifest["stats"])
        self.gate_threshold = gate_threshold
        self._by_id = {c.chunk_id: i for i, c in enumerate(chunks)}
        self._searchers: dict[str, Callable[[str, int], list[Hit]]] = {"lexical": self._search_lexical}

    # --- construction -----------------------------------------------------------------

    @classmethod
    def build(cls, corpus_dir: Path, chunk_size: int = 800, chunk_overlap: int = 0) -> ReferenceIndex:
        """Read, chunk and index ``corpus_dir``.

        Inputs: a corpus folder (see :func:`~.ingest.read_corpus`), chunk size and
        overlap in characters. Output: a ready index. Edge cases: a missing folder
        raises ``FileNotFoundError``; bad sizes raise ``ValueError``; an empty
        folder builds an empty index whose searches return no hits.
        """
        docs = read_corpus(Path(corpus_dir))
        result = chunk_corpus(docs, chunk_size, chunk_overlap)
        lexical = LexicalIndex.build([tokenize(search_text(c)) for c in result.chunks])
        chunker = chunker_version(chunk_size, chunk_overlap)
        corpus_hash = corpus_sha256(docs)
        manifest = {
            "format": INDEX_FORMAT,
            "index_version": compute_index_version(chunker, corpus_hash),
            "parser_version": PARSER_VERSION,
            "chunker_version": chunker,
            "tokenizer_version": TOKENIZER_VERSION,
            "embedding_model": None,
            "embedding_version": EMBEDDING_VERSION,
            "corpus_sha256": corpus_hash,
            "chunk_size": chunk_size,
            "chunk_overlap": chunk_overlap,
            "n_docs": len(docs),
            "n_chunks": len(result.chunks),
            "stats": result.stats.model_dump(),
            "warnings": [w for d in docs for w in d.warnings],
        }
        return cls(result.chunks, lexical, manifest)

    def save(self, directory: Path) -> None:
        """Write the index to ``directory`` (created if needed; our files are overwritten)."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        with (directory / CHUNKS_FILE).open("w", encoding="utf-8") as fh:
            for c in self.chunks:
                row = {
                    "chunk_id": c.chunk_id,
                    "doc_id": c.doc_id,
                    "doc_path": c.doc_path,
                    "heading_path": c.heading_path,
                    "line_start": c.line_start,
                    "line_end": c.line_end,
                    "text": c.text,
                }
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
        self.lexical.save(directory / BM25_DIR)
        # Manifest last: a folder with a manifest is a complete index.
        (directory / MANIFEST_FILE).write_text(
            json.dumps(self.manifest, ensure_ascii=False, indent=2) + "\n", encoding="utf-8"
        )

    @classmethod
    def load(cls, directory: Path, gate_threshold: float = DEFAULT_GATE_THRESHOLD) -> ReferenceIndex:
        """Load an index written by :meth:`save`.

        Edge cases: a missing folder raises ``FileNotFoundError``; a folder that is
        not a reference index, or one built by an incompatible format or tokenizer
        (queries would be tokenized differently from the index), raises
        ``ValueError`` saying to rebuild.
        """
        directory = Path(directory)
        if not directory.is_dir():
            raise FileNotFoundError(f"index directory does not exist: {directory}")
        manifest_path = directory / MANIFEST_FILE
        if not manifest_path.is_file():
            raise ValueError(f"not a reference index (no {MANIFEST_FILE}): {directory}")
        try:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ValueError(f"unreadable {MANIFEST_FILE} in {directory}: {exc}") from exc
        if not isinstance(manifest, dict) or manifest.get("format") != INDEX_FORMAT:
            raise ValueError(f"not a {INDEX_FORMAT} index: {directory}")
        if manifest.get("tokenizer_version") != TOKENIZER_VERSION:
            raise ValueError(
                f"index was built with tokenizer {manifest.get('tokenizer_version')!r}, this code uses "
                f"{TOKENIZER_VERSION!r}; rebuild the index"
            )
        chunks = []
        with (directory / CHUNKS_FILE).open(encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    chunks.append(Chunk(**json.loads(line)))
        if len(chunks) != manifest.get("n_chunks"):
            raise ValueError(
                f"{CHUNKS_FILE} has {len(chunks)} chunks, manifest says {manifest.get('n_chunks')}; "
                "rebuild the index"
            )
        lexical = LexicalIndex.load(directory / BM25_DIR)
        if lexical.n_docs != len(chunks):
            raise ValueError(f"BM25 index has {lexical.n_docs} documents, expected {len(chunks)}")
        return cls(chunks, lexical, manifest, gate_threshold=gate_threshold)

    # --- versions ---------------------------------------------------------------------

    @property
    def index_version(self) -> str:
        """Short hash of parser, chunker, tokenizer, embedding versions and corpus hash."""
        return self.manifest["index_version"]

    @property
    def chunker_version(self) -> str:
        """Chunker name with size and overlap, e.g. ``md-heading-1:size=800:overlap=0``."""
        return self.manifest["chunker_version"]

    @property
    def warnings(self) -> list[str]:
        """Ingest warnings (bad UTF-8, malformed front matter), one line each."""
        return list(self.manifest.get("warnings", []))

    def info(self, mode: str = "lexical") -> SystemInfo:
        """The system's identity and versions for ``mode`` (kind ``"reference"``)."""
        m = self.manifest
        return SystemInfo(
            kind="reference",
            mode=mode,
            chunker_version=m["chunker_version"],
            parser_version=m["parser_version"],
            prompt_template_version=PROMPT_TEMPLATE_VERSION,
            embedding_model=None,
            embedding_version=m["embedding_version"],
            index_version=m["index_version"],
            details={
                "tokenizer_version": m["tokenizer_version"],
                "corpus_sha256": m["corpus_sha256"],
                "chunk_size": str(m["chunk_size"]),
                "chunk_overlap": str(m["chunk_overlap"]),
                "n_docs": str(m["n_docs"]),
                "n_chunks": str(m["n_chunks"]),
                "gate_threshold": f"{self.gate_threshold:g}",
            },
        )

    # --- lookup -----------------------------------------------------------------------

    def known_chunk_ids(self) -> frozenset[str]:
        """Every chunk id in the index (for resolving an answer's citations)."""
        return frozenset(self._by_id)

    def chunk(self, chunk_id: str) -> Chunk | None:
        """The chunk with ``chunk_id``, or None when the index has no such chunk."""
        idx = self._by_id.get(chunk_id)
        return None if idx is None else self.chunks[idx]

    def chunk_text(self, chunk_id: str) -> str:
        """Full text of a chunk; ``KeyError`` for an unknown id."""
        found = self.chunk(chunk_id)
        if found is None:
            raise KeyError(chunk_id)
        return found.text

    # --- search and ask ---------------------------------------------------------------

    def search(self, query: str, k: int = 10, mode: str = "lexical") -> list[Hit]:
        """Top-``k`` hits for ``query``, rank 1 first.

        Inputs: the query text, ``k`` ≥ 1, ``mode`` one of lexical / vector /
        hybrid. Output: at most ``k`` hits; no hit when no query token occurs in
        the corpus (so an off-topic or empty query returns ``[]``).

        Edge cases: ``k < 1`` raises ``ValueError``; ``vector`` / ``hybrid`` raise
        ``ValueError`` because this index version builds no vectors; an unknown
        mode raises ``ValueError`` listing the valid ones.
        """
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        searcher = self._searchers.get(mode)
        if searcher is None:
            if mode in ALL_MODES:
                raise ValueError(
                    f"retrieval mode {mode!r} needs sentence embeddings, which this index version does not "
                    f"build; use mode='lexical'"
                )
            raise ValueError(f"unknown retrieval mode {mode!r}; expected one of {', '.join(ALL_MODES)}")
        return searcher(query, k)

    def _search_lexical(self, query: str, k: int) -> list[Hit]:
        hits = []
        for rank, (idx, score) in enumerate(self.lexical.search(tokenize(query), k), start=1):
            c = self.chunks[idx]
            hits.append(
                Hit(
                    rank=rank,
                    chunk_id=c.chunk_id,
                    doc_id=c.doc_id,
                    doc_path=c.doc_path,
                    heading_path=list(c.heading_path),
                    line_start=c.line_start,
                    line_end=c.line_end,
                    snippet=c.text[:SNIPPET_CHARS],
                    score=score,
                    score_kind="bm25",
                    lexical_score=score,
                    lexical_rank=rank,
                    index_version=self.index_version,
                    chunker_version=self.chunker_version,
                )
            )
        return hits

    def ask(self, query: str, hits: list[Hit], gate_threshold: float | None = None) -> Answer:
        """Extractive answer to ``query`` from ``hits`` (see :class:`~.answer.ExtractiveAnswerer`).

        Each hit's full chunk text is looked up by ``chunk_id``; a hit this index
        does not know (e.g. from another system) falls back to its snippet.
        ``gate_threshold`` overrides the index's default for this call.
        """
        threshold = self.gate_threshold if gate_threshold is None else gate_threshold
        evidence = []
        for hit in hits:
            found = self.chunk(hit.chunk_id) if hit.chunk_id else None
            evidence.append(Evidence(hit=hit, text=found.text if found else hit.snippet))
        return ExtractiveAnswerer(self.lexical, threshold=threshold).answer(query, evidence)
