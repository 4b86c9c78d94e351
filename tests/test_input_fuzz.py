"""Inputs beyond golden sets never crash (SPEC §11, issue 8 item 8): property tests with hypothesis.

Two readers are fuzzed here, with the building blocks of ``tests/golden/test_properties.py``:

* the run-config loader — ``load_settings(path)`` on generated YAML: every key present, missing or
  of a wrong type, unknown keys, deep nesting, huge values, tags, truncated and mangled text,
  bytes that are not UTF-8, empty files;
* the replay readers — ``ReplaySystem`` on generated kebab ``per_query.jsonl``, WFGY ``trace.jsonl``
  and JSON exports: wrong types, missing fields, huge integers, NaN/Infinity, deep nesting,
  truncated lines, U+2028 inside strings, bytes that are not UTF-8; a trace that reads is then
  replayed, which must give one outcome per query (a bad hit list fails that query only).

The contract: success, or an :class:`InputError` whose message names the file and whose every
offender says file and reason. Nothing else may escape. The CLI checks at the end run a few of
these through ``kebab-eval run`` in a subprocess: exit 2, no traceback.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kebab_eval_pipeline.chain.settings import RunSettings, load_settings
from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.systems.kinds.replay import ReplaySystemSettings
from kebab_eval_pipeline.systems.outcome import QueryRequest
from kebab_eval_pipeline.systems.replay import FORMATS, ReplaySystem
from tests.golden.test_properties import (
    DUMPER,
    HUGE_TEXT,
    IDS,
    JUNK,
    MISSING,
    RANDOM_BYTES,
    SETTINGS,
    SHORT_TEXT,
    SYNTAX,
    TEXTS,
    deep_junk,
    mangle,
    maybe,
    note,
    put,
    record,
)
from tests.test_cli import cli, env, no_traceback  # noqa: F401  (env is a fixture)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """One folder for the whole module: function-scoped fixtures are not reset between examples."""
    return tmp_path_factory.mktemp("input-fuzz")


def check_error(exc: InputError, path: Path) -> None:
    """The error half of the contract: the message names the file; each offender says file, reason."""
    assert str(path) in str(exc), str(exc)
    assert exc.offenders, "an InputError must list its offenders"
    for o in exc.offenders:
        assert o.file == str(path), o
        assert isinstance(o.reason, str) and o.reason.strip(), o
        assert o.position is None or (isinstance(o.position, str) and o.position.strip()), o
    note(f"InputError: {exc.summary.replace(path.name, '<file>')}")


# ---------------------------------------------------------------------------------------------
# values
# ---------------------------------------------------------------------------------------------

HUGE_INTS = st.sampled_from([10**400, -(10**400), 2**64, -(2**63) - 1, 10**4000])
NUMBERS = (
    st.integers(-(10**6), 10**6)
    | st.floats(allow_nan=True, allow_infinity=True)
    | HUGE_INTS
    | st.sampled_from([0, -1, 1e308, -0.0])
)
# Paths that are hard to resolve: a NUL byte, an unknown user's home, very long, URLs
PATHS = (
    st.sampled_from(
        [
            "golden.yaml",
            "sub/../x.yaml",
            "/abs/x.jsonl",
            "~/x",
            "~no_such_user_kebab/x",
            "a\x00b",
            "file:///tmp/x",
            "s3://bucket/key",
            "",
            ".",
            "x" * 5000,
            "é/鍋.yaml",
        ]
    )
    | SHORT_TEXT
)
ARGV = st.lists(st.sampled_from(["kebab", "search", "{query}", "{k}", "{mode}", "./bin/s", "~x/s", "a\x00"]))
URLS = st.sampled_from(
    ["http://127.0.0.1:8000/search", "https://x/ask", "ftp://x", "http://", "", "http://a b", "http://{mode}"]
)
TEMPLATE = st.dictionaries(SHORT_TEXT, JUNK | st.sampled_from(["{query}", "{k}", "{mode}"]), max_size=3)


def kinds(name: str, **fields: st.SearchStrategy) -> st.SearchStrategy:
    """A system of kind ``name`` (sometimes with ``k`` / ``answers`` nested under it, SPEC §12)."""
    return record(
        kind=st.just(name) | st.just(MISSING) if name == "reference" else st.just(name),
        k=st.just(MISSING) | st.lists(NUMBERS, max_size=3) | JUNK,
        answers=st.just(MISSING) | st.booleans() | JUNK,
        **fields,
    )


SYSTEMS = st.one_of(
    kinds(
        "reference",
        corpus=maybe(PATHS),
        index=maybe(PATHS),
        chunk_size=maybe(NUMBERS),
        chunk_overlap=maybe(NUMBERS),
        exclude=maybe(TEXTS),
        mode=maybe(st.sampled_from(["lexical", "vector", "hybrid", "LEXICAL"])),
        refusal_threshold=maybe(NUMBERS),
    ),
    kinds(
        "command",
        search_argv=maybe(ARGV),
        ask_argv=maybe(ARGV),
        version_argv=maybe(ARGV),
        mode=maybe(SHORT_TEXT),
        timeout_s=maybe(NUMBERS),
        concurrency=maybe(NUMBERS),
        cwd=maybe(PATHS),
        response=maybe(JUNK | st.dictionaries(st.sampled_from(["hits", "answer", "scope"]), SHORT_TEXT)),
    ),
    kinds(
        "http",
        search_url=maybe(URLS),
        ask_url=maybe(URLS),
        version_url=maybe(URLS),
        mode=maybe(SHORT_TEXT),
        search_request=maybe(TEMPLATE),
        ask_request=maybe(TEMPLATE),
        timeout_s=maybe(NUMBERS),
        retries=maybe(NUMBERS),
        backoff_s=maybe(NUMBERS),
        max_backoff_s=maybe(NUMBERS),
        concurrency=maybe(NUMBERS),
        headers=maybe(st.dictionaries(SHORT_TEXT, SHORT_TEXT, max_size=2)),
        headers_from_env=maybe(
            st.dictionaries(
                SHORT_TEXT, st.sampled_from(["API_KEY", "Bearer ${TOKEN}", "1x", "$"]), max_size=2
            )
        ),
    ),
    kinds(
        "replay",
        path=maybe(PATHS),
        format=maybe(st.sampled_from(["auto", "kebab", "wfgy", "export", "csv"])),
    ),
    kinds(
        "python",
        callable=maybe(st.sampled_from(["no_such_module_q:build", "a.b", "", "x:y:z", "m:1x"]) | JUNK),
        args=maybe(st.dictionaries(SHORT_TEXT, JUNK, max_size=2) | JUNK),
        path=maybe(TEXTS),
        mode=maybe(SHORT_TEXT),
        timeout_s=maybe(NUMBERS),
        concurrency=maybe(NUMBERS),
    ),
    record(kind=JUNK | st.sampled_from(["nope", "REFERENCE", ""])),
)
GATE_NAMES = st.sampled_from(
    ["mrr", "hit@5", "mrr[lang=ko]", "regression", "regression[tag=critical]", "loss[", "", "[", "a]"]
)
GATE = record(
    min=maybe(NUMBERS),
    max=maybe(NUMBERS),
    max_drop=maybe(NUMBERS),
    max_p=maybe(NUMBERS),
    blocking=maybe(st.booleans()),
    skip_if_null=maybe(st.booleans()),
)
GATES = st.dictionaries(GATE_NAMES | SHORT_TEXT, GATE | JUNK, max_size=3)
CONFIG = record(
    golden=maybe(PATHS),
    system=maybe(SYSTEMS),
    k=maybe(st.lists(NUMBERS, max_size=4)),
    mrr_cutoff=maybe(NUMBERS),
    answers=maybe(st.booleans()),
    match=maybe(st.sampled_from(["auto", "chunk", "doc", "anchor", "span", "none"])),
    stale_golden=maybe(st.sampled_from(["fail", "warn", "off"])),
    baseline=maybe(st.sampled_from(["auto", "previous", "pinned", "none", "run-1", "a..b", "", "x" * 200])),
    source_root=maybe(PATHS),
    storage=maybe(PATHS),
    gates=maybe(GATES | st.builds(lambda g, r: {**g, "regression": r}, GATES, GATES | JUNK)),
    regression_gates=maybe(GATES),
    verdict_gates=maybe(GATES),
    default_gates=maybe(st.booleans()),
    compare=maybe(
        record(
            seed=maybe(NUMBERS),
            resamples=maybe(NUMBERS),
            min_queries=maybe(NUMBERS),
            strict_chunker_version=maybe(st.booleans()),
        )
    ),
    judge=maybe(st.none()),
)


# Well-typed configs with adversarial values: these pass validation and reach path resolution.
TYPED_CONFIG = st.fixed_dictionaries(
    {},
    optional={
        "golden": PATHS,
        "source_root": PATHS,
        "storage": PATHS,
        "system": st.one_of(
            st.fixed_dictionaries({"kind": st.just("reference")}, optional={"corpus": PATHS, "index": PATHS}),
            st.fixed_dictionaries(
                {"kind": st.just("command"), "search_argv": ARGV.filter(bool)}, optional={"cwd": PATHS}
            ),
            st.fixed_dictionaries({"kind": st.just("replay"), "path": PATHS}),
        ),
        "k": st.lists(st.integers(1, 1000), min_size=1, max_size=4),
        "baseline": st.sampled_from(["auto", "none", "run-1"]),
        "gates": st.dictionaries(GATE_NAMES, st.fixed_dictionaries({"min": st.floats(0, 1)}), max_size=2),
    },
)

# ---------------------------------------------------------------------------------------------
# the run-config loader
# ---------------------------------------------------------------------------------------------


def check_config(path: Path) -> RunSettings | InputError:
    """The property: settings that serialise (what a run snapshots), or an InputError naming ``path``."""
    try:
        loaded = load_settings(path)
    except InputError as exc:
        check_error(exc, path)
        return exc
    assert isinstance(loaded, RunSettings)
    json.loads(loaded.model_dump_json())  # the config snapshot a run stores
    note("loaded")
    return loaded


def render_yaml(draw, doc: Any) -> str:
    if draw(st.booleans()):
        return json.dumps(doc, ensure_ascii=draw(st.booleans()))  # JSON is YAML too (mostly)
    return yaml.dump(
        doc, Dumper=DUMPER, allow_unicode=True, sort_keys=False, default_flow_style=draw(st.booleans())
    )


@settings(max_examples=200, **SETTINGS)
@given(data=st.data(), doc=CONFIG | TYPED_CONFIG | JUNK)
@example(data=None, doc={"golden": "~no_such_user_kebab/golden.yaml"})
@example(data=None, doc={"storage": "runs\x00/x"})
@example(data=None, doc={"gates": {"regression": [1, 2]}})
@example(data=None, doc={"gates": {"regression": {"mrr": {"max_drop": 0.1}}}, "regression_gates": [1]})
@example(data=None, doc={"system": {"kind": ["reference"]}})
@example(data=None, doc={"gates": {"mrr": {"min": math.nan}}})
def test_run_config_documents(workdir: Path, data, doc: Any):
    text = render_yaml(data.draw, doc) if data is not None else yaml.dump(doc, Dumper=DUMPER)
    raw = mangle(data.draw, text) if data is not None and data.draw(st.booleans()) else text.encode()
    check_config(put(workdir, raw, ".yaml"))


@settings(max_examples=150, **SETTINGS)
@given(
    raw=RANDOM_BYTES
    | st.lists(st.sampled_from([*SYNTAX, "system:", "kind: ", "gates:", "\n  "])).map(
        lambda tokens: "".join(tokens).encode("utf-8", "surrogatepass")
    )
)
@example(raw=b"")
@example(raw=b"# only a comment\n")
@example(raw=b"---\n---\n")
@example(raw=b"\xff\xfe")
@example(raw=b"golden: !!python/object/apply:os.system ['true']\n")
@example(raw=b"golden: !!binary aGVsbG8=\n")
@example(raw=b"k: !!set {1: null}\n")
def test_run_config_bytes(workdir: Path, raw: bytes):
    check_config(put(workdir, raw, ".yaml"))


@settings(max_examples=40, **SETTINGS)
@given(
    junk=deep_junk() | HUGE_TEXT | HUGE_INTS,
    where=st.sampled_from(["top", "golden", "system", "k", "gates", "gate", "search_request", "key"]),
)
def test_run_config_deep_or_huge_values(workdir: Path, junk: Any, where: str):
    doc: Any = {"system": {"kind": "http", "search_url": "http://127.0.0.1:1/s"}, "gates": {"mrr": {}}}
    if where == "top":
        doc = junk
    elif where == "gate":
        doc["gates"]["mrr"] = {"min": junk}
    elif where == "search_request":
        doc["system"]["search_request"] = {"query": junk}
    elif where == "key":
        doc = {str(junk)[:100_000]: 1}
    else:
        doc[where] = junk
    check_config(put(workdir, yaml.dump(doc, Dumper=DUMPER, allow_unicode=True, width=10**9), ".yaml"))


@pytest.mark.parametrize("depth", [1_500, 30_000])
@pytest.mark.parametrize("opener", ["[", "{a: ", "- "])
def test_run_config_nested_past_the_recursion_limit(workdir: Path, depth: int, opener: str):
    result = check_config(put(workdir, "system: " + opener * depth, ".yaml"))
    assert isinstance(result, InputError)


# ---------------------------------------------------------------------------------------------
# the replay readers
# ---------------------------------------------------------------------------------------------

CITATION = record(
    chunk_id=maybe(SHORT_TEXT), path=maybe(SHORT_TEXT), start=maybe(NUMBERS), marker=maybe(NUMBERS)
)
HIT = (
    record(
        chunk_id=maybe(SHORT_TEXT | IDS),
        doc_id=maybe(SHORT_TEXT),
        doc_path=maybe(SHORT_TEXT),
        rank=maybe(NUMBERS),
        score=maybe(NUMBERS),
        heading_path=maybe(TEXTS | SHORT_TEXT),
        snippet=maybe(SHORT_TEXT),
        line_start=maybe(NUMBERS),
        line_end=maybe(NUMBERS),
        retrieval=maybe(
            record(fusion_score=maybe(NUMBERS), lexical_rank=maybe(NUMBERS), method=maybe(SHORT_TEXT))
        ),
        citation=maybe(record(path=maybe(SHORT_TEXT), start=maybe(NUMBERS), end=maybe(NUMBERS))),
    )
    | SHORT_TEXT
)
ANSWER = (
    record(
        text=maybe(SHORT_TEXT),
        claim=maybe(SHORT_TEXT),
        citations=maybe(st.lists(CITATION | SHORT_TEXT | JUNK, max_size=3)),
        refused=maybe(st.booleans()),
        grounded=maybe(st.booleans()),
        refusal_reason=maybe(SHORT_TEXT),
        model=maybe(SHORT_TEXT),
        prompt_tokens=maybe(NUMBERS),
        usage=maybe(record(prompt_tokens=maybe(NUMBERS), completion_tokens=maybe(NUMBERS))),
    )
    | SHORT_TEXT
)
QIDS = st.sampled_from(["A0001", "A0002", "A0003"]) | IDS
KEBAB_LINE = record(
    query_id=maybe(QIDS),
    hits=maybe(st.lists(HIT | JUNK, max_size=4)),
    hits_top_k=maybe(st.lists(HIT, max_size=2)),
    answer=maybe(ANSWER),
    latency_ms=maybe(NUMBERS | record(retrieval=maybe(NUMBERS), answer=maybe(NUMBERS))),
    retrieval_ms=maybe(NUMBERS),
    answer_ms=maybe(NUMBERS),
    error=maybe(SHORT_TEXT | record(**{"class": maybe(SHORT_TEXT), "message": maybe(SHORT_TEXT | JUNK)})),
    timed_out=maybe(st.booleans()),
    scope=maybe(SHORT_TEXT | TEXTS),
)
WFGY_LINE = record(
    qid=maybe(QIDS),
    q=maybe(SHORT_TEXT),
    retrieved_ids=maybe(TEXTS | JUNK),
    answer_json=maybe(record(claim=maybe(SHORT_TEXT), citations=maybe(TEXTS | JUNK))),
    scope=maybe(SHORT_TEXT | TEXTS),
)
EXPORT = record(
    run_id=maybe(SHORT_TEXT),
    versions=maybe(st.dictionaries(SHORT_TEXT, SHORT_TEXT | JUNK, max_size=2)),
    system=maybe(record(mode=maybe(SHORT_TEXT), coverage=maybe(JUNK))),
    per_query=maybe(st.lists(KEBAB_LINE | JUNK, max_size=4)),
)
TRACE_FORMATS = st.sampled_from(["auto", "auto", "kebab", "wfgy", "export"])
LINE_BREAKS = st.sampled_from(["\n", "\r\n"])
RAW_LINES = st.sampled_from(
    [
        "",
        "   ",
        "{",
        '{"query_id": "A0001", "hits": [',
        '{"qid": "A0002", "retrieved_ids": [' + "7" * 5000 + "]}",
        '{"query_id": "A0001", "latency_ms": ' + "9" * 400 + "}",
        '{"query_id": "A0001", "latency_ms": NaN, "retrieval_ms": Infinity, "answer_ms": -Infinity}',
        '{"query_id": "A0001", "hits": [{"chunk_id": "c", "rank": ' + "1" * 400 + "}]}",
        '{"query_id": "A\u2028B", "hits": ["c\u2029d"]}',
        '{"qid": "A0003", "answer_json": {"claim": "x\u0085y"}}',
        "[" * 3000,
        "[" * 100_000,
        '{"query_id": "A0001", "error": ' + "[" * 2000 + "]" * 2000 + "}",
        "null",
        "7",
        '"text"',
    ]
)


def trace_text(draw, shape: str) -> str:
    if shape == "export":
        doc = draw(EXPORT | JUNK)
        return json.dumps(doc, ensure_ascii=draw(st.booleans()), indent=draw(st.sampled_from([None, 1])))
    line = KEBAB_LINE if shape == "kebab" else WFGY_LINE
    rows = draw(st.lists(st.one_of(line, line, line, JUNK), max_size=5))
    lines = [json.dumps(r, ensure_ascii=draw(st.booleans())) for r in rows]
    for _ in range(draw(st.integers(0, 2))):
        lines.insert(draw(st.integers(0, len(lines))), draw(RAW_LINES))
    return draw(LINE_BREAKS).join(lines) + draw(st.sampled_from(["", "\n"]))


def check_replay(path: Path, fmt: str) -> ReplaySystem | InputError:
    """The property: a trace that reads replays every query; one that does not is an InputError."""
    try:
        system = ReplaySystem(ReplaySystemSettings(kind="replay", path=str(path), format=fmt))
    except InputError as exc:
        check_error(exc, path)
        return exc
    assert system.format in FORMATS  # a mangled trace may read as another format: it must still replay
    requests = [QueryRequest(query_id=qid, query="q") for qid in [*system.records, "never-recorded"]]
    for k, answers in ((1, True), (10, False)):
        outcomes = system.run_queries(requests, k=k, answers=answers)
        assert [o.query_id for o in outcomes] == [r.query_id for r in requests]
        assert all(len(o.hits) <= k for o in outcomes)
        for o in outcomes:
            for value in (o.retrieval_ms, o.answer_ms):
                assert value is None or (isinstance(value, float) and math.isfinite(value)), value
    assert outcomes[-1].error_class == "missing_in_trace"
    system.info()
    note(f"replayed ({system.format})")
    return system


@settings(max_examples=200, **SETTINGS)
@given(data=st.data(), shape=st.sampled_from(["kebab", "wfgy", "export"]), fmt=TRACE_FORMATS)
def test_replay_traces(workdir: Path, data, shape: str, fmt: str):
    note(f"shape {shape}, format {fmt}")
    text = trace_text(data.draw, shape)
    raw = mangle(data.draw, text) if data.draw(st.integers(0, 2)) == 0 else text.encode()
    check_replay(put(workdir, raw, ".json" if shape == "export" else ".jsonl"), fmt)


@settings(max_examples=100, **SETTINGS)
@given(raw=RANDOM_BYTES, fmt=TRACE_FORMATS)
@example(raw=b"", fmt="auto")
@example(raw=b"\n\n", fmt="kebab")
@example(raw=b'{"query_id": "A\xff"}\n', fmt="auto")
@example(raw=b'{"query_id": "A0001", "latency_ms": 1e400}\n', fmt="kebab")
@example(raw=b'{"per_query": [], "versions": [1], "system": "x"}', fmt="auto")
@example(
    raw=b'{"per_query": [{"query_id": "A0001"}], "system": {"coverage": 1}, "versions": null}', fmt="export"
)
@example(raw=b'{"query_id": "A0001", "latency_ms": ' + b"9" * 400 + b"}\n", fmt="kebab")
@example(raw='{"query_id": "A\u2028B", "hits": []}\n'.encode(), fmt="auto")
@example(raw=b'{"per_query": [], "system": {"coverage": {"chunks": ' + b"9" * 400 + b"}}}", fmt="export")
@example(raw=b'{"query_id": "A0001", "error": {"message": ' + b"[" * 900 + b"]" * 900 + b"}}\n", fmt="kebab")
def test_replay_bytes(workdir: Path, raw: bytes, fmt: str):
    check_replay(put(workdir, raw, ".jsonl"), fmt)


@settings(max_examples=40, **SETTINGS)
@given(
    junk=deep_junk() | HUGE_TEXT | HUGE_INTS,
    where=st.sampled_from(["hits", "answer", "error", "latency_ms", "scope", "query_id", "hit", "rank"]),
    fmt=st.sampled_from(["auto", "kebab", "export"]),
)
def test_replay_deep_or_huge_values(workdir: Path, junk: Any, where: str, fmt: str):
    entry: dict[str, Any] = {"query_id": "A0001", "hits": [{"chunk_id": "c1", "rank": 1}]}
    if where == "hit":
        entry["hits"] = [junk]
    elif where == "rank":
        entry["hits"][0]["rank"] = junk
    else:
        entry[where] = junk
    text = json.dumps({"per_query": [entry]}) if fmt == "export" else json.dumps(entry) + "\n"
    check_replay(put(workdir, text, ".jsonl"), fmt)


# ---------------------------------------------------------------------------------------------
# the CLI: exit 2, no traceback
# ---------------------------------------------------------------------------------------------

BAD_CONFIGS = {
    "not-utf8": b"golden: \xff\xfe\n",
    "truncated": b"system:\n  kind: http\n  search_url: 'http://127.0.0.1:1/",
    "wrong-types": b"k: {a: 1}\nsystem: [1, 2]\ngates: {regression: [1]}\nstorage: ~no_such_user_kebab/x\n",
}


@pytest.mark.parametrize("name", sorted(BAD_CONFIGS))
def test_cli_bad_config_exits_2(env, tmp_path: Path, name: str):  # noqa: F811
    cfg = tmp_path / "eval.yaml"
    cfg.write_bytes(BAD_CONFIGS[name])
    proc = cli(env, "run", "--config", str(cfg), "--run-id", "fuzz-1")
    assert proc.returncode == 2, proc.stderr
    no_traceback(proc)
    assert str(cfg) in "".join(proc.stderr.split())  # the console wraps long lines


def test_cli_bad_replay_trace_exits_2(env, tmp_path: Path):  # noqa: F811
    trace = tmp_path / "trace.jsonl"
    trace.write_bytes(
        b'{"query_id": "A0001", "latency_ms": 1e999, "hits": []}\n'
        b'{"query_id": "A0002", "hits": [\n'
        b'{"query_id": "A\xff03"}\n'
    )
    cfg = tmp_path / "eval.yaml"
    cfg.write_text(yaml.safe_dump({"system": {"kind": "replay", "path": str(trace)}, "baseline": "none"}))
    proc = cli(env, "run", "--config", str(cfg), "--run-id", "fuzz-2")
    assert proc.returncode == 2, proc.stderr
    no_traceback(proc)
    assert "trace.jsonl" in proc.stderr and "UTF-8" in proc.stderr


# ---------------------------------------------------------------------------------------------
# what the fuzzing found: each used to escape as another exception (or to mis-read the file)
# ---------------------------------------------------------------------------------------------

CONFIG_REGRESSIONS = {
    # RuntimeError: Could not determine home directory.
    "unknown-user-home": ("baseline: none\ngolden: ~no_such_user_kebab/g.yaml\n", "golden", 2),
    # ValueError: embedded null byte
    "nul-in-path": ('baseline: none\nstorage: "runs\\0/x"\n', "storage", 2),
    # TypeError: cannot convert dictionary update sequence element #0 to a sequence
    "regression-gates-list": ("gates:\n  regression: [1, 2]\n", "gates.regression", 2),
    # TypeError: 'list' object is not a mapping
    "regression-gates-beside-list": (
        "regression_gates: [1]\ngates:\n  regression: {mrr: {max_drop: 0.1}}\n",
        "regression_gates",
        1,
    ),
}


@pytest.mark.parametrize("name", sorted(CONFIG_REGRESSIONS))
def test_config_regressions(tmp_path: Path, name: str):
    text, field, line = CONFIG_REGRESSIONS[name]
    path = tmp_path / "eval.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as info:
        load_settings(path)
    (offender,) = info.value.offenders
    assert (offender.file, offender.field, offender.position) == (str(path), field, f"line {line}")
    assert offender.reason in (
        "not a usable path: Could not determine home directory.",
        "not a usable path: embedded null byte",
        "expected a mapping, got list",
    )


TRACE_REGRESSIONS = {
    # OverflowError: int too large to convert to float
    "latency-400-digits": (
        b'{"query_id": "A0001", "latency_ms": ' + b"9" * 400 + b"}\n",
        "kebab",
        "latency_ms: expected a finite number, got an integer of 400 digits",
    ),
    # read as NaN / inf milliseconds and averaged into the latency metrics
    "latency-nan": (
        b'{"query_id": "A0001", "latency_ms": {"retrieval": NaN}}\n',
        "kebab",
        "latency_ms.retrieval: expected a finite number, got nan",
    ),
    "latency-infinity": (
        b'{"query_id": "A0001", "answer_ms": Infinity}\n',
        "kebab",
        "answer_ms: expected a finite number, got inf",
    ),
    # TypeError: 'list' object is not a mapping
    "export-versions-list": (b'{"per_query": [], "versions": [1]}', "export", "expected an object, got list"),
    # AttributeError: 'str' object has no attribute 'get'
    "export-system-text": (b'{"per_query": [], "system": "x"}', "export", "expected an object, got str"),
}


@pytest.mark.parametrize("name", sorted(TRACE_REGRESSIONS))
def test_replay_regressions(tmp_path: Path, name: str):
    raw, fmt, reason = TRACE_REGRESSIONS[name]
    path = tmp_path / "trace.jsonl"
    path.write_bytes(raw)
    with pytest.raises(InputError) as info:
        ReplaySystem(ReplaySystemSettings(kind="replay", path=str(path)))
    assert info.value.summary == f"replay trace trace.jsonl ({fmt}) cannot be read"
    (offender,) = info.value.offenders
    assert (offender.file, offender.reason) == (str(path), reason)


def test_replay_line_separators_inside_strings_stay_in_their_record(tmp_path: Path):
    """U+2028 / U+0085 are valid unescaped in JSON strings; str.splitlines() used to cut the record
    there ("not JSON: Unterminated string") and shift every later line number."""
    path = tmp_path / "trace.jsonl"
    # (in a hit's id: a query id with one is refused, it would break the TREC export)
    rows = [{"query_id": "A0001", "hits": ["c\u0085d\u2028e"]}, {"query_id": "A0002", "hits": "x"}]
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", encoding="utf-8")
    with pytest.raises(InputError) as info:
        ReplaySystem(ReplaySystemSettings(kind="replay", path=str(path)))
    assert [(o.position, o.reason) for o in info.value.offenders] == [("line 2", "hits: expected a list")]
    path.write_text(json.dumps(rows[0], ensure_ascii=False) + "\n", encoding="utf-8")
    system = ReplaySystem(ReplaySystemSettings(kind="replay", path=str(path)))
    (outcome,) = system.run_queries([QueryRequest(query_id="A0001", query="q")], k=5, answers=False)
    assert [h.chunk_id for h in outcome.hits] == ["c\u0085d\u2028e"]


def test_replay_coverage_past_the_float_range_is_dropped(tmp_path: Path):
    """``OverflowError`` in the version report used to escape from ``info()``."""
    path = tmp_path / "export.json"
    big = "9" * 400
    path.write_text(
        f'{{"per_query": [], "system": {{"coverage": {{"chunks": {big}, "docs_processed": 3}}}}}}',
        encoding="utf-8",
    )
    info = ReplaySystem(ReplaySystemSettings(kind="replay", path=str(path))).info()
    assert info.coverage == {"docs_processed": 3.0}


def test_replay_utf8_error_names_the_line(tmp_path: Path):
    path = tmp_path / "trace.jsonl"
    path.write_bytes(b'{"query_id": "A0001"}\n{"query_id": "A\xff2"}\n')
    with pytest.raises(InputError) as info:
        ReplaySystem(ReplaySystemSettings(kind="replay", path=str(path)))
    (offender,) = info.value.offenders
    assert (offender.position, offender.reason) == ("line 2", "not valid UTF-8 (byte 37)")
