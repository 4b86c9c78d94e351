"""Hits as columns (issue 25): the columnar parser agrees with the per-hit model it replaced, the
hits table built from blocks is the table built from one row per hit, and each input is parsed
once per process while unchanged (a real file, edited for real)."""

from __future__ import annotations

import math
import os
import time
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from kebab_eval_pipeline.chain.settings import RunSettings
from kebab_eval_pipeline.contract import Hit
from kebab_eval_pipeline.golden.tables import typed_frame
from kebab_eval_pipeline.systems.base import HIT_COLUMNS
from kebab_eval_pipeline.systems.factory import build_system, live_info
from kebab_eval_pipeline.systems.hits import HitBlock, hits_frame
from kebab_eval_pipeline.systems.outcome import QueryFailure, QueryRequest
from kebab_eval_pipeline.systems.replay import TRACES
from kebab_eval_pipeline.systems.wire import (
    ResponseMap,
    _bad,
    _hit_fields,
    _preview,
    _pydantic_reason,
    parse_hit_block,
    parse_hits,
)

# ------------------------------------------------------------------ the per-hit model, as it was


def per_hit_parse(payload: Any, k: int, mapping: ResponseMap) -> tuple[list[Hit], list[str]]:
    """parse_hits as it was before the columns: one validated Hit per hit, copied to renumber it."""
    from kebab_eval_pipeline.systems.wire import hit_list

    parsed = []
    for i, raw in enumerate(hit_list(payload, mapping)):
        try:
            fields = _hit_fields(raw, mapping)
            reported = fields.pop("rank", None)
            hit = Hit.model_validate({**fields, "rank": 1})
        except (ValueError, TypeError) as exc:
            reason = _pydantic_reason(exc) if isinstance(exc, ValidationError) else str(exc)
            raise _bad(f"hits[{i}]", reason) from None
        if reported is not None and (isinstance(reported, bool) or not isinstance(reported, int | float)):
            raise _bad(f"hits[{i}].rank", f"expected a number, got {reported!r}")
        if isinstance(reported, float) and not math.isfinite(reported):
            raise _bad(f"hits[{i}].rank", f"expected a finite number, got {reported!r}")
        parsed.append({"hit": hit, "reported": reported, "position": i})
    warnings = []
    reported = [p["reported"] for p in parsed]
    if reported != list(range(1, len(parsed) + 1)):
        if any(r is not None for r in reported):
            warnings.append(f"reported ranks {_preview(reported)} are not 1..{len(parsed)}; renumbered")
        inf = float("inf")
        parsed.sort(key=lambda p: (inf if p["reported"] is None else p["reported"], p["position"]))
    hits = [p["hit"].model_copy(update={"rank": n}) for n, p in enumerate(parsed, start=1)]
    if len(hits) > k:
        warnings.append(f"returned {len(hits)} hits for k={k}; kept the first {k}")
        hits = hits[:k]
    return hits, warnings


def per_hit_table(outcomes: list[tuple[str, list[Hit]]]) -> pd.DataFrame:
    """The hits table as the runner built it from Hit models (one row per hit)."""
    columns: dict[str, list] = {name: [] for name in HIT_COLUMNS}
    for qid, hits in outcomes:
        columns["query_id"] += [qid] * len(hits)
        for name in HIT_COLUMNS:
            if name != "query_id":
                columns[name] += [getattr(h, name) for h in hits]
    columns["heading_path"] = [list(h) for h in columns["heading_path"]]
    return typed_frame(columns, HIT_COLUMNS)


# ------------------------------------------------------------------------------- random hits

# Values of every kind a system's JSON holds, valid or not for each field (the model decides).
ANY = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**64), 2**64),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=6),
    st.lists(st.text(max_size=3), max_size=2),
    st.lists(st.integers(0, 3), max_size=2),
    st.dictionaries(st.sampled_from(["a", "b"]), st.integers(0, 3), max_size=1),
)
GOOD = {
    "chunk_id": st.one_of(st.none(), st.text(max_size=6)),
    "doc_path": st.one_of(st.none(), st.text(max_size=6)),
    "heading_path": st.one_of(st.none(), st.lists(st.text(max_size=4), max_size=3), st.text(max_size=8)),
    "line_start": st.one_of(st.none(), st.integers(-5, 10**6)),
    "snippet": st.one_of(st.none(), st.text(max_size=6)),
    "score": st.one_of(st.none(), st.integers(-100, 100), st.floats(allow_nan=False, allow_infinity=False)),
    "score_kind": st.sampled_from([None, "bm25", "rrf", "cosine", "other", "BM25"]),
    "lexical_rank": st.one_of(st.none(), st.integers(1, 50)),
    "rank": st.one_of(st.none(), st.integers(-3, 30), st.floats(0, 30, allow_nan=False)),
    "index_version": st.one_of(st.none(), st.text(max_size=4)),
}
NESTED = st.fixed_dictionaries(
    {},
    optional={
        "retrieval": st.fixed_dictionaries(
            {},
            optional={
                "method": st.sampled_from(["lexical", "vector", "hybrid", "other"]),
                "fusion_score": GOOD["score"],
                "vector_score": GOOD["score"],
                "lexical_rank": GOOD["lexical_rank"],
            },
        ),
        "citation": st.fixed_dictionaries(
            {}, optional={"path": GOOD["doc_path"], "start": GOOD["line_start"]}
        ),
    },
)


