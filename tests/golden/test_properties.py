"""Malformed golden files never crash the loader (SPEC §3.3, §11): property tests with hypothesis.

The contract checked on every generated file: ``load_golden(path)`` either returns a
:class:`LoadedGolden`, or raises :class:`InputError` whose every offender names the file, a
non-empty position ("line 3", "line 2, column 5", "queries[1]", "top level") and a non-empty
reason. Nothing else may escape (no TypeError, KeyError, RecursionError, UnicodeError, pydantic
ValidationError...).

The generated space includes the inputs that used to crash the loader (C0 control characters in
YAML, nesting far past the recursion limit, 5000-digit integers, YAML scalars that cannot be built
such as ``2001-02-30`` / ``0x_`` / ``!!int x``, odd ``schema_version`` digits, U+0085/U+2028/U+2029
in text); each also has a deterministic regression test at the end of this file. Nesting stays
below ~25k levels in process: past that, a libyaml bug kills the interpreter, which the loader
guards against (checked in a subprocess).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from itertools import count
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, currently_in_test_context, event, given, settings
from hypothesis import strategies as st

from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.golden.convert import render_canonical
from kebab_eval_pipeline.golden.load import FORMATS, READERS, LoadedGolden, load_golden
from kebab_eval_pipeline.golden.model import GoldenQuery, Support
from kebab_eval_pipeline.golden.tables import golden_from_tables
from kebab_eval_pipeline.golden.validate import match_key

SUFFIXES = (".yaml", ".yml", ".json", ".jsonl")
YAML_SUFFIXES = (".yaml", ".yml")
FMT = st.sampled_from(FORMATS) | st.just("auto")  # every format forced, auto most often
MAX_DEPTH = 150  # nesting built as objects (yaml.dump recurses); deeper nesting is built as text
DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
SETTINGS: dict[str, Any] = {
    "deadline": None,
    "suppress_health_check": [
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
    ],
}
MISSING = object()  # "leave this key out"
_files = count()


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """One folder for the whole module: function-scoped fixtures are not reset between examples."""
    return tmp_path_factory.mktemp("golden-properties")


def put(workdir: Path, data: str | bytes, suffix: str) -> Path:
    path = workdir / f"g{next(_files)}{suffix}"
    if isinstance(data, str):
        data = data.encode("utf-8")
    path.write_bytes(data)
    return path


def note(label: str) -> None:
    """Count an outcome in hypothesis' statistics (--hypothesis-show-statistics)."""
    if currently_in_test_context():
        event(label)


def check_contract(path: Path, fmt: str = "auto") -> LoadedGolden | InputError:
    """The property: a LoadedGolden, or an InputError whose offenders all say file, position, reason."""
    try:
        loaded = load_golden(path, fmt=fmt)
    except InputError as exc:
        assert exc.offenders, "an InputError must list its offenders"
        for o in exc.offenders:
            assert o.file == str(path), o
            assert isinstance(o.position, str) and o.position.strip(), o
            assert isinstance(o.reason, str) and o.reason.strip(), o
            assert o.query_id is None or isinstance(o.query_id, str), o
            assert o.field is None or isinstance(o.field, str), o
        assert str(path) in str(exc)
        note(f"InputError ({'several offenders' if len(exc.offenders) > 1 else 'one offender'})")
        path.unlink()
        return exc
    assert isinstance(loaded, LoadedGolden)
    assert loaded.files == [str(path)]
    assert loaded.golden.queries and all(isinstance(q, GoldenQuery) for q in loaded.golden.queries)
    assert len({q.id for q in loaded.golden.queries}) == len(loaded.golden.queries)
    assert loaded.golden.format in READERS
    assert all(isinstance(w, str) and w.startswith(str(path)) for w in loaded.warnings)
    note("loaded")
    path.unlink()
    return loaded


# ---------------------------------------------------------------------------------------------
# building blocks
# ---------------------------------------------------------------------------------------------

SHORT_TEXT = st.text(max_size=12)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=True, allow_infinity=True),
    SHORT_TEXT,
)
JUNK = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(SHORT_TEXT, inner, max_size=3),
    max_leaves=8,
)


@st.composite
def deep_junk(draw, max_depth: int = MAX_DEPTH) -> Any:
    """A list/dict tower at most ``max_depth`` levels deep, with junk at the bottom and on the way."""
    value = draw(JUNK)
    depth = draw(st.integers(1, max_depth))
    while depth > 0:
        kind = draw(st.sampled_from(["list", "dict", "pair"]))
        if kind == "pair" and depth >= 3:  # three levels: [junk, {"q": [value]}]
            value, depth = [draw(SCALARS), {"q": [value]}], depth - 3
        else:
            value, depth = ([value] if kind == "list" else {"k": value}), depth - 1
    return value


