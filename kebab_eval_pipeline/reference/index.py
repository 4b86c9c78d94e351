"""The reference system's index: build, save/load, search, ask (SPEC §4.1).

On disk an index is a folder of plain files::

    manifest.json   versions, chunking parameters, corpus hash, per-file table, stats, warnings
    chunks.jsonl    one chunk per line, in chunk order (= BM25 and embedding row order)
    bm25/           the BM25 matrix in bm25s's own format
    vectors/        (--with-vectors) chunk embeddings, their text keys, model and version

``search`` dispatches on the retrieval mode: ``lexical`` (BM25), ``vector``
(cosine over chunk embeddings — MiniLM, or multilingual-e5-small for non-English
corpora, see :mod:`.vectors`; needs an index built with vectors and that model's
extra) and ``hybrid`` (both fused; the method and weights are a
:class:`~.fusion.FusionSpec`, see :mod:`.fusion`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np

from kebab_eval_pipeline.contract import DEFAULTS, Answer, Hit, HitBlock, SystemInfo
from kebab_eval_pipeline.reference.answer import (
    DEFAULT_GATE_FEATURE,
    DEFAULT_GATE_THRESHOLD,
    PROMPT_TEMPLATE_VERSION,
    Evidence,
    ExtractiveAnswerer,
)
from kebab_eval_pipeline.reference.beir import read_documents
from kebab_eval_pipeline.reference.chunk import Chunk, ChunkStats, chunk_corpus, chunker_version
from kebab_eval_pipeline.reference.fusion import DEFAULT_FUSION, FusionSpec, fuse
from kebab_eval_pipeline.reference.ingest import PARSER_VERSION, corpus_sha256
from kebab_eval_pipeline.reference.languages import covered_share, covered_shares, vector_trust
from kebab_eval_pipeline.reference.lexical import LexicalIndex
from kebab_eval_pipeline.reference.tokenizers import (
    DEFAULT_TOKENIZER,
    Tokenizer,
    get_tokenizer,
    tokenizer_for_manifest,
)
from kebab_eval_pipeline.reference.vectors import (
    DEFAULT_EMBEDDING_MODEL,
    NO_EMBEDDING_VERSION,
    VectorIndex,
    get_embedder,
    short_name,
    text_key,
)

INDEX_FORMAT = "kebab-eval-reference-index/2"
ALL_MODES = ("lexical", "vector", "hybrid")
VECTOR_MODES = ("vector", "hybrid")

MANIFEST_FILE = "manifest.json"
CHUNKS_FILE = "chunks.jsonl"
BM25_DIR = "bm25"
VECTORS_DIR = "vectors"


def compute_index_version(
    chunker: str,
    corpus_hash: str,
    embedding_version: str = NO_EMBEDDING_VERSION,
    tokenizer_version: str | None = None,
) -> str:
    """Short hash naming everything that decides search results.

    Parser, chunker (with size/overlap), tokenizer and embedding versions plus
    the corpus content hash: change any one and results may differ, so the
    version differs too. ``tokenizer_version`` defaults to ``words+bigrams``'
    (whose versions name the tokenizer too, so an index built by it keeps the
    index_version it had before tokenizers could be chosen).
    """
    payload = json.dumps(
        {
            "parser": PARSER_VERSION,
            "chunker": chunker,
            "tokenizer": tokenizer_version or get_tokenizer(DEFAULT_TOKENIZER).version,
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
        vectors: VectorIndex | None = None,
        fusion: FusionSpec = DEFAULT_FUSION,
        tokenizer: Tokenizer | None = None,
    ) -> None:
        self.chunks = chunks
        # Queries and the answer gate must be tokenized as the chunks were.
        self.tokenizer = tokenizer or tokenizer_for_manifest(manifest)
        self.lexical = lexical
        self.vectors = vectors
        self.manifest = manifest
        self.stats = ChunkStats.model_validate(manifest["stats"])
        self.gate_threshold = gate_threshold
        # what the gate thresholds (answer.GATE_FEATURES); the CLI's --gate-feature sets it
        self.gate_feature = DEFAULT_GATE_FEATURE
        self.fusion = fusion
        self._chunk_coverage: np.ndarray | None = None
        self._by_id = {c.chunk_id: i for i, c in enumerate(chunks)}
        self._rankers: dict[
            str, Callable[[str, int, FusionSpec], tuple[str, list[tuple[int, float, dict]]]]
        ] = {
            "lexical": self._rank_lexical,
            "vector": self._rank_vector,
            "hybrid": self._rank_hybrid,
        }

    # --- construction -----------------------------------------------------------------

    @classmethod
    def build(
        cls,
        corpus_dir: Path,
        chunk_size: int = 800,
        chunk_overlap: int = 0,
        with_vectors: bool = False,
        exclude: list[str] | tuple[str, ...] = (),
        reuse: list[Path] | tuple[Path, ...] = (),
        tokenizer: str | Tokenizer = DEFAULT_TOKENIZER,
        embedding_model: str = DEFAULT_EMBEDDING_MODEL,
    ) -> ReferenceIndex:
        """Read, chunk and index ``corpus_dir``.

        Inputs: a corpus folder (see :func:`~.ingest.read_corpus`; or a BEIR ``corpus.jsonl``,
        see :mod:`.beir`; ``exclude`` takes
        ``.gitignore``-style patterns), chunk size and overlap in characters, and
        ``with_vectors`` to embed every chunk as well, with ``embedding_model`` (a short name of
        :data:`~.vectors.EMBEDDING_MODELS`; ``minilm`` needs the ``vectors`` extra,
        ``multilingual-e5-small`` the ``multilingual`` one; ignored without ``with_vectors``).
        ``reuse``: earlier index folders whose stored embeddings may be reused for
        chunks with identical text (missing or vector-less folders are ignored).

        ``tokenizer``: ``words+bigrams`` (default) or ``kiwi`` (needs the ``korean`` extra),
        or a :class:`~.tokenizers.Tokenizer` object (benchmarks measure rule variants so); its
        name and version are recorded in the manifest and used for every query.

        Output: a ready index; ``manifest["build"]`` says how many chunks were embedded
        now and how many came from ``reuse``.

        Edge cases: a missing folder raises ``FileNotFoundError``; bad sizes raise
        ``ValueError``, and so does an unknown ``embedding_model``; without the model's extra,
        ``with_vectors`` raises :class:`~.vectors.VectorsUnavailable` (a ``ValueError``); an
        unknown tokenizer, or ``kiwi`` without its extra, raises ``ValueError``; an empty folder
        builds an empty index whose searches return no hits.
        """
        # before any work: an unknown name fails fast
        tok = tokenizer if isinstance(tokenizer, Tokenizer) else get_tokenizer(tokenizer)
        docs, skipped_links = read_documents(Path(corpus_dir), exclude=exclude)
        result = chunk_corpus(docs, chunk_size, chunk_overlap)
        texts = [search_text(c) for c in result.chunks]
        lexical = LexicalIndex.build([tok.tokenize(t) for t in texts])
        vectors = None
        build_info: dict[str, int] = {}
        if with_vectors:
            previous = [v for v in (_try_load_vectors(Path(d)) for d in reuse) if v is not None]
            vectors, embedded = VectorIndex.build(texts, get_embedder(embedding_model), reuse=previous)
            build_info = {"embedded": embedded, "embeddings_reused": len(texts) - embedded}
        chunker = chunker_version(chunk_size, chunk_overlap)
        corpus_hash = corpus_sha256(docs)
        embedding_version = vectors.embedding_version if vectors else NO_EMBEDDING_VERSION
        chunks_per_doc: dict[str, int] = {}
        for c in result.chunks:
            chunks_per_doc[c.doc_id] = chunks_per_doc.get(c.doc_id, 0) + 1
        manifest = {
            "format": INDEX_FORMAT,
            "index_version": compute_index_version(chunker, corpus_hash, embedding_version, tok.version),
            "parser_version": PARSER_VERSION,
            "chunker_version": chunker,
            "tokenizer": tok.name,
            "tokenizer_version": tok.version,
            "embedding_model": vectors.embedding_model if vectors else None,
            "embedding_version": embedding_version,
            "corpus_sha256": corpus_hash,
            "chunk_size": chunk_size,
            "chunk_overlap": chunk_overlap,
            "exclude": list(exclude),
            "n_docs": len(docs),
            "n_chunks": len(result.chunks),
            "stats": result.stats.model_dump(),
            "documents": [
                {
                    "doc_id": d.doc_id,
                    "kind": d.kind,
                    "parser_version": d.parser_version,
                    "sha256": d.content_sha256,
                    "lines": len(d.lines),
                    "chunks": chunks_per_doc.get(d.doc_id, 0),
                }
                for d in docs
            ],
            "build": build_info,
            # Symlinks not followed (outside the corpus, loops, broken, duplicates): never indexed.
            "skipped_symlinks": [link.as_dict() for link in skipped_links],
            "warnings": [w for d in docs for w in d.warnings],
        }
        return cls(result.chunks, lexical, manifest, vectors=vectors, tokenizer=tok)

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
        if self.vectors is not None:
            self.vectors.save(directory / VECTORS_DIR)
        # Manifest last: a folder with a manifest is a complete index.
        (directory / MANIFEST_FILE).write_text(
            json.dumps(self.manifest, ensure_ascii=False, indent=2) + "\n", encoding="utf-8"
        )

    @classmethod
    def load(
        cls,
        directory: Path,
        gate_threshold: float = DEFAULT_GATE_THRESHOLD,
        fusion: FusionSpec = DEFAULT_FUSION,
    ) -> ReferenceIndex:
        """Load an index written by :meth:`save`; ``gate_threshold`` and ``fusion`` are the
        defaults its asks and hybrid searches use.

        Queries are tokenized by the tokenizer the manifest names (an index built before
        the choice existed, with ``tokenizer_version`` ``mixed-ko-en-1``, is ``words+bigrams``).

        Edge cases: a missing folder raises ``FileNotFoundError``; a folder that is
        not a reference index, or one built by an incompatible format, an unknown
        tokenizer or another version of its tokenizer (queries would be tokenized
        differently from the index), raises ``ValueError`` saying to rebuild; a
        ``kiwi`` index without the korean extra raises ``ValueError`` naming it.
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
        try:
            tokenizer = tokenizer_for_manifest(manifest)
        except ValueError as exc:
            raise ValueError(f"{directory}: {exc}") from None
        chunks = []
        with (directory / CHUNKS_FILE).open(encoding="utf-8") as fh:
            for line_no, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    chunks.append(Chunk(**json.loads(line)))
                except (ValueError, TypeError) as exc:  # bad JSON, missing or unknown fields
                    raise ValueError(
                        f"{directory / CHUNKS_FILE}:{line_no}: not a chunk record ({exc}); rebuild the index"
                    ) from None
        if len(chunks) != manifest.get("n_chunks"):
            raise ValueError(
                f"{CHUNKS_FILE} has {len(chunks)} chunks, manifest says {manifest.get('n_chunks')}; "
                "rebuild the index"
            )
        lexical = LexicalIndex.load(directory / BM25_DIR)
        if lexical.n_docs != len(chunks):
            raise ValueError(f"BM25 index has {lexical.n_docs} documents, expected {len(chunks)}")
        vectors = None
        if manifest.get("embedding_model"):
            vectors = VectorIndex.load(directory / VECTORS_DIR)
            if vectors.keys != [_key_of(c) for c in chunks]:
                raise ValueError(
                    f"{VECTORS_DIR}/ does not match {CHUNKS_FILE} in {directory}; rebuild the index"
                )
        return cls(
            chunks,
            lexical,
            manifest,
            gate_threshold=gate_threshold,
            vectors=vectors,
            fusion=fusion,
            tokenizer=tokenizer,
        )

    # --- versions ---------------------------------------------------------------------

    @property
    def index_version(self) -> str:
        """Short hash of parser, chunker, tokenizer, embedding versions and corpus hash."""
        return self.manifest["index_version"]

    @property
    def chunker_version(self) -> str:
        """Chunker name with size and overlap, e.g. ``md-heading-2:size=800:overlap=0``."""
        return self.manifest["chunker_version"]

    @property
    def tokenizer_name(self) -> str:
        """Name of the tokenizer the index was built with (``words+bigrams`` or ``kiwi``)."""
        return self.tokenizer.name

    @property
    def warnings(self) -> list[str]:
        """Ingest warnings (bad UTF-8, malformed front matter), one line each."""
        return list(self.manifest.get("warnings", []))

    @property
    def has_vectors(self) -> bool:
        """True when the index holds chunk embeddings (built ``with_vectors``)."""
        return self.vectors is not None

    def info(self, mode: str = "lexical", fusion: FusionSpec | None = None) -> SystemInfo:
        """The system's identity and versions for ``mode`` (kind ``"reference"``).

        ``embedding_model`` is set only when the mode uses embeddings: a lexical run
        over an index that also holds vectors did not use them. A hybrid system's
        details name its fusion (``fusion``, ``fusion_version``, weights; default: the
        index's own :attr:`fusion`).
        """
        m = self.manifest
        uses_vectors = mode in VECTOR_MODES
        details = {}
        if mode == "hybrid":
            details = (fusion or self.fusion).details()
        return SystemInfo(
            kind="reference",
            mode=mode,
            chunker_version=m["chunker_version"],
            parser_version=m["parser_version"],
            prompt_template_version=PROMPT_TEMPLATE_VERSION,
            embedding_model=m.get("embedding_model") if uses_vectors else None,
            embedding_version=m["embedding_version"],
            index_version=m["index_version"],
            details={
                **details,
                "tokenizer_version": m["tokenizer_version"],
                "corpus_sha256": m["corpus_sha256"],
                "chunk_size": str(m["chunk_size"]),
                "chunk_overlap": str(m["chunk_overlap"]),
                "n_docs": str(m["n_docs"]),
                "n_chunks": str(m["n_chunks"]),
                "gate_threshold": f"{self.gate_threshold:g}",
            },
            coverage=self.coverage(),
        )

    def coverage(self) -> dict[str, float]:
        """The chunker's statistics as an indexing-coverage report (``metrics/indexing.py``)."""
        st = self.stats
        return {
            "docs_processed": st.docs_processed,
            "docs_with_zero_chunks": st.docs_with_zero_chunks,
            "chunks": st.chunks,
            "chunks_skipped": sum(st.skipped.values()),
            "tokens_min": st.tokens_min,
            "tokens_mean": st.tokens_mean,
            "tokens_p95": st.tokens_p95,
            "tokens_max": st.tokens_max,
            "skipped_symlinks": len(self.skipped_symlinks),
        }

    @property
    def skipped_symlinks(self) -> list[dict[str, str]]:
        """Symlinks in the corpus the build did not follow, ``{"path", "reason"}`` each (see
        :class:`~.ingest.SkippedSymlink`); empty for an index built before they were recorded."""
        return list(self.manifest.get("skipped_symlinks", []))

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

    def search(
        self, query: str, k: int = 10, mode: str = "lexical", fusion: FusionSpec | None = None
    ) -> list[Hit]:
        """Top-``k`` hits for ``query``, rank 1 first.

        Inputs: the query text, ``k`` ≥ 1, ``mode`` one of lexical / vector /
        hybrid, and for hybrid the ``fusion`` (default: the index's :attr:`fusion`).
        Output: at most ``k`` hits; no hit when no query token occurs in
        the corpus (so an off-topic or empty query returns ``[]``).

        Lexical returns no hit when no query token occurs in the corpus; vector
        always returns ``min(k, chunks)`` hits (every chunk has a cosine), so
        judging whether they are good enough is the answerer's gate's job.

        Edge cases: ``k < 1`` raises ``ValueError``; ``vector`` / ``hybrid`` on an
        index built without vectors raise ``ValueError`` saying to rebuild with
        ``--with-vectors``; an unknown mode raises ``ValueError`` listing the valid ones.
        """
        return list(self.search_block(query, k, mode, fusion))

    def check_mode(self, mode: str) -> None:
        """Raise ``ValueError`` unless ``mode`` is one of :data:`ALL_MODES` that this index can serve
        now (:meth:`require_vectors` for the vector modes)."""
        if mode not in ALL_MODES:
            raise ValueError(f"unknown retrieval mode {mode!r}; expected one of {', '.join(ALL_MODES)}")
        if mode in VECTOR_MODES:
            self.require_vectors(mode)

    def require_vectors(self, mode: str) -> None:
        """Raise ``ValueError`` unless ``mode`` can run: vectors in the index, the model installed
        and of the same embedding version the index was built with."""
        if self.vectors is None:
            raise ValueError(
                f"retrieval mode {mode!r} needs chunk embeddings, but this index was built without them; "
                "rebuild it with `kebab-eval ref index --with-vectors` (system.mode vector/hybrid with a "
                "corpus builds them automatically)"
            )
        embedder = self._query_embedder()
        if embedder.embedding_version != self.vectors.embedding_version:
            raise ValueError(
                f"index embeddings are {self.vectors.embedding_version!r} but the installed model is "
                f"{embedder.embedding_version!r}; rebuild the index"
            )

    def search_block(
        self, query: str, k: int = 10, mode: str = "lexical", fusion: FusionSpec | None = None
    ) -> HitBlock:
        """:meth:`search`'s hits as a :class:`HitBlock` (columns, no model per hit): what the
        reference adapter hands to the runner. Same inputs, outputs and errors as :meth:`search`."""
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        self.check_mode(mode)
        kind, ranked = self._rankers[mode](query, k, fusion or self.fusion)
        return self._block(kind, ranked, uses_vectors=mode in VECTOR_MODES)

    def _block(self, score_kind: str, ranked: list[tuple[int, float, dict]], uses_vectors: bool) -> HitBlock:
        """Columns of the ranked ``(chunk index, score, channel scores/ranks)`` rows."""
        chunks = [self.chunks[idx] for idx, _, _ in ranked]
        n = len(chunks)
        columns: dict[str, list] = {
            "chunk_id": [c.chunk_id for c in chunks],
            "doc_id": [c.doc_id for c in chunks],
            "doc_path": [c.doc_path for c in chunks],
            "heading_path": [list(c.heading_path) for c in chunks],
            "line_start": [c.line_start for c in chunks],
            "line_end": [c.line_end for c in chunks],
            # The whole chunk, not a preview: SPEC §5 matches gold snippets against the hit's
            # text, and a cut-off preview would miss a snippet near the end of a long chunk.
            "snippet": [c.text for c in chunks],
            "score": [float(score) for _, score, _ in ranked],
            "score_kind": [score_kind] * n,
            "index_version": [self.index_version] * n,
            "chunker_version": [self.chunker_version] * n,
        }
        if uses_vectors:
            assert self.vectors is not None
            columns["embedding_model"] = [self.vectors.embedding_model] * n
        for name in ("lexical_score", "vector_score", "lexical_rank", "vector_rank"):
            cast = float if name.endswith("_score") else int
            values = [None if (v := channels.get(name)) is None else cast(v) for _, _, channels in ranked]
            if any(v is not None for v in values):
                columns[name] = values
        # the block holds only what differs from a Hit's defaults (see HitBlock)
        kept = {
            name: values
            for name, values in columns.items()
            if any(v != ([] if name == "heading_path" else DEFAULTS[name]) for v in values)
        }
        return HitBlock(n, kept)

    def _rank_lexical(
        self, query: str, k: int, _fusion: FusionSpec
    ) -> tuple[str, list[tuple[int, float, dict]]]:
        found = self.lexical.search(self.tokenizer.tokenize(query), k)
        return "bm25", [
            (idx, score, {"lexical_score": score, "lexical_rank": rank})
            for rank, (idx, score) in enumerate(found, start=1)
        ]

    def _vector_ranking(self, query: str, depth: int) -> list[tuple[int, float]]:
        assert self.vectors is not None
        return self.vectors.search(self._query_embedder().encode_queries([query])[0], depth)

    def _query_embedder(self):
        """The embedder of the model this index's vectors were built with (e5 embeds queries
        with its own prefix, so a query must go through the same model's query path)."""
        assert self.vectors is not None
        return get_embedder(short_name(self.vectors.embedding_model))

    def _rank_vector(
        self, query: str, k: int, _fusion: FusionSpec
    ) -> tuple[str, list[tuple[int, float, dict]]]:
        return "cosine", [
            (idx, score, {"vector_score": score, "vector_rank": rank})
            for rank, (idx, score) in enumerate(self._vector_ranking(query, k), start=1)
        ]

    def vector_trust(self, query: str) -> np.ndarray:
        """Per chunk, how far the vector channel is trusted for ``query`` (language-aware fusion):
        from the query's and the chunk's share of words in scripts the embedding model covers
        (see :func:`.languages.vector_trust`). A float64 array, one value in [0, 1] per chunk."""
        scripts = self._query_embedder().scripts  # the index's model: MiniLM covers Latin only
        if self._chunk_coverage is None:
            self._chunk_coverage = covered_shares([search_text(c) for c in self.chunks], scripts)
        return vector_trust(covered_share(query, scripts), self._chunk_coverage)

    def _rank_hybrid(
        self, query: str, k: int, fusion: FusionSpec
    ) -> tuple[str, list[tuple[int, float, dict]]]:
        depth = max(k, fusion.depth)
        fused = fuse(
            self.lexical.search(self.tokenizer.tokenize(query), depth),
            self._vector_ranking(query, depth),
            k,
            fusion,
            vector_trust=self.vector_trust(query) if fusion.language_aware else None,
        )
        return fusion.score_kind, [
            (
                f.index,
                f.score,
                {
                    "lexical_score": f.lexical_score,
                    "lexical_rank": f.lexical_rank,
                    "vector_score": f.vector_score,
                    "vector_rank": f.vector_rank,
                },
            )
            for f in fused
        ]

    def evidence(self, hits: list[Hit]) -> list[Evidence]:
        """``hits`` with their full chunk texts (looked up by ``chunk_id``; a hit this index does
        not know, e.g. from another system, falls back to its snippet)."""
        out = []
        for hit in hits:
            found = self.chunk(hit.chunk_id) if hit.chunk_id else None
            out.append(Evidence(hit=hit, text=found.text if found else hit.snippet))
        return out

    def answerer(
        self, gate_threshold: float | None = None, gate_feature: str | None = None
    ) -> ExtractiveAnswerer:
        """The extractive answerer over this index's term statistics; None keeps the index's
        default threshold / feature."""
        return ExtractiveAnswerer(
            self.lexical,
            threshold=self.gate_threshold if gate_threshold is None else gate_threshold,
            feature=self.gate_feature if gate_feature is None else gate_feature,
            tokenizer=self.tokenizer,
        )

    def ask(
        self,
        query: str,
        hits: list[Hit],
        gate_threshold: float | None = None,
        gate_feature: str | None = None,
    ) -> Answer:
        """Extractive answer to ``query`` from ``hits`` (see :class:`~.answer.ExtractiveAnswerer`).

        Each hit's full chunk text is looked up by ``chunk_id``; a hit this index
        does not know (e.g. from another system) falls back to its snippet.
        ``gate_threshold`` and ``gate_feature`` override the defaults for this call.
        """
        return self.answerer(gate_threshold, gate_feature).answer(query, self.evidence(hits))


def _key_of(chunk: Chunk) -> str:
    return text_key(search_text(chunk))


def _try_load_vectors(directory: Path) -> VectorIndex | None:
    """Stored embeddings of an earlier index folder, or None when it has none (or unreadable ones)."""
    try:
        return VectorIndex.load(directory / VECTORS_DIR)
    except (ValueError, OSError, KeyError):
        return None
