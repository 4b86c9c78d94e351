"""OpenInference traces (OTLP JSON) replayed: the ``openinference`` format of the replay adapter.

The fixtures in ``data/otlp/`` were written by the real instrumentors — LlamaIndex (BM25 retriever,
MockLLM) and Haystack 2 (BM25 retriever, prompt builder, an offline generator reporting token
usage) traced by ``openinference-instrumentation-*``, exported by the OTel SDK and encoded by
``opentelemetry-exporter-otlp-proto-common`` (``tests/frameworks/otel_traces.py``) — in protobuf's
JSON (base64 ids), as OTLP/JSON lines (hex ids, integer enums) and as the README's exporter writes
them under ``SimpleSpanProcessor`` (a pretty-printed ``MessageToJson`` request per span, one after
another). ``expected.json`` holds what each pipeline returned directly. Odd cases (a hybrid trace,
duplicates, bad input) are edits of those real traces, not hand-written spans. No framework is
needed to run this module.
"""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from kebab_eval_pipeline.chain import pipeline
from kebab_eval_pipeline.chain.settings import settings_from_dict
from kebab_eval_pipeline.cli import main as cli_main
from kebab_eval_pipeline.foundation.errors import InputError
from kebab_eval_pipeline.systems.openinference import normalise_question
from kebab_eval_pipeline.systems.replay import detect_format, read_trace
from tests.systems.adapters.test_replay_adapter import Scored, replay, write_jsonl

OTLP = Path(__file__).parent / "data" / "otlp"
EXPECTED = json.loads((OTLP / "expected.json").read_text(encoding="utf-8"))
ENCODINGS = ("b64.json", "hex.jsonl", "sdk.json")
FILES = {(fw, enc): OTLP / f"{fw}_{enc}" for fw in ("llamaindex", "haystack") for enc in ENCODINGS}


def documents_of(path: Path) -> list[dict[str, Any]]:
    """Every export request of an OTLP JSON file, as written (one after another: the stdlib's
    raw_decode, independent of the reader)."""
    text = path.read_text(encoding="utf-8")
    decoder, pos, docs = json.JSONDecoder(), 0, []
    while pos < len(text.rstrip()):
        doc, end = decoder.raw_decode(text, pos)
        docs.append(doc)
        pos = end + len(text[end:]) - len(text[end:].lstrip())
    return docs


def spans_of(path: Path) -> list[dict[str, Any]]:
    """Every span object in an OTLP JSON file, as written."""
    docs = documents_of(path)
    return [s for d in docs for r in d["resourceSpans"] for sc in r["scopeSpans"] for s in sc["spans"]]


def attr(span: dict, key: str) -> Any:
    for a in span["attributes"]:
        if a["key"] == key:
            return next(iter(a["value"].values()))
    return None


def write_request(path: Path, spans: list[dict]) -> Path:
    """``spans`` as one OTLP JSON export request."""
    request = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "t"}, "spans": spans}]}]}
    path.write_text(json.dumps(request), encoding="utf-8")
    return path


def gold(path: Path, rows: list[tuple[str, str, list[str]]]) -> Path:
    """A WFGY-style gold file: (query id, question, relevant chunk ids)."""
    return write_jsonl(
        path,
        [{"qid": q, "question": text, "answerable": True, "gold_citations": ids} for q, text, ids in rows],
    )


# -- the real traces read as the pipelines returned them --------------------------------------------


@pytest.mark.parametrize("framework", ["llamaindex", "haystack"])
@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("match_by", ["question", "metadata.query_id"])
def test_fixture_hits_and_answers_are_what_the_pipeline_returned(framework, encoding, match_by):
    path = FILES[framework, encoding]
    assert detect_format(path, path.read_text(encoding="utf-8")) == "openinference"
    records, fmt, _, warnings, _ = read_trace(path, "auto", match_by)
    assert fmt == "openinference" and warnings == []
    expected = EXPECTED[framework]
    assert len(records) == len(expected)
    for qid, direct in expected.items():
        key = qid if match_by == "metadata.query_id" else normalise_question(direct["question"])
        record = records[key]
        if direct["error"] is not None:  # the failed Haystack query: an ERROR span, its message kept
            assert record.error == (
                "span ExtractiveGenerator.run: RuntimeError: the generator refuses questions that explode"
            )
            assert record.raw_answer is None and len(record.raw_hits) == EXPECTED["k"]
            continue
        assert record.error is None
        assert [[h["chunk_id"], h["score"]] for h in record.raw_hits] == direct["hits"]
        assert record.raw_answer["text"] == direct["answer"]
        assert all(h["doc_path"] == h["metadata"]["file_path"] for h in record.raw_hits)
        assert record.retrieval_ms is not None and 0 < record.retrieval_ms < record.answer_ms