HUGE_TEXT = st.builds(
    lambda unit, n: (unit * (n // len(unit) + 1))[:n],
    st.sampled_from(["a", "é", "鍋", "x y ", "word: ", "- [", "\\", "'\""]),
    st.integers(10_000, 100_000),
)


def maybe(good: st.SearchStrategy, junk: st.SearchStrategy = JUNK) -> st.SearchStrategy:
    """Mostly a well-typed value, sometimes a wrong one, sometimes the key is left out."""
    return st.one_of(good, good, good, junk, st.just(MISSING))


def record(**fields: st.SearchStrategy) -> st.SearchStrategy:
    """A dict whose keys may be missing (MISSING) and which may carry an unknown key."""

    def build(values: dict, extra: dict) -> dict:
        return {k: v for k, v in values.items() if v is not MISSING} | extra

    return st.builds(
        build, st.fixed_dictionaries(fields), st.dictionaries(st.sampled_from(["extra", "Id", ""]), JUNK)
    )


IDS = st.sampled_from(["q1", "q2", "q3", "A0001", "x", 1, 2]) | SHORT_TEXT
LINE = st.integers(-3, 60)
LINES = st.lists(LINE, max_size=3)  # line_range with 0..3 values
TEXTS = st.lists(SHORT_TEXT, max_size=3)
GROUP_IX = st.lists(st.lists(st.integers(-2, 5) | JUNK, max_size=3) | JUNK, max_size=3)
RULES = st.sampled_from(["cite_newer", "cite_both", "acknowledge_both", "cite_oldest", "", "CITE_NEWER"])
VERSIONS = st.sampled_from(
    ["1", "1.0", "1.7", "2", "2.1", "0", "v1", "", "1.x", 1, 1.5, None, [1], "10", "1.2.3", "²", "1.²", "١",
     "1" * 5000, "01", " 1", "1.", ".1", "1e3"]
)  # fmt: skip

SUPPORT = record(
    chunk_id=maybe(SHORT_TEXT),
    doc_id=maybe(SHORT_TEXT),
    rel_path=maybe(st.sampled_from(["a.md", "docs/b.md", ""])),
    heading_path=maybe(TEXTS | SHORT_TEXT),
    line_start=maybe(LINE),
    line_end=maybe(LINE),
    snippet=maybe(SHORT_TEXT),
    symbol=maybe(SHORT_TEXT),
    symbol_kind=maybe(SHORT_TEXT),
    section=maybe(SHORT_TEXT),
    grade=maybe(st.integers(-1, 3)),
)
CANONICAL_QUERY = record(
    id=maybe(IDS),
    query=maybe(SHORT_TEXT),
    lang=maybe(st.sampled_from(["en", "ko", ""])),
    answerable=maybe(st.booleans() | st.sampled_from(["yes", "no", "maybe"])),
    category=maybe(SHORT_TEXT),
    difficulty=maybe(SHORT_TEXT),
    tags=maybe(TEXTS),
    group=maybe(st.sampled_from(["g1", "g2", None])),
    pending=maybe(st.booleans()),
    supports=maybe(st.lists(SUPPORT | JUNK, max_size=3) | SHORT_TEXT),
    required_support_groups=maybe(GROUP_IX),
    must_contain=maybe(TEXTS),
    forbidden=maybe(TEXTS),
    gold_claim_substr=maybe(TEXTS),
    recency_rule=maybe(RULES),
    expected_kind=maybe(SHORT_TEXT),
    notes=maybe(SHORT_TEXT),
    constraints=maybe(TEXTS),
)
CKV_QUERY = record(
    id=maybe(IDS),
    intent=maybe(SHORT_TEXT),
    expected=maybe(
        record(
            file=maybe(st.sampled_from(["server.go", "docs/a.md"])),
            symbol=maybe(SHORT_TEXT),
            kind=maybe(st.sampled_from(["Method", "Function", "Struct"])),
            line_range=maybe(LINES),
            section=maybe(SHORT_TEXT),
            expected_kind=maybe(st.sampled_from(["pr_summary", "commit_message", "doc_section"])),
        )
    ),
    pending=maybe(st.booleans()),
    notes=maybe(SHORT_TEXT),
    recorded_via=maybe(SHORT_TEXT),
)
GOLD_SUPPORT = record(
    rel_path=maybe(st.sampled_from(["notes/a.md", "b.md"])),
    heading_path=maybe(TEXTS),
    snippets=maybe(TEXTS | SHORT_TEXT),
    snippet=maybe(SHORT_TEXT),
    grade=maybe(st.integers(-1, 3)),
    line_start=maybe(LINE),
    line_end=maybe(LINE),
)
SUPPORT_ANCHOR_QUERY = record(
    id=maybe(IDS),
    question=maybe(SHORT_TEXT),
    answerable=maybe(st.booleans()),
    category=maybe(st.sampled_from(["factual", "multi_hop", "recency/conflict"]) | SHORT_TEXT),
    tags=maybe(TEXTS),
    difficulty=maybe(SHORT_TEXT),
    gold_supports=maybe(st.lists(GOLD_SUPPORT | JUNK, max_size=3)),
    required_support_groups=maybe(GROUP_IX),
    recency_conflict_rule=maybe(RULES),
    group=maybe(st.sampled_from(["g1", None])),
    pending=maybe(st.booleans()),
)
KEBAB_QUERY = record(
    id=maybe(IDS),
    query=maybe(SHORT_TEXT),
    lang=maybe(st.sampled_from(["en", "ko"])),
    expected_doc_ids=maybe(TEXTS | SHORT_TEXT),
    expected_chunk_ids=maybe(TEXTS | SHORT_TEXT),
    must_contain=maybe(TEXTS),
    forbidden=maybe(TEXTS),
    difficulty=maybe(SHORT_TEXT),
    group=maybe(st.sampled_from(["g1", "g2"])),
)
WFGY_QUERY = record(
    qid=maybe(IDS),
    question=maybe(SHORT_TEXT),
    answerable=maybe(st.booleans()),
    gold_claim_substr=maybe(TEXTS | SHORT_TEXT),
    gold_citations=maybe(TEXTS | SHORT_TEXT),
    constraints=maybe(TEXTS | SHORT_TEXT),
)


def entries(query: st.SearchStrategy) -> st.SearchStrategy:
    return st.lists(query | JUNK, max_size=5)


@st.composite
def document(draw) -> tuple[str, Any]:
    """(format shape, document object) of any of the five formats, malformed at random."""
    shape = draw(st.sampled_from(["canonical", "ckv", "supports", "kebab", "wfgy"]))
    if shape in ("canonical", "ckv"):
        top = {"schema_version": draw(maybe(VERSIONS)), "name": draw(maybe(SHORT_TEXT))}
        top["queries"] = draw(maybe(entries(CANONICAL_QUERY if shape == "canonical" else CKV_QUERY)))
        top |= draw(st.dictionaries(st.sampled_from(["owner", "description", "version"]), JUNK, max_size=2))
        return shape, {k: v for k, v in top.items() if v is not MISSING}
    items = draw(entries({"supports": SUPPORT_ANCHOR_QUERY, "kebab": KEBAB_QUERY, "wfgy": WFGY_QUERY}[shape]))
    if shape == "supports" and draw(st.booleans()):
        return shape, {"schema_version": draw(VERSIONS), "queries": items}
    return shape, items


def serialise(draw, doc: Any, suffix: str) -> str:
    if suffix == ".jsonl":
        items = (
            doc.get("queries", [doc]) if isinstance(doc, dict) else doc if isinstance(doc, list) else [doc]
        )
        items = items if isinstance(items, list) else [items]
        lines = [json.dumps(item, ensure_ascii=draw(st.booleans())) for item in items]
        if lines and draw(st.booleans()):
            lines.insert(
                draw(st.integers(0, len(lines))), draw(st.sampled_from(["", "   ", "[]", "null", "7"]))
            )
        return "\n".join(lines) + draw(st.sampled_from(["", "\n", "\r\n"]))
    if suffix == ".json":
        return json.dumps(doc, ensure_ascii=draw(st.booleans()), indent=draw(st.sampled_from([None, 2])))
    return yaml.dump(
        doc, Dumper=DUMPER, allow_unicode=True, sort_keys=False, default_flow_style=draw(st.booleans())
    )


# inserted by the text mangler: YAML/JSON syntax, ids, keys, and scalars that are hard to build
SYNTAX = [":", "-", "[", "]", "{", "}", ",", "'", '"', "#", "&a ", "*a", "!", "|", ">", "%", "@", "`",
          "\n", "\t", " ", "  ", "\\", "---", "...", "? ", "null", "~", "é", "\ufeff", "\r", "id", "query: ",
          "queries:", "- id: q1", "1", "-1", "0.5", "true", '"q1"', "{}", "[]", "\\u00", "\\ud800", "1e999",
          "NaN", "\x00", "\x01", "\x1b", "\x7f", "\x85", "\u2028", "2001-02-30", "2024-13-01", "0x_", "0b_",
          "!!int ", "!!float ", "!!bool ", "!!timestamp ", "!!binary ", "!!set ", "1" * 5000]  # fmt: skip
INVALID_UTF8 = [b"\xff", b"\xfe\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xe2\x82", b"\xf0\x28\x8c\xbc", b"\x80"]


def mangle(draw, text: str) -> bytes:
    """Truncate, delete, insert, duplicate or swap; sometimes inject bytes that are not UTF-8."""
    for op in draw(st.lists(st.sampled_from(["truncate", "delete", "insert", "dup", "swap"]), max_size=3)):
        n = len(text)
        if op == "truncate":
            text = text[: draw(st.integers(0, n))]
        elif op == "delete" and n:
            a = draw(st.integers(0, n - 1))
            text = text[:a] + text[a + draw(st.integers(1, 20)) :]
        elif op == "insert":
            a = draw(st.integers(0, n))
            text = text[:a] + draw(st.sampled_from(SYNTAX)) + text[a:]
        elif op in ("dup", "swap") and text:
            lines = text.split("\n")
            i, j = draw(st.integers(0, len(lines) - 1)), draw(st.integers(0, len(lines) - 1))
            if op == "dup":
                lines.insert(j, lines[i])
            else:
                lines[i], lines[j] = lines[j], lines[i]
            text = "\n".join(lines)
    data = text.encode("utf-8")
    if draw(st.integers(0, 9)) == 0:
        a = draw(st.integers(0, len(data)))
        data = data[:a] + draw(st.sampled_from(INVALID_UTF8)) + data[a:]
    return data


# ---------------------------------------------------------------------------------------------
# the properties
# ---------------------------------------------------------------------------------------------


@settings(max_examples=450, **SETTINGS)
@given(data=st.data(), shaped=document(), suffix=st.sampled_from(SUFFIXES), fmt=FMT)
def test_malformed_documents_of_every_format(workdir: Path, data, shaped, suffix: str, fmt: str):
    shape, doc = shaped
    note(f"shape {shape}, {suffix}")
    raw = mangle(data.draw, serialise(data.draw, doc, suffix))
    check_contract(put(workdir, raw, suffix), fmt)


RANDOM_BYTES = st.binary(max_size=300) | st.builds(
    bytes.__add__,
    st.sampled_from(
        [b"\xef\xbb\xbf", b"\xff\xfe", b"\x00", b"queries:\n  - ", b"[{", b'{"queries": [', b"- id: "]
    ),
    st.binary(max_size=200),
)


@settings(max_examples=200, **SETTINGS)
@given(raw=RANDOM_BYTES, suffix=st.sampled_from(SUFFIXES), fmt=FMT)
def test_random_bytes(workdir: Path, raw: bytes, suffix: str, fmt: str):
    check_contract(put(workdir, raw, suffix), fmt)


TOKEN_SOUP = st.lists(
    st.sampled_from([*SYNTAX, "expected_doc_ids: ", "qid", "intent", "gold_supports", "\n  "])
)


@settings(max_examples=150, **SETTINGS)
@given(tokens=TOKEN_SOUP, suffix=st.sampled_from(SUFFIXES), fmt=FMT)
def test_syntax_token_soup(workdir: Path, tokens: list[str], suffix: str, fmt: str):
    check_contract(put(workdir, "".join(tokens), suffix), fmt)


@settings(max_examples=60, **SETTINGS)
@given(
    data=st.data(),
    junk=deep_junk(),
    where=st.sampled_from(["id", "query", "supports", "tags", "top", "queries", "schema_version", "name"]),
    suffix=st.sampled_from(SUFFIXES),
)
def test_deeply_nested_junk(workdir: Path, data, junk, where: str, suffix: str):
    entry: dict[str, Any] = {"id": "q1", "query": "x", "supports": [{"doc_id": "d"}]}
    doc: Any = {"schema_version": "1", "name": "n", "queries": [entry]}
    if where == "top":
        doc = junk
    elif where in ("queries", "schema_version", "name"):
        doc[where] = junk
    else:
        entry[where] = junk
    check_contract(put(workdir, serialise(data.draw, doc, suffix), suffix))


@settings(max_examples=30, **SETTINGS)
@given(
    huge=HUGE_TEXT,
    where=st.sampled_from(["id", "query", "snippet", "heading", "key", "version", "line"]),
    suffix=st.sampled_from(SUFFIXES),
)
def test_huge_strings(workdir: Path, huge: str, where: str, suffix: str):
    support: dict[str, Any] = {"rel_path": "a.md", "snippet": "s"}
    entry: dict[str, Any] = {"id": "q1", "query": "x", "supports": [support]}
    doc: dict[str, Any] = {"schema_version": "1", "queries": [entry]}
    if where in ("id", "query"):
        entry[where] = huge
    elif where == "snippet":
        support["snippet"] = huge
    elif where == "heading":
        support["heading_path"] = [huge, huge[:500]]
    elif where == "key":
        entry[huge] = 1
    elif where == "version":
        doc["schema_version"] = huge
    else:
        support["line_start"] = huge
    text = json.dumps(doc) if suffix == ".json" else json.dumps(entry) + "\n" if suffix == ".jsonl" else None
    if text is None:
        text = yaml.dump(doc, Dumper=DUMPER, allow_unicode=True, width=10**9)
    result = check_contract(put(workdir, text, suffix))
    if where == "id" and re.search(r"\s", huge):  # a query id with whitespace: refused (a TREC qid)
        assert isinstance(result, InputError) and [o.field for o in result.offenders] == ["id"]
    elif where in ("id", "query", "snippet", "heading"):
        assert isinstance(result, LoadedGolden)  # long text is valid text
        q = result.golden.queries[0]
        assert huge in (q.id, q.query, q.supports[0].snippet, *(q.supports[0].heading_path or []))


@pytest.mark.parametrize("suffix", SUFFIXES)
@pytest.mark.parametrize(
    "text",
    ["", " ", "\n\n", "# only a comment\n", "---\n", "null", "~", "[]", "{}", "queries: []", "queries:",
     "[{}]", "- \n", "...", '""', "0", "true", "[null]", '{"queries": null}', "\ufeff", "\ufeff{}"],
)  # fmt: skip
def test_empty_and_trivial_files(workdir: Path, text: str, suffix: str):
    result = check_contract(put(workdir, text, suffix))
    assert isinstance(result, InputError)  # nothing here holds a query


# ---------------------------------------------------------------------------------------------
# semantic defects on an otherwise valid canonical set: always refused, offender pinpointed
# ---------------------------------------------------------------------------------------------

# any text a UTF-8 file can hold (no surrogates), line separators and control characters included
TEXT = st.text(st.characters(codec="utf-8"), max_size=16)
NONBLANK = st.builds(
    str.__add__, st.characters(codec="utf-8", exclude_categories=("Cc", "Cs", "Zs", "Zl", "Zp")), TEXT
)

# Query ids hold no whitespace or control character (they become TREC query ids and file names);
# chunk and doc ids may hold spaces, never a tab, line break or control character.
QUERY_ID = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cc", "Cs", "Zs", "Zl", "Zp")), min_size=1
)
SUPPORT_ID = st.text(st.characters(codec="utf-8", exclude_categories=("Cc", "Cs", "Zl", "Zp")), max_size=16)


@st.composite
def valid_support(draw, pending: bool) -> dict:
    fields: dict[str, Any] = {}
    for name in ("chunk_id", "doc_id", "rel_path", "snippet", "symbol", "symbol_kind", "section"):
        if draw(st.booleans()):
            fields[name] = draw(SUPPORT_ID if name in ("chunk_id", "doc_id") else TEXT)
    if draw(st.booleans()):
        fields["heading_path"] = draw(st.lists(TEXT, max_size=3))
    if draw(st.booleans()):
        low = -2 if pending else 1
        a, b = sorted(draw(st.lists(st.integers(low, 500), min_size=2, max_size=2)))
        fields |= draw(
            st.sampled_from([{"line_start": a, "line_end": b}, {"line_start": a}, {"line_end": b}])
        )
    if draw(st.booleans()):
        fields["grade"] = draw(st.integers(0, 3))
    if not any(fields.get(f) not in (None, "", []) for f in ("chunk_id", "doc_id", "rel_path", "snippet")):
        fields["rel_path"] = draw(NONBLANK)  # a support must name some evidence
    return fields


def _match_key(support: dict) -> tuple:
    return match_key(Support.model_validate(support))


@st.composite
def valid_query(draw, qid: str) -> dict:
    pending = draw(st.booleans())
    answerable = draw(st.booleans()) or draw(st.booleans())
    # distinct evidence: a support given twice is refused (golden/validate.py)
    unique = st.lists(valid_support(pending), min_size=1, max_size=3, unique_by=_match_key)
    supports = draw(unique) if answerable else []
    q: dict[str, Any] = {"id": qid, "query": draw(NONBLANK)}
    if draw(st.booleans()):
        q["lang"] = draw(st.sampled_from(["en", "ko", "de-CH", ""]))
    if not answerable:
        q["answerable"] = False
    if pending:
        q["pending"] = True
    if supports:
        q["supports"] = supports
        if draw(st.booleans()):
            n = len(supports)
            q["required_support_groups"] = draw(
                st.lists(st.lists(st.integers(0, n - 1), min_size=1, max_size=n), min_size=1, max_size=3)
            )
    for name in ("category", "difficulty", "notes", "expected_kind"):
        if draw(st.booleans()):
            q[name] = draw(TEXT)
    for name in ("tags", "must_contain", "forbidden", "gold_claim_substr", "constraints"):
        if draw(st.booleans()):
            q[name] = draw(st.lists(TEXT, max_size=3))
    if draw(st.booleans()):
        q["recency_rule"] = draw(st.sampled_from(["cite_newer", "cite_both", "acknowledge_both", None]))
    return q


def positive_lines(supports: list[dict]) -> list[dict]:
    """A pending query's ``supports`` made valid for a query that is not pending: every line number
    moved up by 3 (a pending query's may be as low as -2). One shift for all keeps the supports
    distinct and their ranges in order."""
    shift = lambda key, value: value + 3 if key in ("line_start", "line_end") else value  # noqa: E731
    return [{k: shift(k, v) for k, v in support.items()} for support in supports]


@st.composite
def valid_set(draw, min_size: int = 1) -> list[dict]:
    ids = draw(st.lists(QUERY_ID, min_size=min_size, max_size=6, unique=True))
    queries = [draw(valid_query(i)) for i in ids]
    # intent groups: members copy the first member's supports (identical expected documents)
    if len(queries) >= 2 and draw(st.booleans()):
        members = draw(st.lists(st.sampled_from(range(len(queries))), min_size=2, max_size=4, unique=True))
        name = draw(NONBLANK)
        first = queries[members[0]]
        if first.get("pending") and "supports" in first:  # members that are not pending copy them
            first["supports"] = positive_lines(first["supports"])
        for m in members:
            queries[m]["group"] = name
            for key in ("supports", "answerable", "required_support_groups"):
                queries[m].pop(key, None)
                if key in queries[members[0]]:
                    queries[m][key] = queries[members[0]][key]
    return queries


def canonical_text(queries: list[dict], suffix: str, name: str = "generated") -> str:
    if suffix == ".jsonl":
        return "".join(json.dumps(q, ensure_ascii=False) + "\n" for q in queries)
    doc = {"schema_version": "1", "name": name, "queries": queries}
    if suffix == ".json":
        return json.dumps(doc, ensure_ascii=False, indent=1)
    return yaml.dump(doc, Dumper=DUMPER, allow_unicode=True, sort_keys=False)


WRONG = {
    # field → values of a type the model refuses
    "id": [["q"], {"a": 1}, None, 1.5, True],
    "query": [17, 2.5, ["what"], None, {"q": "x"}],
    "lang": [None, ["en"], 3],
    "answerable": ["maybe", [1], {"a": 1}, 2, 0.5],
    "pending": ["sometimes", [True], 7],
    "tags": ["bread", 5, {"a": 1}, [None], [1.5]],
    "must_contain": ["24 °C", 3, [None]],
    "supports": ["docs/a.md", 5, [5], [["a.md"]], {"doc_id": "d"}],
    "required_support_groups": ["0", 5, [0], [["x"]], [[0.5]], [[None]], [[[0]]]],
    "recency_rule": ["cite_oldest", "", "CITE_NEWER", 1, ["cite_newer"]],
    "supports.line_start": ["fourteen", 1.5, [1], {"a": 1}],
    "supports.heading_path": ["Intro", 3, [None], {"a": "b"}],
    "supports.grade": ["high", 1.5, [1]],
    "supports.snippet": [5, ["s"], {"s": 1}],
}


@st.composite
def defect(draw) -> tuple[list[dict], int, str, str, str | None]:
    """(queries, index of the defective query, kind, expected field prefix, expected reason part)."""
    queries = draw(valid_set(min_size=2))
    i = draw(st.integers(0, len(queries) - 1))
    q = queries[i]
    q.pop("group", None)  # keep the defect the only problem
    if q.pop("pending", False) and "supports" in q:
        q["supports"] = positive_lines(q["supports"])  # a pending query's may have line 0
    kind = draw(
        st.sampled_from(
            ["missing_id", "duplicate_id", "blank_id", "empty_query", "inverted_lines", "nonpositive_line",
             "group_out_of_range", "group_empty", "unanswerable_with_supports", "empty_support",
             "group_conflict"]
        )
        | st.just("wrong_type")  # half of the cases: a value of the wrong type somewhere
    )  # fmt: skip
    if kind == "missing_id":
        del q["id"]
        return queries, i, kind, "id", "missing: every query needs an id"
    if kind == "duplicate_id":
        j = (i + draw(st.integers(1, len(queries) - 1))) % len(queries)
        first, second = sorted((i, j))
        queries[second]["id"] = queries[first]["id"]
        return queries, second, kind, "id", "duplicate id (first at "
    if kind == "blank_id":
        q["id"] = draw(st.sampled_from(["", " ", "\t", "  \n"]))
        return queries, i, kind, "id", "empty id"
    if kind == "empty_query":
        q["query"] = draw(st.sampled_from(["", " ", "\t\t", "\u3000"]))
        return queries, i, kind, "query", "empty query"
    q["answerable"] = True
    supports = q.setdefault("supports", [{"doc_id": "d"}])
    q.pop("required_support_groups", None)
    n = len(supports)
    if kind == "inverted_lines":
        a = draw(st.integers(1, 100))
        b = a + draw(st.integers(1, 100))
        supports.append({"rel_path": "a.md", "line_start": b, "line_end": a})
        return queries, i, kind, f"supports[{n}]", f"line_start {b} > line_end {a}"
    if kind == "nonpositive_line":
        supports.append(
            {"rel_path": "a.md", draw(st.sampled_from(["line_start", "line_end"])): draw(LINE_BAD)}
        )
        return queries, i, kind, f"supports[{n}]", "line numbers must be positive (1-based)"
    if kind == "group_out_of_range":
        bad = draw(st.sampled_from([n, n + 3, -1, -7]))
        q["required_support_groups"] = [[0], [bad]] if draw(st.booleans()) else [[bad, 0]]
        return queries, i, kind, "required_support_groups[", f"index [{bad}] out of range"
    if kind == "group_empty":
        q["required_support_groups"] = [[0], []]
        return queries, i, kind, "required_support_groups[1]", "empty group can never be satisfied"
    if kind == "unanswerable_with_supports":
        q["answerable"] = False
        return queries, i, kind, "supports", "an unanswerable query must not list gold supports"
    if kind == "empty_support":
        supports.append(
            draw(st.sampled_from([{}, {"symbol": "f"}, {"section": "s", "grade": 2}, {"doc_id": ""}]))
        )
        return queries, i, kind, f"supports[{n}]", "support names no evidence"
    if kind == "group_conflict":
        j = (i + draw(st.integers(1, len(queries) - 1))) % len(queries)
        first, second = sorted((i, j))
        for m, doc_id in ((first, "d-one"), (second, "d-two")):
            queries[m].update(group="conflict", answerable=True, supports=[{"doc_id": doc_id}])
            queries[m].pop("required_support_groups", None)
            queries[m].pop("pending", None)
        return queries, second, kind, "group", "group 'conflict': expected docs ['d-two'] differ from"
    field = draw(st.sampled_from(sorted(WRONG)))
    value = draw(st.sampled_from(WRONG[field]))
    if field.startswith("supports."):
        supports[0][field.split(".", 1)[1]] = value
        return queries, i, f"wrong {field}", "supports", None
    q[field] = value
    return queries, i, f"wrong {field}", field, None


def yaml_text_value(queries: list[dict], index: int, kind: str) -> tuple[str, Any] | None:
    """(field, the text YAML writes) when the defect is a number or bool written unquoted in a text
    field: a YAML golden set reads it as that text (ids are the text the user wrote), not an error."""
    field = kind.removeprefix("wrong ")
    q = queries[index]
    value = q["supports"][0][field.split(".", 1)[1]] if field.startswith("supports.") else q.get(field)
    scalar = isinstance(value, int | float) and field in {"id", "query", "lang", "supports.snippet"}
    listed = (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(v, int | float) for v in value)
        and field in {"tags", "must_contain", "supports.heading_path"}
    )
    if not kind.startswith("wrong ") or not (scalar or listed):
        return None
    dumped = yaml.dump(value, Dumper=DUMPER).removesuffix("...\n").strip()
    if listed:
        return field, [yaml.dump(v, Dumper=DUMPER).removesuffix("...\n").strip() for v in value]
    return field, dumped