@st.composite
def a_hit(draw) -> Any:
    kind = draw(st.sampled_from(["good", "good", "good", "odd", "id", "junk"]))
    if kind == "id":
        return draw(st.text(max_size=5))
    if kind == "junk":
        return draw(ANY)
    hit = draw(st.fixed_dictionaries({}, optional=GOOD))
    hit.update(draw(NESTED))
    if kind == "odd":  # one field of any kind: coerced, refused or ignored, as the model says
        hit[draw(st.sampled_from([*GOOD, "doc_id", "line_end", "vector_score", "embedding_model"]))] = draw(
            ANY
        )
    return hit


def outcome_of(call):
    try:
        return "ok", call()
    except QueryFailure as failure:
        return "failed", (failure.error_class, failure.message)


@given(
    hits=st.lists(a_hit(), max_size=12),
    k=st.integers(1, 14),
    wrapped=st.booleans(),
    only_ids=st.booleans(),
)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_the_columns_agree_with_the_per_hit_model(hits, k, wrapped, only_ids):
    if only_ids:  # a replayed ranking: chunk ids only
        hits = [h if isinstance(h, str) else f"id-{i}" for i, h in enumerate(hits)]
    payload = {"hits": hits} if wrapped else hits
    mapping = ResponseMap()
    expected = outcome_of(lambda: per_hit_parse(payload, k, mapping))
    got = outcome_of(lambda: parse_hit_block(payload, k, mapping))
    assert got[0] == expected[0], (got, expected)
    if expected[0] == "failed":
        assert got[1] == expected[1]
        return
    (block, warnings), (models, old_warnings) = got[1], expected[1]
    assert warnings == old_warnings
    assert list(block) == models  # same values, renumbered 1..n, truncated at k
    assert [h.rank for h in block] == list(range(1, len(models) + 1))
    assert parse_hits(payload, k, mapping) == (models, old_warnings)
    new = hits_frame([("q1", block), ("q2", block)])
    old = per_hit_table([("q1", models), ("q2", models)])
    pd.testing.assert_frame_equal(new, old)
    assert pa.Table.from_pandas(new).schema.equals(pa.Table.from_pandas(old).schema)


def test_a_mapped_response_reads_as_the_model_did():
    mapping = ResponseMap(hits="results", hit_fields={"chunk_id": "meta.id", "score": "s"})
    payload = {
        "results": [{"meta": {"id": "b"}, "s": 2, "rank": 2}, {"meta": {"id": "a"}, "s": 1.5, "rank": 1}]
    }
    block, warnings = parse_hit_block(payload, 10, mapping)
    assert block.columns == {"chunk_id": ["a", "b"], "score": [1.5, 2.0]}
    assert warnings == ["reported ranks [2, 1] are not 1..2; renumbered"]
    assert (list(block), warnings) == per_hit_parse(payload, 10, mapping)


def test_a_ranking_of_ids_is_one_column_and_the_table_has_every_declared_column():
    block, warnings = parse_hit_block(["c3", "c1", "c2"], 2)
    assert (block.n, block.columns, warnings) == (
        2,
        {"chunk_id": ["c3", "c1"]},
        ["returned 3 hits for k=2; kept the first 2"],
    )
    table = hits_frame([("q", block), ("empty", HitBlock())])
    assert list(table.columns) == list(HIT_COLUMNS)
    assert {c: str(t) for c, t in table.dtypes.items()} == HIT_COLUMNS
    assert table["rank"].tolist() == [1, 2] and table["chunk_id"].tolist() == ["c3", "c1"]
    assert table["heading_path"].tolist() == [[], []] and table["snippet"].tolist() == ["", ""]
    assert table["score"].isna().all() and table["line_start"].isna().all()
    assert table["score_kind"].tolist() == ["other", "other"]


def test_a_bad_hit_is_named_with_its_field_as_before():
    payload = {"hits": [{"chunk_id": "a"}, {"chunk_id": "b", "score": float("nan")}, {"line_start": "x"}]}
    with pytest.raises(QueryFailure) as caught:
        parse_hit_block(payload, 10)
    assert caught.value.message == "hits[1]: score: Input should be a finite number"


# ------------------------------------------------------------------------------ read once


def _age(path, seconds: float) -> None:
    """Set the file's modification time into the past (what a file written earlier has)."""
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_a_version_reading_parses_a_trace_once_and_again_when_edited(tmp_path):
    trace = tmp_path / "trace.jsonl"
    trace.write_text('{"qid": "q1", "retrieved_ids": ["a", "b"]}\n', encoding="utf-8")
    _age(trace, 3600)
    settings = RunSettings(system={"kind": "replay", "path": str(trace), "format": "wfgy"})
    loads = TRACES.loads
    infos = [live_info(settings) for _ in range(4)]  # a sensor's ticks
    assert TRACES.loads == loads + 1
    assert all(i == infos[0] for i in infos)

    trace.write_text('{"qid": "q1", "retrieved_ids": ["c", "d", "e"]}\n', encoding="utf-8")  # now
    edited = live_info(settings)
    assert TRACES.loads == loads + 2
    assert edited.details["trace_sha256"] != infos[0].details["trace_sha256"]
    (outcome,) = build_system(settings).run_queries([QueryRequest("q1", "?")], k=10, answers=False)
    assert [h.chunk_id for h in outcome.hits] == ["c", "d", "e"]
    # written just now: parsed again on every call until it has been left alone (same-tick edits)
    live_info(settings)
    assert TRACES.loads == loads + 3
    _age(trace, 60)  # the mtime changes again: one more parse, then it is kept
    live_info(settings), live_info(settings)
    assert TRACES.loads == loads + 4