def test_token_usage_is_the_generators_word_counts():
    """The offline generator reports prompt words / reply words; the instrumentor wrote them as
    llm.token_count.*; the reader puts them under usage. The reply "Doner kebab is cooked on a
    vertical rotisserie." is 8 words."""
    records, *_ = read_trace(FILES["haystack", "hex.jsonl"], "auto", "metadata.query_id")
    usage = records["q-doner"].raw_answer["usage"]
    assert usage["completion_tokens"] == 8
    assert usage["total_tokens"] == usage["prompt_tokens"] + 8
    # the prompt the generator got: the PromptBuilder span's output in the same trace
    prompt = next(
        attr(s, "output.value")
        for s in spans_of(FILES["haystack", "hex.jsonl"])
        if s["name"] == "PromptBuilder.run" and "doner" in attr(s, "output.value")
    )
    assert usage["prompt_tokens"] == len(prompt.split()) == 67
    assert records["q-doner"].raw_answer["model"] == "extractive-first-line"
    # LlamaIndex's MockLLM reports no usage
    li, *_ = read_trace(FILES["llamaindex", "b64.json"], "auto", "metadata.query_id")
    assert "usage" not in li["q-doner"].raw_answer


def test_latencies_are_the_span_durations():
    spans = spans_of(FILES["haystack", "hex.jsonl"])
    retriever = next(
        s for s in spans if s["name"] == "InMemoryBM25Retriever.run" and "doner" in attr(s, "input.value")
    )
    root = next(s for s in spans if s["traceId"] == retriever["traceId"] and "parentSpanId" not in s)
    records, *_ = read_trace(FILES["haystack", "hex.jsonl"], "auto", "metadata.query_id")
    ms = lambda s: (int(s["endTimeUnixNano"]) - int(s["startTimeUnixNano"])) / 1e6  # noqa: E731
    assert records["q-doner"].retrieval_ms == ms(retriever)
    assert records["q-doner"].answer_ms == ms(root)


def _read(path: Path) -> dict:
    records, *_ = read_trace(path, "auto", "metadata.query_id")
    return {k: (r.raw_hits, r.raw_answer, r.retrieval_ms, r.answer_ms, r.error) for k, r in records.items()}


def test_hex_and_base64_files_read_the_same():
    for framework in ("llamaindex", "haystack"):
        assert _read(FILES[framework, "b64.json"]) == _read(FILES[framework, "hex.jsonl"])


def test_the_sdk_file_is_a_pretty_printed_request_per_span_and_reads_as_one_request():
    """The README's exporter under SimpleSpanProcessor: every span its own indented request, a
    trace's spans spread over as many requests (children first: a span is exported as it ends)."""
    for framework in ("llamaindex", "haystack"):
        path = FILES[framework, "sdk.json"]
        text = path.read_text(encoding="utf-8")
        docs = documents_of(path)
        assert len(docs) == len(spans_of(FILES[framework, "b64.json"])) > 10
        assert all(len(d["resourceSpans"][0]["scopeSpans"][0]["spans"]) == 1 for d in docs)
        assert text.startswith('{\n  "resourceSpans": [\n') and text.count("\n{\n") == len(docs) - 1
        assert _read(path) == _read(FILES[framework, "b64.json"])


def _pretty(doc: dict) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False)