LINE_BAD = st.integers(-5, 0)


@settings(max_examples=250, **SETTINGS)
@given(case=defect(), suffix=st.sampled_from(SUFFIXES))
def test_semantic_defects_are_refused_and_pinpointed(workdir: Path, case, suffix: str):
    queries, index, kind, field_prefix, reason_part = case
    note(kind)
    path = put(workdir, canonical_text(queries, suffix), suffix)
    result = check_contract(path)
    as_text = yaml_text_value(queries, index, kind) if suffix in YAML_SUFFIXES else None
    if as_text is not None:
        assert isinstance(result, LoadedGolden), [o.render() for o in result.offenders]
        field, text = as_text  # e.g. `snippet: 5` in YAML is the snippet "5"
        loaded = result.golden.queries[index]
        owner, name = (loaded.supports[0], field[9:]) if field.startswith("supports.") else (loaded, field)
        held = getattr(owner, name)
        assert held == text, (field, held, text)
        return
    assert isinstance(result, InputError), f"{kind} was loaded"
    mine = [o for o in result.offenders if (o.field or "").startswith(field_prefix)]
    assert mine, [o.render() for o in result.offenders]
    if reason_part is not None:
        assert any(reason_part in o.reason for o in mine), [o.render() for o in mine]
    # positions point at the defective entry
    if suffix == ".jsonl":
        assert any(o.position == f"line {index + 1}" for o in mine), [o.render() for o in mine]
    elif suffix == ".json":
        assert any(o.position.startswith(f"queries[{index}]") for o in mine), [o.render() for o in mine]
    else:
        assert all(re.fullmatch(r"line \d+", o.position) for o in mine), [o.render() for o in mine]
    if kind == "duplicate_id":
        first = [q["id"] for q in queries].index(queries[index]["id"])
        if suffix == ".jsonl":
            assert any(o.reason == f"duplicate id (first at {path}:line {first + 1})" for o in mine)


