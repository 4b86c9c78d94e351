"""The ``reference`` system kind: the built-in reference RAG system (SPEC §4.1,
:mod:`kebab_eval_pipeline.reference`) on a corpus folder, a BEIR ``corpus.jsonl`` or a prebuilt
index; its adapter is :mod:`kebab_eval_pipeline.systems.reference_adapter`.

Identity: the corpus it indexes (``demo corpus`` for the bundled one, else ``corpus <absolute
path>``; ``index <path>`` for a prebuilt index) and the retrieval ``mode``. Built once per process
and configuration while its inputs are unchanged: a long-lived process (a code server) reloads the
index when its manifest — or, built from a corpus, any corpus file — changed.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field, model_validator

from kebab_eval_pipeline.foundation.config_model import StrictSettings
from kebab_eval_pipeline.foundation.demo import DEMO_CORPUS
from kebab_eval_pipeline.foundation.errors import InputError, Offender
from kebab_eval_pipeline.foundation.read_once import fingerprint
from kebab_eval_pipeline.systems.capabilities import Capabilities
from kebab_eval_pipeline.systems.kind import PathFixer, SystemKind, SystemName, adapter, register

if TYPE_CHECKING:
    from kebab_eval_pipeline.systems.protocol import SystemUnderTest


class FusionSettings(StrictSettings):
    """``system.fusion``: how the reference system's hybrid mode fuses BM25 and vectors
    (reference/fusion.py); ignored by the lexical and vector modes. The defaults are
    ``reference.fusion.DEFAULT_FUSION``'s (a test keeps them equal; importing it here would load
    numpy into every CLI start)."""

    method: Literal["rrf", "minmax", "zscore"] = "rrf"
    lexical_weight: Annotated[float, Field(ge=0.0, le=1000.0)] = 1.0
    vector_weight: Annotated[float, Field(ge=0.0, le=1000.0)] = 1.5
    k_rrf: Annotated[int, Field(ge=1, le=100_000)] = 60
    # trust the vector channel only as far as the embedding model covers the query's and the
    # chunk's writing system (reference/languages.py)
    language_aware: bool = True
    depth: Annotated[int, Field(ge=1, le=10_000)] = 100

    @model_validator(mode="after")
    def _some_weight(self) -> FusionSettings:
        if self.lexical_weight + self.vector_weight <= 0:
            raise ValueError("lexical_weight and vector_weight cannot both be 0")
        return self

    def spec(self):  # -> FusionSpec (imported here: reference modules load numpy)
        """The :class:`~kebab_eval_pipeline.reference.fusion.FusionSpec` these settings name."""
        from kebab_eval_pipeline.reference.fusion import FusionSpec

        return FusionSpec(**self.model_dump())


#: The reference system: its hits, extractive answers with citations, its index's chunks and
#: manifest versions; an extractive answer calls no model, so it has no token counts.
REFERENCE_CAPABILITIES = Capabilities(
    {"token_counts": "the reference system's extractive answers call no model (no token counts)"}
)


class ReferenceSystemSettings(StrictSettings):
    """The built-in reference RAG system (SPEC §4.1)."""

    kind: Literal["reference"] = "reference"
    name: SystemName | None = None  # who this system is, for baselines (systems/identity.py)
    corpus: str | None = None  # folder to index; default: the bundled demo corpus
    index: str | None = None  # a prebuilt index folder (``kebab-eval ref index``) instead of a corpus
    chunk_size: Annotated[int, Field(ge=50, le=100_000)] = 800
    chunk_overlap: Annotated[int, Field(ge=0, le=100_000)] = 0
    exclude: tuple[str, ...] = ()  # .gitignore-style patterns, relative to the corpus folder
    mode: Literal["lexical", "vector", "hybrid"] = "lexical"
    # BM25 / answer-gate tokenizer when building from ``corpus`` (kiwi needs the korean extra);
    # with ``index`` the index's own tokenizer is used, and a different value here is refused.
    tokenizer: Literal["words+bigrams", "kiwi"] = "words+bigrams"
    # Which model embeds chunks and queries in vector/hybrid mode (reference/vectors.py): minilm is
    # English-only; multilingual-e5-small (the `multilingual` extra) also reads Korean. Not used by
    # lexical mode, nor with `index` (a prebuilt index keeps the model it was built with).
    embedding_model: Literal["minilm", "multilingual-e5-small"] = "minilm"
    refusal_threshold: Annotated[float, Field(ge=0.0, le=1.0)] | None = None
    # what the threshold applies to (reference/answer.py GATE_FEATURES); None: the default
    refusal_feature: Literal["top_hit", "best_of_top3", "top3_union"] | None = None
    fusion: FusionSettings = Field(default_factory=FusionSettings)

    def capabilities(self) -> Capabilities:
        """What its runs carry (systems/capabilities.py): everything but token counts."""
        return REFERENCE_CAPABILITIES

    @model_validator(mode="after")
    def _one_source(self) -> ReferenceSystemSettings:
        if self.corpus and self.index:
            raise ValueError("set either 'corpus' or 'index', not both")
        if self.chunk_overlap >= self.chunk_size:
            raise ValueError("chunk_overlap must be smaller than chunk_size")
        return self


def _corpus_fingerprint(corpus: Path, exclude: tuple[str, ...]) -> tuple:
    # Cheap change detector for the in-process cache (names and stat fingerprints — inode, size,
    # modification and change time — of what the ingest would read, and the symlinks it would skip);
    # the index's own corpus hash remains the authority for index_version. The change time catches a
    # file replaced with its old size and timestamps (an archive with normalised times). The ingest's
    # own walk, so a symlink out of the corpus is not even stat'ed.
    from kebab_eval_pipeline.reference.beir import scan_files

    scan = scan_files(corpus, exclude)
    files = tuple((rel, fingerprint(p)) for rel, p in scan.files)
    return files, tuple((s.path, s.reason) for s in scan.skipped_symlinks)


def _is_beir_corpus(path: Path) -> bool:
    from kebab_eval_pipeline.reference.beir import beir_corpus_file

    return beir_corpus_file(path) is not None


#: The reference system last loaded per configuration, with the inputs it was loaded from (at most
#: ``_LOADED_SIZE`` configurations): a rebuilt index replaces its configuration's entry, so a
#: long-lived process keeps one copy of each index, not one per rebuild.
_LOADED: dict[ReferenceSystemSettings, tuple[tuple, SystemUnderTest]] = {}
_LOADED_SIZE = 8
_LOADED_LOCK = threading.Lock()


def _cached_reference(settings: ReferenceSystemSettings, inputs: tuple) -> SystemUnderTest:
    """The reference system of ``settings``, loaded again when ``inputs`` — the stat fingerprint of a
    prebuilt index's manifest (written last by ``ref index``: a rebuilt index has a new one), or
    :func:`_corpus_fingerprint` — changed."""
    with _LOADED_LOCK:
        kept = _LOADED.get(settings)
        if kept is not None and kept[0] == inputs:
            return kept[1]
    system = _reference(settings)
    with _LOADED_LOCK:
        _LOADED.pop(settings, None)  # the configuration's older index goes now, not when evicted
        while len(_LOADED) >= _LOADED_SIZE:
            _LOADED.pop(next(iter(_LOADED)))  # the configuration loaded longest ago
        _LOADED[settings] = (inputs, system)
    return system


def _reference(settings: ReferenceSystemSettings) -> SystemUnderTest:
    from kebab_eval_pipeline.reference.cache import cached_index
    from kebab_eval_pipeline.reference.index import VECTOR_MODES, ReferenceIndex

    ReferenceSystem = adapter("kebab_eval_pipeline.systems.reference_adapter:ReferenceSystem")

    if settings.index:
        index = ReferenceIndex.load(Path(settings.index))
        if "tokenizer" in settings.model_fields_set and settings.tokenizer != index.tokenizer_name:
            raise ValueError(
                f"system.tokenizer is {settings.tokenizer!r} but the index {settings.index} was built with "
                f"{index.tokenizer_name!r}; rebuild it with `kebab-eval ref index --tokenizer "
                f"{settings.tokenizer}` or drop system.tokenizer"
            )
        _check_index_model(index, settings)
    else:
        # Built once per corpus content and settings, then loaded from the on-disk cache.
        corpus = Path(settings.corpus) if settings.corpus else DEMO_CORPUS
        index, _ = cached_index(
            corpus,
            chunk_size=settings.chunk_size,
            chunk_overlap=settings.chunk_overlap,
            with_vectors=settings.mode in VECTOR_MODES,
            exclude=tuple(settings.exclude),
            tokenizer=settings.tokenizer,
            embedding_model=settings.embedding_model,
        )
    return ReferenceSystem(
        index,
        mode=settings.mode,
        gate_threshold=settings.refusal_threshold,  # None: the index's own
        fusion=settings.fusion.spec(),
        gate_feature=settings.refusal_feature,
    )


def _check_index_model(index, settings: ReferenceSystemSettings) -> None:
    """A prebuilt index keeps its embedding model; an explicit, different ``embedding_model`` is an
    error rather than silently ignored (the run would report the other model)."""
    from kebab_eval_pipeline.reference.vectors import short_name

    if "embedding_model" not in settings.model_fields_set or index.vectors is None:
        return
    built = short_name(index.vectors.embedding_model)
    if built != settings.embedding_model:
        raise InputError(
            "reference index built with another embedding model",
            [
                Offender(
                    str(settings.index),
                    f"the index holds {built} embeddings but system.embedding_model is "
                    f"{settings.embedding_model}; rebuild it with `kebab-eval ref index --with-vectors "
                    f"--embedding-model {settings.embedding_model}` or drop system.embedding_model",
                    field="system.embedding_model",
                )
            ],
        )


def build(settings: ReferenceSystemSettings) -> SystemUnderTest:
    """The reference system of ``settings``: InputError naming the folder when the index or corpus
    is missing or cannot be loaded (the cached copy while its inputs are unchanged)."""
    if settings.index:
        source = Path(settings.index)
        if not source.is_dir():
            raise InputError(
                "reference index not found",
                [Offender(str(source), "no such index folder", field="system.index")],
            )
    else:
        corpus = Path(settings.corpus) if settings.corpus else DEMO_CORPUS
        if not corpus.is_dir() and not _is_beir_corpus(corpus):
            raise InputError(
                "reference corpus not found",
                [Offender(str(corpus), "no such folder (or BEIR corpus.jsonl)", field="system.corpus")],
            )
    try:
        if settings.index:
            return _cached_reference(settings, (str(source), fingerprint(source / "manifest.json")))
        return _cached_reference(settings, _corpus_fingerprint(corpus, tuple(settings.exclude)))
    except (ValueError, OSError) as exc:  # not an index, unsupported mode, unreadable corpus
        raise InputError(
            "cannot start the reference system",
            [Offender(settings.index or settings.corpus or str(DEMO_CORPUS), str(exc), field="system")],
        ) from None


def identity(settings: ReferenceSystemSettings) -> str:
    """``index <path>``, ``demo corpus`` or ``corpus <path>`` (see the module docstring)."""
    if settings.index:
        return f"index {Path(settings.index).resolve()}"
    if settings.corpus is None or Path(settings.corpus).resolve() == DEMO_CORPUS.resolve():
        return "demo corpus"
    return f"corpus {Path(settings.corpus).resolve()}"


def label(details: Mapping[str, Any]) -> str:
    """Nothing beyond the kind and mode: ``reference, mode lexical``."""
    return ""


def resolve_paths(settings: ReferenceSystemSettings, fix: PathFixer) -> ReferenceSystemSettings:
    """``corpus`` and ``index`` against the config file's folder."""
    return settings.model_copy(
        update={
            "corpus": fix(settings.corpus, "system", "corpus"),
            "index": fix(settings.index, "system", "index"),
        }
    )


KIND = register(
    SystemKind(
        name="reference",
        settings=ReferenceSystemSettings,
        build=build,
        identity=identity,
        label=label,
        capabilities=ReferenceSystemSettings.capabilities,
        # an old reference run cannot be placed: its corpus folder was never stored
        resolve_paths=resolve_paths,
    )
)