@pytest.mark.parametrize(
    "layout",
    [
        "array",
        "array-one-line",
        "no-separator",
        "blank-lines",
        "crlf",
        "byte-order-mark",
        "mixed-encodings",
        "empty-requests",
    ],
)
def test_every_layout_of_several_requests_reads_the_same(tmp_path, layout):
    """The SDK's requests (one per span) laid out as exporters and people write them: a JSON array,
    requests with nothing between them, blank lines or CRLF between them, a byte-order mark first
    (Windows tools), hex and base64 requests mixed in one file (the collector's lines appended to
    the SDK's), empty requests ``{}``."""
    docs = documents_of(FILES["haystack", "sdk.json"])
    hexed = documents_of(FILES["haystack", "hex.jsonl"])
    text = {
        "array": lambda: _pretty(docs),
        "array-one-line": lambda: json.dumps(docs),
        "no-separator": lambda: "".join(_pretty(d) for d in docs),
        "blank-lines": lambda: "\n\n\n".join(_pretty(d) for d in docs) + "\n\n",
        "crlf": lambda: "\r\n".join(_pretty(d).replace("\n", "\r\n") for d in docs),
        "byte-order-mark": lambda: "\ufeff" + "".join(_pretty(d) + "\n" for d in docs),
        "mixed-encodings": lambda: (
            "".join(_pretty(d) + "\n" for d in docs[:5]) + "".join(json.dumps(d) + "\n" for d in hexed)
        ),
        "empty-requests": lambda: "{}\n" + "".join(_pretty(d) + "\n{}\n" for d in docs),
    }[layout]()
    path = tmp_path / "traces.json"
    path.write_text(text, encoding="utf-8")
    assert detect_format(path, text) == "openinference"
    _, _, _, warnings, _ = read_trace(path, "auto", "metadata.query_id")
    assert _read(path) == _read(FILES["haystack", "b64.json"])
    if layout == "mixed-encodings":  # the first five spans twice: read once, with a warning
        assert warnings == [
            "5 spans written more than once (same trace and span id: an exporter added twice, or a "
            "file appended to twice?): each read once, its last copy"
        ]
    else:
        assert warnings == []


def test_a_file_appended_to_twice_counts_each_span_once(tmp_path):
    """The same export written twice: tokens are not counted twice, retrievers not doubled."""
    text = FILES["haystack", "sdk.json"].read_text(encoding="utf-8")
    path = tmp_path / "twice.json"
    path.write_text(text + text, encoding="utf-8")
    _, _, _, warnings, _ = read_trace(path, "auto", "metadata.query_id")
    assert _read(path) == _read(FILES["haystack", "sdk.json"])
    n = len(spans_of(FILES["haystack", "sdk.json"]))
    assert warnings == [
        f"{n} spans written more than once (same trace and span id: an exporter added twice, or a "
        "file appended to twice?): each read once, its last copy"
    ]


def test_ids_read_as_hex_exactly_at_the_hex_length():
    """Hex and base64 never share a length (span ids: 16 hex digits; base64 of 8 bytes is 12
    characters padded, 11 not), so "0123456789abcdef" — also valid base64, of 12 bytes — is hex;
    base64 is read standard or URL-safe, padded or not, as protobuf's JSON parsers accept it."""
    from kebab_eval_pipeline.systems.otlp import _id

    assert _id("0123456789ABCDEF", 8) == "0123456789abcdef"
    raw = bytes.fromhex("fbff3e00a1b2c3d4")
    standard = base64.b64encode(raw).decode()
    assert standard == "+/8+AKGyw9Q=" and len(standard) == 12
    for text in (standard, standard.rstrip("="), standard.replace("+", "-").replace("/", "_")):
        assert _id(text, 8) == raw.hex()
    trace = bytes(range(16))
    assert _id(base64.b64encode(trace).decode(), 16) == _id(trace.hex(), 16) == trace.hex()
    for bad in ("0123456789abcdeg", "AAAAAAAAAAAAAAAZ", "0123", "", "+/8+AKGyw9Q==="):
        with pytest.raises(ValueError, match="expected 16 hex digits or base64 of 8 bytes"):
            _id(bad, 8)


# -- through the run: rows, matching, warnings ------------------------------------------------------