# ---------------------------------------------------------------------------------------------
# valid sets: load → render_canonical → load is the identity
# ---------------------------------------------------------------------------------------------


@settings(max_examples=150, **SETTINGS)
@given(
    queries=valid_set(),
    suffix=st.sampled_from(SUFFIXES),
    out_suffix=st.sampled_from((".yaml", ".json", ".jsonl")),
)
def test_valid_sets_round_trip(workdir: Path, queries: list[dict], suffix: str, out_suffix: str):
    source = put(workdir, canonical_text(queries, suffix), suffix)
    loaded = check_contract(source)
    assert isinstance(loaded, LoadedGolden), loaded
    assert [q.id for q in loaded.golden.queries] == [q["id"] for q in queries]
    assert loaded.golden.queries == [GoldenQuery.model_validate(q) for q in queries]
    # the model of a set too large to hold as columns is built from its tables: the same
    assert golden_from_tables(*loaded.tables()).queries == loaded.golden.queries
    text = render_canonical(loaded.golden, out_suffix)
    again = check_contract(put(workdir, text, out_suffix))
    assert isinstance(again, LoadedGolden), again
    assert again.golden.queries == loaded.golden.queries
    assert render_canonical(again.golden, out_suffix) == text


# ---------------------------------------------------------------------------------------------
# nesting far deeper than the recursion limit, built as text
# ---------------------------------------------------------------------------------------------


