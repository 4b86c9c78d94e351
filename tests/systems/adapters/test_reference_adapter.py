from __future__ import annotations

import re
from pathlib import Path

import pytest

from kebab_eval_pipeline.reference import ReferenceIndex
from kebab_eval_pipeline.systems.protocol import SystemUnderTest
from kebab_eval_pipeline.systems.reference_adapter import ReferenceSystem


def test_reference_system_implements_protocol(built_index: ReferenceIndex) -> None:
    system = ReferenceSystem(built_index)
    assert isinstance(system, SystemUnderTest)
    hits = system.search("How long should I bake the sourdough loaf?", k=3)
    assert hits[0].heading_path == ["Sourdough", "Baking"]
    answer = system.ask("How long should I bake the sourdough loaf?", hits)
    assert answer.citations[0].chunk_id == hits[0].chunk_id
    assert answer.citations[0].chunk_id in system.known_chunk_ids()
    info = system.info()
    assert (info.kind, info.mode, info.details["gate_threshold"]) == ("reference", "lexical", "0.35")


def test_gate_threshold_override(built_index: ReferenceIndex) -> None:
    query = "Which football team lost the sourdough championship in 1998?"
    strict, loose = ReferenceSystem(built_index), ReferenceSystem(built_index, gate_threshold=0.05)
    assert strict.ask(query, strict.search(query, 5)).refused
    assert not loose.ask(query, loose.search(query, 5)).refused
    assert loose.info().details["gate_threshold"] == "0.05"


@pytest.mark.parametrize(
    ("mode", "reason"),
    [
        ("vector", "built without them; rebuild it with `kebab-eval ref index --with-vectors`"),
        ("hybrid", "built without them"),
        ("nonsense", "unknown retrieval mode 'nonsense'"),
    ],
)
def test_unavailable_modes_fail_at_construction(built_index: ReferenceIndex, mode: str, reason: str) -> None:
    # A lexical-only index cannot serve vector modes: the adapter refuses up front, not per query.
    with pytest.raises(ValueError, match=re.escape(reason)):
        ReferenceSystem(built_index, mode=mode)


def test_a_saved_index_loads_as_the_same_system(built_index: ReferenceIndex, tmp_path: Path) -> None:
    built_index.save(tmp_path / "idx")
    system = ReferenceSystem(ReferenceIndex.load(tmp_path / "idx"))
    assert system.info() == ReferenceSystem(built_index).info()