def test_replayed_run_scores_matches_and_fails_per_query(tmp_path):
    """Golden queries against the Haystack traces, matched by normalised question: hand-placed
    relevant chunks give reciprocal ranks 1, 1/3 and 0; the failed trace is a recorded_error; an
    untraced question is missing_in_trace; the question differing in case and spacing matches."""
    hs = EXPECTED["haystack"]
    ids = {q: [h[0] for h in r["hits"]] for q, r in hs.items()}
    golden = gold(
        tmp_path / "gold.jsonl",
        [
            ("G1", hs["q-skewers"]["question"], [ids["q-skewers"][0]]),
            ("G2", "HOW IS DONER\tKEBAB COOKED?", [ids["q-doner"][2]]),
            ("G3", "what goes into garlic yoghurt sauce?", ["not-retrieved"]),
            ("G4", hs["q-fail"]["question"], ["x"]),
            ("G5", "Is there a vegetarian kebab?", ["y"]),
        ],
    )
    run = replay(FILES["haystack", "b64.json"], golden=golden, k=[1, 3], answers=True)
    rows = run.outcomes
    assert rows.loc[["G1", "G2", "G3"], "error_class"].isna().all()
    assert rows.loc["G4", "error_class"] == "recorded_error"
    assert "refuses questions that explode" in rows.loc["G4", "error"]
    assert rows.loc["G5", "error_class"] == "missing_in_trace"
    scores = run.per_query
    assert scores.loc["G1", "mrr"] == 1.0
    assert scores.loc["G2", "mrr"] == pytest.approx(1 / 3, abs=1e-4)  # stored to 4 decimals
    assert scores.loc["G3", "mrr"] == 0.0
    assert run.hits("G2")["chunk_id"].tolist() == ids["q-doner"]
    assert run.hits("G1")["doc_path"].tolist()[0] == "grill/skewers.md"
    assert rows.loc["G1", "answer_text"] == hs["q-skewers"]["answer"]


def test_match_by_an_attribute_and_traces_matching_no_query_are_counted(tmp_path):
    golden = gold(tmp_path / "gold.jsonl", [("q-doner", "a question worded differently", ["c"])])
    system = {"match_by": "metadata.query_id"}
    run = replay(FILES["llamaindex", "hex.jsonl"], golden=golden, system=system)
    assert run.hits("q-doner")["chunk_id"].tolist() == [
        h[0] for h in EXPECTED["llamaindex"]["q-doner"]["hits"]
    ]
    warnings = " ".join(run.retrieval.results.warnings)
    assert (
        "2 traces match no golden query (ignored; match_by metadata.query_id): 'q-skewers', 'q-yoghurt'"
        in (warnings)
    )


def test_a_query_traced_twice_keeps_the_later_trace_with_a_warning(tmp_path):
    """The LlamaIndex and Haystack files trace the same questions; the Haystack ones ran later."""
    both = tmp_path / "both.jsonl"
    both.write_text(
        FILES["llamaindex", "hex.jsonl"].read_text() + FILES["haystack", "hex.jsonl"].read_text(),
        encoding="utf-8",
    )
    records, _, _, warnings, _ = read_trace(both, "auto", "metadata.query_id")
    assert [h["chunk_id"] for h in records["q-doner"].raw_hits] == [
        h[0] for h in EXPECTED["haystack"]["q-doner"]["hits"]
    ]
    twice = [w for w in warnings if "traced more than once" in w]
    assert len(twice) == 3 and any(w.startswith("q-doner: traced more than once (trace ") for w in twice)


