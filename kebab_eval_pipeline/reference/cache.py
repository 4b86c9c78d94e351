"""Built reference indexes cached on disk by corpus content hash (SPEC §4.1, issue 4 item 9).

A run configured with ``system: {kind: reference, corpus: DIR}`` should not
re-chunk and re-embed an unchanged folder on every run. The cache key hashes
everything that decides the index's content — the corpus files' bytes (after
excludes), chunk size and overlap, excludes, whether vectors are built and with
which embedding model, and the index format, parser and tokenizer versions — so an edited file or a new chunk
size is a new entry, and an unchanged folder is a load, not a build.

Entries are written to a temporary folder and renamed into place, so a killed
build never leaves a half-written entry that looks complete; two processes
building the same entry at once both succeed and one rename wins.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from pathlib import Path

from kebab_eval_pipeline.reference.beir import beir_corpus_file, scan_files
from kebab_eval_pipeline.reference.index import (
    INDEX_FORMAT,
    MANIFEST_FILE,
    VECTORS_DIR,
    ReferenceIndex,
)
from kebab_eval_pipeline.reference.ingest import PARSER_VERSION, files_sha256
from kebab_eval_pipeline.reference.tokenizers import DEFAULT_TOKENIZER, get_tokenizer
from kebab_eval_pipeline.reference.vectors import DEFAULT_EMBEDDING_MODEL, get_embedder

CACHE_ENV = "KEBAB_EVAL_INDEX_CACHE"
_REUSE_LIMIT = 4  # earlier vector indexes consulted for reusable embeddings
#: Entries shipped with the package, under their keys: the bundled demo corpus's index at the
#: default settings. A read-only second cache: a first demo run (a new ``DAGSTER_HOME``, so an
#: empty cache) loads it instead of building — a build parses every document and imports bm25s,
#: SciPy and Numba, most of a second of a demo run. The key names the content, so an entry made
#: by other versions or for another corpus is never found; ``tests/reference/test_bundled_index.py``
#: checks it is byte for byte what a build makes now (and says how to refresh it).
BUNDLED_DIR = Path(__file__).resolve().parent.parent / "data" / "demo" / "index"


def default_cache_dir() -> Path:
    """``$KEBAB_EVAL_INDEX_CACHE``, else ``$DAGSTER_HOME/kebab-eval/indexes``, else ``.kebab-eval/indexes``.

    (The default sits beside the Dagster instance, like the run artifacts.)
    """
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    if os.environ.get("DAGSTER_HOME"):
        return Path(os.environ["DAGSTER_HOME"]) / "kebab-eval" / "indexes"
    return Path(".kebab-eval") / "indexes"


def cache_key(
    corpus_dir: Path,
    chunk_size: int,
    chunk_overlap: int,
    with_vectors: bool,
    exclude: tuple[str, ...] = (),
    tokenizer: str = DEFAULT_TOKENIZER,
    embedding_model: str = DEFAULT_EMBEDDING_MODEL,
) -> str:
    """Hex key naming the index these inputs build (reads and hashes every corpus file).

    The symlinks the build would skip are part of it, so the cached manifest's list of them is
    always the corpus's current one. The tokenizer enters as its version (which names it), so
    upgrading kiwipiepy is a new entry; ``ValueError`` for an unknown tokenizer or ``kiwi``
    without its extra. ``embedding_model`` counts only with ``with_vectors``: a lexical index is
    the same whichever model a vector index would use."""
    fields: dict[str, object] = {}
    if with_vectors and embedding_model != DEFAULT_EMBEDDING_MODEL:
        # Absent for MiniLM, so the keys of entries built before models were selectable still hold.
        fields["embedding_model"] = embedding_model
    scan = scan_files(Path(corpus_dir), exclude)
    payload = json.dumps(
        {
            "format": INDEX_FORMAT,
            "parser": PARSER_VERSION,
            "tokenizer": get_tokenizer(tokenizer).version,
            "corpus": files_sha256(scan.files),
            "skipped_symlinks": [link.as_dict() for link in scan.skipped_symlinks],
            "chunk_size": chunk_size,
            "chunk_overlap": chunk_overlap,
            "exclude": list(exclude),
            "vectors": with_vectors,
            **fields,
        },
        sort_keys=True,
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:24]


def cached_index(
    corpus_dir: Path,
    chunk_size: int = 800,
    chunk_overlap: int = 0,
    with_vectors: bool = False,
    exclude: tuple[str, ...] = (),
    cache_dir: Path | None = None,
    tokenizer: str = DEFAULT_TOKENIZER,
    embedding_model: str = DEFAULT_EMBEDDING_MODEL,
) -> tuple[ReferenceIndex, bool]:
    """The index of ``corpus_dir`` with these settings, from the cache or freshly built.

    Output: ``(index, hit)``; ``hit`` is True when the cached entry was loaded.
    A stale or unreadable entry (other index format, tokenizer, or — for vector
    entries — another embedding model version) is rebuilt and replaced.

    ``tokenizer``: ``words+bigrams`` or ``kiwi`` (part of the key). ``embedding_model``: the
    short name of the model that embeds the chunks (only with ``with_vectors``; see
    :data:`~.vectors.EMBEDDING_MODELS`).

    Edge cases: a missing corpus raises ``FileNotFoundError``; without the model's
    extra, ``with_vectors`` raises ``VectorsUnavailable`` before any work;
    ``kiwi`` without the korean extra, or an unknown ``embedding_model``, raises ``ValueError``.
    """
    corpus_dir = Path(corpus_dir)
    if not corpus_dir.is_dir() and beir_corpus_file(corpus_dir) is None:
        raise FileNotFoundError(f"corpus directory does not exist: {corpus_dir}")
    if with_vectors:
        get_embedder(embedding_model)  # fail fast (and load the model once) before hashing and chunking
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    entry = root / cache_key(
        corpus_dir, chunk_size, chunk_overlap, with_vectors, exclude, tokenizer, embedding_model
    )
    if (entry / MANIFEST_FILE).is_file():
        try:
            index = ReferenceIndex.load(entry)
            if with_vectors:
                index.require_vectors("vector")
            return index, True
        except (ValueError, OSError):
            # Unreadable or stale: remove it so the rebuilt entry replaces it below.
            shutil.rmtree(entry, ignore_errors=True)
    bundled = BUNDLED_DIR / entry.name
    if (bundled / MANIFEST_FILE).is_file():
        try:
            return ReferenceIndex.load(bundled), True
        except (ValueError, OSError):
            pass  # never removed (the package's own files): built into the cache below
    reuse = _vector_entries(root) if with_vectors else []
    index = ReferenceIndex.build(
        corpus_dir,
        chunk_size=chunk_size,
        chunk_overlap=chunk_overlap,
        with_vectors=with_vectors,
        exclude=exclude,
        reuse=reuse,
        tokenizer=tokenizer,
        embedding_model=embedding_model,
    )
    _store(index, root, entry)
    return index, False


def _vector_entries(root: Path) -> list[Path]:
    if not root.is_dir():
        return []
    entries = [p for p in root.iterdir() if (p / VECTORS_DIR).is_dir() and (p / MANIFEST_FILE).is_file()]
    entries.sort(key=lambda p: (p / MANIFEST_FILE).stat().st_mtime_ns, reverse=True)
    return entries[:_REUSE_LIMIT]


def _store(index: ReferenceIndex, root: Path, entry: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    staging = root / f".tmp-{entry.name}-{uuid.uuid4().hex[:8]}"
    index.save(staging)
    if entry.exists():
        if _manifest_version(entry) == index.index_version:
            # Another process just finished the same entry; keep theirs, readers may hold it.
            shutil.rmtree(staging, ignore_errors=True)
            return
        shutil.rmtree(entry, ignore_errors=True)  # a stale entry being replaced
    try:
        staging.rename(entry)
    except OSError:
        # Lost a race with a concurrent builder of the same entry: theirs is as good.
        shutil.rmtree(staging, ignore_errors=True)


def _manifest_version(entry: Path) -> str | None:
    try:
        return json.loads((entry / MANIFEST_FILE).read_text(encoding="utf-8")).get("index_version")
    except (OSError, ValueError, AttributeError):
        return None