@st.composite
def deep_text(draw) -> str:
    """A flow (JSON-compatible) value nested up to 3000 levels: lists, mappings or both."""
    depth = draw(st.integers(1, 3000))
    style = draw(st.sampled_from(["list", "dict", "mixed"]))
    kinds = ["list"] * depth if style == "list" else ["dict"] * depth if style == "dict" else None
    if kinds is None:  # a short random pattern, repeated
        pattern = draw(st.lists(st.sampled_from(["list", "dict"]), min_size=1, max_size=8))
        kinds = (pattern * (depth // len(pattern) + 1))[:depth]
    opening = "".join("[" if k == "list" else '{"k": ' for k in kinds)
    closing = "".join("]" if k == "list" else "}" for k in reversed(kinds))
    return opening + draw(st.sampled_from(['"x"', "1", "null", "[]"])) + closing


@settings(max_examples=80, **SETTINGS)
@given(
    deep=deep_text(),
    where=st.sampled_from(["top", "queries", "entry", "id", "query", "tags", "schema_version", "name"]),
    suffix=st.sampled_from(SUFFIXES),
    fmt=FMT,
)
def test_nesting_past_the_recursion_limit(workdir: Path, deep: str, where: str, suffix: str, fmt: str):
    entry = {"id": '"q1"', "query": '"x"', "supports": '[{"doc_id": "d"}]'}
    top = {"schema_version": '"1"', "name": '"n"'}
    if where in entry:
        entry[where] = deep
    elif where in top:
        top[where] = deep
    line = "{" + ", ".join(f'"{k}": {v}' for k, v in entry.items()) + "}"
    if where == "entry":
        line = deep
    if suffix == ".jsonl":
        text = (deep if where == "top" else line) + "\n"
    else:
        queries = deep if where == "queries" else f"[{line}]"
        text = "{" + ", ".join(f'"{k}": {v}' for k, v in top.items()) + f', "queries": {queries}}}'
        text = deep if where == "top" else text
    check_contract(put(workdir, text, suffix), fmt)


@settings(max_examples=40, **SETTINGS)
@given(depth=st.integers(90, 3000), indicator=st.sampled_from(["- ", "? ", "- ? "]), multiline=st.booleans())
def test_deep_yaml_block_nesting(workdir: Path, depth: int, indicator: str, multiline: bool):
    """Block collections nested on one line (``- - - x``) or spread over lines of 50 levels each."""
    if not multiline:
        text = indicator * depth + "x\n"
    else:
        lines, column = [], 0
        for start in range(0, depth, 50):
            chunk = indicator * min(50, depth - start)
            lines.append(" " * column + chunk.rstrip())
            column += len(chunk)
        text = "\n".join(lines) + " x\n"
    check_contract(put(workdir, text, ".yaml"))


# ---------------------------------------------------------------------------------------------
# regressions: inputs that used to crash the loader or lose the offender's position
# ---------------------------------------------------------------------------------------------


def input_error(path: Path) -> InputError:
    """The InputError ``load_golden(path)`` must raise, its offenders complete."""
    with pytest.raises(InputError) as exc:
        load_golden(path)
    assert exc.value.offenders
    for o in exc.value.offenders:
        assert o.file == str(path) and o.position and o.reason, o
    return exc.value


@pytest.mark.parametrize(
    ("text", "line"),
    [('queries:\n  - {id: a, query: "x"}\n\x00\n', 3), ("- id: a\x01\n", 1), ("x: 1\ny: \x1b\n", 2)],
)
def test_yaml_control_character_is_reported_with_its_line(tmp_path: Path, text: str, line: int):
    path = tmp_path / "g.yaml"
    path.write_text(text, encoding="utf-8")
    (offender,) = input_error(path).offenders
    assert offender.position == f"line {line}"


def test_yaml_control_character_line_after_multibyte_text(tmp_path: Path):
    path = tmp_path / "g.yaml"
    text = 'name: "' + "é" * 20 + '"\nqueries: [{id: a, query: "x\x01"}]\n# 1\n# 2\n# 3\n# 4\n# 5\n'
    path.write_text(text, encoding="utf-8")
    (offender,) = input_error(path).offenders
    assert offender.position == "line 2"


@pytest.mark.parametrize("version", ["²", "1.²", "١", "1" * 5000])
def test_schema_version_with_odd_digits_is_an_input_error(tmp_path: Path, version: str):
    path = tmp_path / "g.yaml"
    path.write_text(f'schema_version: "{version}"\nqueries: [{{id: a, query: x}}]\n', encoding="utf-8")
    (offender,) = input_error(path).offenders
    assert offender.field == "schema_version" and offender.position == "top level"


@pytest.mark.parametrize(
    "scalar",
    [
        "2001-02-30",
        "2024-13-01",
        "0x_",
        "0b_",
        "!!int x",
        "!!float x",
        "!!bool x",
        "!!timestamp x",
        "1" * 5000,
    ],
)
def test_yaml_scalar_that_cannot_be_built_is_an_input_error(tmp_path: Path, scalar: str):
    # Under a key whose values are typed (a grade): in an id field the scalar is its text.
    path = tmp_path / "k.yaml"
    path.write_text(f"queries:\n- id: a\n  query: x\n  supports: [{{doc_id: d, grade: {scalar}}}]\n", "utf-8")
    input_error(path)


@pytest.mark.parametrize(
    ("suffix", "text", "position"),
    [
        (".json", '[{"id": ' + "1" * 5000 + ', "query": "x", "expected_doc_ids": ["d"]}]', None),
        (".jsonl", '{"id": "a", "query": "x"}\n{"id": ' + "1" * 5000 + ', "query": "x"}\n', "line 2"),
        (".json", "[" * 1000 + "]" * 1000, None),
        (".jsonl", '{"id": "a", "query": ' + "[" * 1000 + "]" * 1000 + "}\n", "line 1"),
    ],
    ids=["json-long-int", "jsonl-long-int", "json-deep", "jsonl-deep"],
)
def test_json_parser_limits_are_input_errors(tmp_path: Path, suffix: str, text: str, position: str | None):
    path = tmp_path / f"g{suffix}"
    path.write_text(text, encoding="utf-8")
    (offender,) = input_error(path).offenders
    if position:
        assert offender.position == position


@pytest.mark.parametrize(
    "text",
    [
        'schema_version: "1"\nqueries:\n  - id: a\n    query: ' + "[" * 600 + "]" * 600 + "\n",
        'schema_version: "1"\nqueries:\n  - id: ' + "[" * 1200 + "]" * 1200 + "\n    query: x\n",
        "schema_version: " + "[" * 1200 + "]" * 1200 + "\nqueries: [{id: a, query: x}]\n",
        "name: " + "[" * 1200 + "]" * 1200 + "\nqueries: [{id: a, query: x, supports: [{doc_id: d}]}]\n",
    ],
    ids=["deep-query", "deep-id", "deep-schema-version", "deep-name"],
)
def test_deep_yaml_nesting_is_an_input_error(tmp_path: Path, text: str):
    path = tmp_path / "g.yaml"
    path.write_text(text, encoding="utf-8")
    input_error(path)


# Past ~25k levels libyaml's C composer overflows the C stack and the interpreter dies (SIGSEGV);
# yaml_io guards with a cheap upper bound on the nesting. Each case runs in a child process.
N_DEEP = 40_000


def _block_lines(levels: int, per_line: int = 100) -> str:
    lines, column = [], 0
    for _ in range(levels // per_line):
        lines.append(" " * column + "- " * (per_line - 1) + "-")
        column += 2 * per_line
    return "\n".join(lines) + " x\n"


DEEP_FLOW = "[" * N_DEEP + "]" * N_DEEP
SEGFAULT_CASES = {
    "flow-brackets": f"queries: {DEEP_FLOW}\n",
    "block-one-line": "- " * N_DEEP + "x\n",
    # closing brackets inside a string or a comment must not hide the openers after them
    "closing-brackets-in-a-string": 'x: "' + "]" * N_DEEP + f'"\nqueries: {DEEP_FLOW}\n',
    "closing-brackets-in-a-comment": "# " + "}" * N_DEEP + f"\nqueries: {DEEP_FLOW}\n",
    # block nesting spread over lines, 100 levels per line
    "block-over-lines": _block_lines(N_DEEP),
    # a quote inside a plain scalar (an apostrophe in English text) is not a quoted string
    "apostrophes-in-plain-scalars": f"name: what's up\nqueries: {DEEP_FLOW}\nnotes: don't\n",
    "double-quote-in-a-plain-scalar": f'name: a"b\nqueries: {DEEP_FLOW}\n# "\n',
    # just under the opener count that switches to the pure-Python loader, under a block run
    "flow-under-the-guard-in-block": "- " * 99 + "[" * 9_999 + "]" * 9_999 + "\n",
}


def _load_in_child(path: Path) -> subprocess.CompletedProcess:
    package = Path(sys.modules["kebab_eval_pipeline.foundation.errors"].__file__).parent
    script = textwrap.dedent(
        f"""
        import resource, sys, types
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crash leaves no core file behind
        # the golden modules without the package __init__ (it imports Dagster: ~1 s per child)
        package = types.ModuleType("kebab_eval_pipeline")
        package.__path__ = [{str(package)!r}]
        sys.modules["kebab_eval_pipeline"] = package
        from kebab_eval_pipeline.foundation.errors import InputError
        from kebab_eval_pipeline.golden.load import load_golden
        try:
            load_golden({str(path)!r})
        except InputError as exc:
            assert all(o.position for o in exc.offenders), exc
            print("InputError")
        """
    )
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("case", sorted(SEGFAULT_CASES))
def test_very_deep_yaml_does_not_kill_the_process(tmp_path: Path, case: str):
    path = tmp_path / "deep.yaml"
    path.write_text(SEGFAULT_CASES[case], encoding="utf-8")
    proc = _load_in_child(path)
    assert (proc.returncode, proc.stdout.strip()) == (0, "InputError"), proc.stderr[-2000:]


def test_flow_heavy_yaml_loads_the_same_through_the_safe_loader(tmp_path: Path):
    """A large set written in flow style has ≥ 10k brackets: yaml_io then reads it with PyYAML's
    pure-Python loader (no libyaml crash possible). Same queries, same positions as the fast path."""
    n = 3_400  # three openers per query: 10,200
    lines = ['schema_version: "1"', "queries:"]
    for i in range(n):
        lines.append(
            f"  - {{id: q{i}, query: 'question {i}?', tags: [t{i % 7}], supports: [{{doc_id: d{i}}}]}}"
        )
    big = tmp_path / "flow.yaml"
    big.write_text("\n".join(lines) + "\n", encoding="utf-8")
    small = tmp_path / "flow-small.yaml"
    small.write_text("\n".join(lines[:1002]) + "\n", encoding="utf-8")  # 1,000 queries: libyaml
    loaded = load_golden(big).golden.queries
    assert len(loaded) == n and loaded[:1000] == load_golden(small).golden.queries
    last = n - 1
    expected = {"id": f"q{last}", "query": f"question {last}?", "tags": [f"t{last % 7}"]}
    assert loaded[-1] == GoldenQuery(**expected, supports=[{"doc_id": f"d{last}"}])
    # an offender still gets its line
    lines[2 + 3_000] = "  - {id: q0, query: dup, supports: [{doc_id: d}]}"
    big.write_text("\n".join(lines) + "\n", encoding="utf-8")
    (offender,) = input_error(big).offenders
    assert (offender.position, offender.query_id) == ("line 3003", "q0")
    assert offender.reason == f"duplicate id (first at {big}:line 3)"


# Hostile values (issue 22): each mutation of a valid entry is refused, naming the field it hit.
HOSTILE = st.sampled_from(
    [
        ("duplicate", "id"),
        ("surrogate", "query"),
        ("surrogate", "supports[0].snippet"),
        ("huge", "supports.0.grade"),
        ("huge", "supports.0.line_start"),
        ("space_id", "id"),
    ]
)


@settings(max_examples=40, **SETTINGS)
@given(
    hostile=HOSTILE,
    suffix=st.sampled_from([".json", ".jsonl"]),
    big=st.integers(2**63, 2**200) | st.integers(-(2**200), -(2**63) - 1),
    space=st.sampled_from([" ", "\t", "\n", "\r", "\x0b", "\x1c", "\x85", "\u2028", "\u2029", "\xa0"]),
)
def test_hostile_values_are_refused_naming_the_field(
    workdir: Path, hostile: tuple[str, str], suffix: str, big: int, space: str
):
    kind, field = hostile
    entry: dict[str, Any] = {"id": "q1", "query": "x", "supports": [{"doc_id": "d", "snippet": "s"}]}
    if kind == "huge":
        entry["supports"][0][field.rsplit(".", 1)[1]] = big
    elif kind == "space_id":
        entry["id"] = f"q{space}1"
    body = json.dumps(entry)
    if kind == "duplicate":
        body = body.replace('"id": "q1"', '"id": "q1", "id": "q2"')
    elif kind == "surrogate":
        target = '"query": "x"' if field == "query" else '"snippet": "s"'
        body = body.replace(target, target[:-1] + '\\ud800"')
    text = body + "\n" if suffix == ".jsonl" else '{"queries": [' + body + "]}"
    result = check_contract(put(workdir, text, suffix))
    assert isinstance(result, InputError), kind
    if kind == "duplicate" and suffix == ".json":
        field = "queries[0].id"  # a duplicate names its key path from the document's top
    assert [o.field for o in result.offenders] == [field], result