def test_several_retriever_spans_keep_the_last_or_the_named_one(tmp_path):
    """A hybrid trace, made of the two real ones for the same question: the LlamaIndex trace's
    spans moved under the Haystack root. Two retriever spans, neither inside the other: the last
    to end (Haystack's, which ran later) is kept, with a warning; retriever_span names the other."""
    li = [
        s
        for s in spans_of(FILES["llamaindex", "hex.jsonl"])
        if attr(s, "metadata") and "q-doner" in attr(s, "metadata")
    ]
    hs = [
        s
        for s in spans_of(FILES["haystack", "hex.jsonl"])
        if attr(s, "metadata") and "q-doner" in attr(s, "metadata")
    ]
    hs_root = next(s for s in hs if "parentSpanId" not in s)
    for span in li:
        span["traceId"] = hs_root["traceId"]
        span.setdefault("parentSpanId", hs_root["spanId"])
    path = write_request(tmp_path / "hybrid.json", li + hs)
    records, _, _, warnings, _ = read_trace(path, "auto", "metadata.query_id")
    assert [h["chunk_id"] for h in records["q-doner"].raw_hits] == [
        h[0] for h in EXPECTED["haystack"]["q-doner"]["hits"]
    ]
    assert warnings == [
        "1 trace have several retriever spans, none inside another: kept the last to end in each "
        "(set system.retriever_span to a span name to choose)"
    ]
    records, _, _, warnings, _ = read_trace(path, "auto", "metadata.query_id", "BM25Retriever.retrieve")
    assert [h["chunk_id"] for h in records["q-doner"].raw_hits] == [
        h[0] for h in EXPECTED["llamaindex"]["q-doner"]["hits"]
    ]
    assert warnings == []


def test_the_response_mapping_reads_document_metadata(tmp_path):
    """hit_fields see each document as {id, content, score, metadata}: the Haystack file path cut
    to its base name, the chunk id taken from the metadata instead of the document id."""
    golden = gold(tmp_path / "gold.jsonl", [("q-doner", "How is doner kebab cooked?", ["c"])])
    response = {"hit_fields": {"doc_path": {"path": "metadata.file_path", "basename": True}}}
    run = replay(FILES["haystack", "hex.jsonl"], golden=golden, system={"response": response})
    assert run.hits("q-doner")["doc_path"].tolist() == ["heat.md", "chili.md", "skewers.md"]
    response = {"hit_fields": {"chunk_id": "metadata.file_path", "snippet": {"const": "-"}}}
    run = replay(FILES["haystack", "hex.jsonl"], golden=golden, system={"response": response})
    hits = run.hits("q-doner")
    assert hits["chunk_id"].tolist()[0] == "grill/heat.md" and set(hits["snippet"]) == {"-"}


# -- what cannot be read ------------------------------------------------------------------------------


def _broken_haystack(tmp_path: Path) -> Path:
    """The real Haystack trace with one problem per kind, each in a different span."""
    spans = copy.deepcopy(spans_of(FILES["haystack", "hex.jsonl"]))
    retrievers = [s for s in spans if attr(s, "openinference.span.kind") == "RETRIEVER"]
    roots = [s for s in spans if "parentSpanId" not in s]
    retrievers[0]["traceId"] = "not-an-id"
    retrievers[1]["startTimeUnixNano"] = "soon"
    for a in retrievers[2]["attributes"]:
        if a["key"] == "retrieval.documents.1.document.score":
            a["value"] = {"stringValue": "high"}
        if a["key"] == "retrieval.documents.0.document.metadata":
            a["value"] = {"stringValue": "file_path=grill.md"}
    llm = next(
        s
        for s in spans
        if attr(s, "llm.token_count.prompt") is not None and s["traceId"] != retrievers[2]["traceId"]
    )
    for a in llm["attributes"]:
        if a["key"] == "llm.token_count.prompt":
            a["value"] = {"intValue": "-4"}
    root = next(
        r
        for r in roots
        if r["traceId"]
        not in {llm["traceId"], retrievers[2]["traceId"], retrievers[1]["traceId"], retrievers[0]["traceId"]}
    )
    root["attributes"] = [a for a in root["attributes"] if a["key"] != "input.value"]
    for s in spans:
        if s["traceId"] == root["traceId"]:
            s["attributes"] = [a for a in s["attributes"] if a["key"] != "input.value"]
    return write_request(tmp_path / "broken.json", spans)


