"""Stale-golden detection against the reference index, before any query runs."""

from __future__ import annotations

import pytest

from kebab_eval_pipeline.chain.artifacts import GoldenArtifact
from kebab_eval_pipeline.chain.pipeline import check_golden_against_system
from kebab_eval_pipeline.chain.settings import DEMO_GOLDEN, RunSettings
from kebab_eval_pipeline.foundation.demo import DEMO_CORPUS
from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.golden.load import load_golden
from kebab_eval_pipeline.metrics.stale import stale_references
from kebab_eval_pipeline.reference.index import ReferenceIndex
from kebab_eval_pipeline.systems.reference_adapter import ReferenceSystem
from tests.conftest import write


@pytest.fixture(scope="module")
def system() -> ReferenceSystem:
    return ReferenceSystem(ReferenceIndex.build(DEMO_CORPUS))


def golden(tmp_path, text: str) -> GoldenArtifact:
    return GoldenArtifact.from_loaded(load_golden(write(tmp_path / "g.yaml", text)))


def test_demo_golden_set_is_not_stale(system):
    art = GoldenArtifact.from_loaded(load_golden(DEMO_GOLDEN))
    assert stale_references(art.queries, art.supports, system.catalogue()).empty


def test_every_kind_of_stale_reference_is_listed(system, tmp_path):
    chunk = system.catalogue().iloc[0]
    art = golden(
        tmp_path,
        f"""queries:
  - id: ok
    query: fine
    supports:
      - {{chunk_id: {chunk.chunk_id}, doc_id: {chunk.doc_id}}}
      - {{rel_path: ./{chunk.doc_path}, heading_path: ["{chunk.heading_path[0]}"]}}
  - id: gone
    query: moved evidence
    supports:
      - {{chunk_id: deadbeef00000000}}
      - {{doc_id: notes/removed.md}}
      - {{rel_path: notes/renamed.md}}
      - {{rel_path: {chunk.doc_path}, heading_path: ["{chunk.heading_path[0]}", "No such section"]}}
  - id: later
    query: not indexed yet
    pending: true
    supports: [{{rel_path: future/doc.md}}]
""",
    )
    stale = stale_references(art.queries, art.supports, system.catalogue())
    assert stale[["query_id", "support_idx", "field"]].values.tolist() == [
        ["gone", 0, "chunk_id"],
        ["gone", 1, "doc_id"],
        ["gone", 2, "rel_path"],
        ["gone", 3, "heading_path"],
    ]
    assert stale.loc[3, "value"] == f"{chunk.heading_path[0]} > No such section"
    assert stale.loc[3, "reason"] == "no section with this heading path in that document"

    with pytest.raises(InputError) as exc:
        check_golden_against_system(RunSettings(), art, system)
    assert "golden set is stale" in str(exc.value) and len(exc.value.offenders) == 4
    assert {o.field for o in exc.value.offenders} >= {"supports[0].chunk_id", "supports[2].rel_path"}
    assert all(o.query_id == "gone" and o.file == art.info["source"] for o in exc.value.offenders)

    warnings = check_golden_against_system(RunSettings(stale_golden="warn"), art, system)
    assert len(warnings) == 4 and "notes/renamed.md" in warnings[2]
    assert check_golden_against_system(RunSettings(stale_golden="off"), art, system) == []


def test_rechunked_chunk_ids_only_warn_while_their_document_is_indexed(system, tmp_path):
    doc = system.catalogue().iloc[0].doc_id
    art = golden(
        tmp_path,
        f"""queries:
  - id: rechunked
    query: chunk ids from an older chunker
    supports: [{{chunk_id: 0123456789abcdef, doc_id: {doc}}}]
""",
    )
    stale = stale_references(art.queries, art.supports, system.catalogue())
    assert stale["severity"].tolist() == ["warning"]
    warnings = check_golden_against_system(RunSettings(), art, system)  # fail mode: no error
    assert len(warnings) == 1 and "chunk-level matching will miss" in warnings[0]