def test_every_unreadable_span_is_listed(tmp_path):
    path = _broken_haystack(tmp_path)
    with pytest.raises(InputError) as info:
        read_trace(path, "auto", "question")
    rendered = [o.render() for o in info.value.offenders]
    text = "\n".join(rendered)
    assert len(rendered) == 6, text
    assert "field 'traceId': expected 32 hex digits or base64 of 16 bytes, got 'not-an-id'" in text
    assert "field 'startTimeUnixNano': expected an integer (or its decimal string), got 'soon'" in text
    assert "field 'retrieval.documents.1.document.score': expected a number, got 'high'" in text
    assert (
        "field 'retrieval.documents.0.document.metadata': expected a JSON object, got 'file_path=grill.md'"
        in text
    )
    assert "field 'llm.token_count.prompt': expected a whole number ≥ 0, got -4" in text
    assert (
        "field 'input.value': no question: the query span's input.value holds no text (match_by: question)"
        in text
    )
    assert all(r.startswith(f"{path}:line 1, span ") for r in rendered), text


@pytest.mark.parametrize(
    "text, reason",
    [
        ('{"resourceSpans": [{"scopeSpans": [{"spans": [\n{"oops"}]}]}]}', "line 2, column 8: not JSON"),
        (
            '{"resourceSpans": []}\n{"resource_spans": "x"}\n[1]\n',
            "line 3 (request 1 of the array): expected an OTLP JSON export request",
        ),
        (
            '{"resourceSpans": []}\n{"resource_spans": "x"}\n',
            "line 2: expected a list of resourceSpans, got str",
        ),
        ("\n \n", "empty: no OTLP JSON export request"),
    ],
)
def test_files_that_are_not_otlp(tmp_path, text, reason):
    path = tmp_path / "t.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as info:
        read_trace(path, "openinference")
    assert reason in str(info.value)


def _line_of(text: str, needle: str) -> int:
    assert text.count(needle) == 1, needle
    return text[: text.index(needle)].count("\n") + 1


def _sdk_file_with_problems() -> tuple[str, dict[str, int]]:
    """The SDK's Haystack requests (a pretty-printed request per span), with a document score that
    is not a number (request 5, a retriever span), request 10 cut short halfway (a process killed
    while writing it), and a span id and an attribute value that cannot be read (request 14).
    Returns the text and, worked out from the pieces, the lines the offenders must name."""
    docs = copy.deepcopy(documents_of(FILES["haystack", "sdk.json"]))

    def span(i: int) -> dict:
        return docs[i]["resourceSpans"][0]["scopeSpans"][0]["spans"][0]

    assert attr(span(4), "openinference.span.kind") == "RETRIEVER"
    for a in span(4)["attributes"]:
        if a["key"] == "retrieval.documents.1.document.score":
            a["value"] = {"stringValue": "high"}
    assert span(9)["name"] == span(13)["name"] == "PromptBuilder.run"  # not a root, not a retriever
    span(13)["spanId"] = "nope"
    span(13)["attributes"].append({"key": "app.retries", "value": {"intValue": "many"}})
    pieces = [json.dumps(d, indent=2) + "\n" for d in docs]
    pieces[9] = "".join(pieces[9].splitlines(keepends=True)[:40])  # cut after 40 lines
    starts = [1]
    for piece in pieces:
        starts.append(starts[-1] + piece.count("\n"))
    text = "".join(pieces)
    lines = {f"request {i + 1}": n for i, n in enumerate(starts[:-1])}
    lines["score"] = _line_of(text, '"stringValue": "high"')
    lines["span id"] = _line_of(text, '"spanId": "nope"')
    lines["retries"] = _line_of(text, '"intValue": "many"')
    lines["retriever"] = base64.b64decode(span(4)["spanId"]).hex()  # type: ignore[assignment]
    return text, lines


def test_offenders_in_pretty_printed_requests_name_their_own_line_and_their_requests(tmp_path):
    """Every offender at once, each at the line of the value itself and the line its request
    starts on; a request cut short is named where the JSON breaks, and reading goes on at the next
    request (whose spans are read: their problems are listed too)."""
    text, at = _sdk_file_with_problems()
    path = tmp_path / "traces.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as info:
        read_trace(path, "auto", "metadata.query_id")
    rendered = sorted(o.render().removeprefix(f"{path}:") for o in info.value.offenders)
    assert rendered == sorted(
        [
            f"line {at['request 11']}, column 1: not JSON: Expecting property name enclosed in double "
            f"quotes (in the request from line {at['request 10']})",
            f"line {at['span id']}, span nope (request from line {at['request 14']}) — field 'spanId': "
            "expected 16 hex digits or base64 of 8 bytes, got 'nope'",
            f"line {at['retries']}, span nope (request from line {at['request 14']}) — field "
            "'app.retries': expected an integer (or its decimal string), got 'many'",
            f"line {at['score']}, span {at['retriever']} (request from line {at['request 5']}) — field "
            "'retrieval.documents.1.document.score': expected a number, got 'high'",
        ]
    ), "\n".join(rendered)


def test_offenders_in_a_json_array_of_requests_name_the_request(tmp_path):
    docs = documents_of(FILES["haystack", "sdk.json"])
    docs[4]["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"] = "zz"
    path = tmp_path / "traces.json"
    path.write_text(json.dumps(docs, indent=1), encoding="utf-8")
    text = path.read_text(encoding="utf-8")
    requests = [n for n, line in enumerate(text.split("\n"), start=1) if line == " {"]  # indent 1
    assert len(requests) == len(docs)
    with pytest.raises(InputError) as info:
        read_trace(path, "auto", "metadata.query_id")
    [offender] = info.value.offenders
    zz_line = _line_of(text, '"traceId": "zz"')
    span_id = base64.b64decode(docs[4]["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["spanId"]).hex()
    assert offender.position == (
        f"line {zz_line}, span {span_id} (request 5 of the array, from line {requests[4]})"
    )
    assert offender.field == "traceId"


def test_a_broken_pretty_printed_trace_exits_2_through_the_cli_naming_every_offender(
    tmp_path, monkeypatch, capsys
):
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    monkeypatch.delenv("KEBAB_EVAL_STORAGE", raising=False)
    text, at = _sdk_file_with_problems()
    trace = tmp_path / "traces.json"
    trace.write_text(text, encoding="utf-8")
    golden = gold(tmp_path / "gold.jsonl", [("G1", "How is doner kebab cooked?", ["c"])])
    config = tmp_path / "cfg.yaml"
    system = {"kind": "replay", "path": str(trace)}
    config.write_text(yaml.safe_dump({"golden": str(golden), "system": system, "baseline": "none"}))
    monkeypatch.setattr("sys.argv", ["kebab-eval", "run", "--config", str(config), "--run-id", "bad-sdk"])
    with pytest.raises(SystemExit) as exit_info:
        cli_main()
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out
    assert captured.err.startswith(
        "error: replay trace traces.json (openinference) cannot be read (4 problems):"
    )
    assert f"{trace}:line {at['score']}, span {at['retriever']} (request from line {at['request 5']})" in (
        captured.err
    )


def test_a_span_ending_before_it_starts_is_refused(tmp_path):
    spans = spans_of(FILES["llamaindex", "b64.json"])
    retriever = next(s for s in spans if s["name"] == "BM25Retriever.retrieve")
    retriever["endTimeUnixNano"] = str(int(retriever["startTimeUnixNano"]) - 5_000_000)
    with pytest.raises(InputError) as info:
        read_trace(write_request(tmp_path / "t.json", spans), "auto")
    trace_hex = base64.b64decode(retriever["traceId"]).hex()
    assert f"trace {trace_hex}: retrieval span duration (ms): a latency cannot be negative, got -5.0" in str(
        info.value
    )


def test_bad_trace_exits_2_through_the_cli(tmp_path, monkeypatch, capsys):
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    monkeypatch.delenv("KEBAB_EVAL_STORAGE", raising=False)
    golden = gold(tmp_path / "gold.jsonl", [("G1", "How is doner kebab cooked?", ["c"])])
    config = tmp_path / "cfg.yaml"
    system = {"kind": "replay", "path": str(_broken_haystack(tmp_path)), "format": "openinference"}
    config.write_text(yaml.safe_dump({"golden": str(golden), "system": system, "baseline": "none"}))
    monkeypatch.setattr("sys.argv", ["kebab-eval", "run", "--config", str(config), "--run-id", "bad-otlp"])
    with pytest.raises(SystemExit) as exit_info:
        cli_main()
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out
    assert captured.err.startswith(
        "error: replay trace broken.json (openinference) cannot be read (6 problems):"
    )
    assert "field 'retrieval.documents.1.document.score': expected a number, got 'high'" in captured.err


def test_trace_options_belong_to_openinference_only():
    with pytest.raises(Exception, match="match_by: only for OpenInference traces"):
        settings_from_dict(
            {"system": {"kind": "replay", "path": "t.jsonl", "format": "kebab", "match_by": "x"}}
        )
    settings = settings_from_dict({"system": {"kind": "replay", "path": "t.json", "match_by": "session.id"}})
    assert settings.system.match_by == "session.id" and settings.system.retriever_span is None


def test_pre_1_0_instrumentation_library_spans_read_the_same(tmp_path):
    """OTLP before 1.0 named scopeSpans instrumentationLibrarySpans (and scope instrumentationLibrary)."""
    text = FILES["haystack", "b64.json"].read_text(encoding="utf-8")
    old = tmp_path / "old.json"
    old.write_text(text.replace('"scopeSpans"', '"instrumentationLibrarySpans"'), encoding="utf-8")
    assert '"scopeSpans"' not in old.read_text(encoding="utf-8")
    a, *_ = read_trace(FILES["haystack", "b64.json"], "auto", "metadata.query_id")
    b, *_ = read_trace(old, "auto", "metadata.query_id")
    assert {k: r.raw_hits for k, r in a.items()} == {k: r.raw_hits for k, r in b.items()} and len(b) == 4


@pytest.mark.parametrize("shard_queries", [None, 1])
def test_unmatched_traces_counted_once_matched_by_question_in_sharded_runs(tmp_path, shard_queries):
    """Matched by question, the run-level warning compares question texts — also when a sharded
    run's plan works it out for the whole run (one query per shard here)."""
    hs = EXPECTED["haystack"]
    golden = gold(
        tmp_path / "gold.jsonl",
        [("G1", hs["q-doner"]["question"].upper(), ["c"]), ("G2", hs["q-skewers"]["question"], ["c"])],
    )
    settings = settings_from_dict(
        {"golden": str(golden), "system": {"kind": "replay", "path": str(FILES["haystack", "hex.jsonl"])}}
    )
    retrieval = pipeline.retrieve(settings, pipeline.load_golden_artifact(settings), shard_queries)
    warnings = [w for w in retrieval.results.warnings if "match no golden query" in w]
    assert warnings == [
        "2 traces match no golden query (ignored; match_by question): "
        "'what goes into garlic yoghurt sauce?', 'does the chili sauce explode?'"
    ]
    assert retrieval.results.outcomes["error_class"].isna().all()


def test_traced_token_counts_are_the_runs_spend_priced_by_system_costs(tmp_path):
    """The instrumentor's llm.token_count.* reach the run metrics: summed over the traced answers
    and priced with ``system_costs`` — the model named by the trace (the offline generator's)."""
    hs = EXPECTED["haystack"]
    ids = [q for q, direct in hs.items() if direct["error"] is None]
    golden = gold(tmp_path / "gold.jsonl", [(q, hs[q]["question"], ["c"]) for q in ids])
    records, *_ = read_trace(FILES["haystack", "hex.jsonl"], "auto", "metadata.query_id")
    usages = [records[q].raw_answer["usage"] for q in ids]
    prompt = sum(u["prompt_tokens"] for u in usages)
    completion = sum(u["completion_tokens"] for u in usages)
    assert prompt > 0 and completion > 0
    scored = Scored(
        {
            "golden": str(golden),
            "system": {"kind": "replay", "path": str(FILES["haystack", "hex.jsonl"])},
            "system_costs": {
                "prices": {"extractive-first-line": {"input_per_mtok": 3, "output_per_mtok": 15}}
            },
        }
    )
    assert scored.metrics["system_prompt_tokens"] == prompt
    assert scored.metrics["system_completion_tokens"] == completion
    assert scored.metrics["system_cost_usd"] == pytest.approx((prompt * 3 + completion * 15) / 1e6, abs=1e-15)
