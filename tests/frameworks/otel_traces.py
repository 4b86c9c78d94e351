"""OpenInference traces written by the real instrumentation libraries, for the replay reader.

Two offline RAG pipelines, traced as a team would trace them — OpenTelemetry's SDK with the
``openinference-instrumentation-*`` instrumentors, spans kept by ``InMemorySpanExporter``:

* **LlamaIndex**: ``MarkdownNodeParser`` nodes → ``BM25Retriever`` (llama-index-retrievers-bm25)
  → ``RetrieverQueryEngine`` answering with ``MockLLM`` (its answer is the word "text" repeated);
* **Haystack 2**: ``InMemoryBM25Retriever`` → ``PromptBuilder`` → ``ExtractiveGenerator``
  (``extractive_generator.py``: an offline "generator" replying with the top document's first
  line and reporting token usage the way OpenAI's generators do, so the instrumentor writes
  ``llm.token_count.*``). A question containing ``FAIL_WORD`` makes it raise: that trace has
  a span with status ERROR.

Each query runs inside ``using_metadata({"query_id": …})`` (the OpenInference ``metadata``
attribute), so traces can be matched by question or by ``metadata.query_id``. The spans are
encoded as OTLP protobuf by ``opentelemetry-exporter-otlp-proto-common`` and written as OTLP JSON:

* ``*_b64.json``: ``MessageToJson`` of the whole ExportTraceServiceRequest (ids in base64, enums
  by name: protobuf's generic JSON mapping);
* ``*_hex.jsonl``: one request per trace per line, ids in hex and enums as integers (the OTLP/JSON
  spec, as the collector's file exporter writes);
* ``*_sdk.json``: one pretty-printed ``MessageToJson`` request per span, one after another, in the
  order the spans ended: byte for byte what the README's exporter writes under
  ``SimpleSpanProcessor`` (which exports each span as it ends).

``python tests/frameworks/otel_traces.py fixtures OUT_DIR`` writes the fixtures committed in
``tests/systems/adapters/data/otlp/`` and ``expected.json``: per framework and question, the hits
(ids, scores) and the answer the pipeline returned directly. ``test_openinference_traces.py``
regenerates them with the installed library versions and checks the reader against the pipeline.
``otel_traces.py golden CORPUS GOLDEN CHUNK_SIZE OUT_DIR`` traces a golden set's questions through
the Haystack pipeline over ``haystack_app.py``'s index (the end-to-end test).
"""

import base64
import json
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")  # before haystack is imported

FAIL_WORD = "explode"  # as in extractive_generator.py
KIND_NUMBERS = {
    "SPAN_KIND_UNSPECIFIED": 0,
    "SPAN_KIND_INTERNAL": 1,
    "SPAN_KIND_SERVER": 2,
    "SPAN_KIND_CLIENT": 3,
}
STATUS_NUMBERS = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}

#: The fixtures' corpus: small Markdown files (the traces carry every retrieved document's text).
CORPUS = {
    "grill/skewers.md": "# Skewers\n\nSoak wooden skewers in water for thirty minutes before grilling.\n\n"
    "## Metal skewers\n\nFlat metal skewers keep the meat from spinning.\n",
    "grill/heat.md": "# Heat\n\nDoner kebab is cooked on a vertical rotisserie.\n\n"
    "## Charcoal\n\nCharcoal gives the smoky flavour; light it forty minutes ahead.\n",
    "sauces/yoghurt.md": "# Yoghurt sauce\n\nGarlic yoghurt sauce: yoghurt, crushed garlic, salt and mint.\n",
    "sauces/chili.md": "# Chili sauce\n\nRed chili sauce is made from roasted peppers and tomato paste.\n",
}
QUESTIONS = {
    "q-skewers": "How long should wooden skewers soak before grilling?",
    "q-doner": "How is doner kebab cooked?",
    "q-yoghurt": "What goes into   garlic yoghurt sauce?",  # runs of spaces: matched normalised
    "q-fail": f"Does the chili sauce {FAIL_WORD}?",
}


class Tracing:
    """One tracer provider with an in-memory exporter; LlamaIndex and Haystack instrumented into it
    (once per process: instrumentors patch the libraries globally)."""

    _instance: "Tracing | None" = None

    def __init__(self) -> None:
        from openinference.instrumentation.haystack import HaystackInstrumentor
        from openinference.instrumentation.llama_index import LlamaIndexInstrumentor
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        self.exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        LlamaIndexInstrumentor().instrument(tracer_provider=provider)
        HaystackInstrumentor().instrument(tracer_provider=provider)

    @classmethod
    def get(cls) -> "Tracing":
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance

    def take(self) -> list:
        spans = list(self.exporter.get_finished_spans())
        self.exporter.clear()
        return spans


def versions() -> dict[str, str]:
    """The installed versions of everything that shapes the traces."""
    from importlib.metadata import version

    names = (
        "llama-index-core",
        "llama-index-retrievers-bm25",
        "haystack-ai",
        "openinference-instrumentation-llama-index",
        "openinference-instrumentation-haystack",
        "openinference-semantic-conventions",
        "opentelemetry-sdk",
        "opentelemetry-exporter-otlp-proto-common",
    )
    return {name: version(name) for name in names}


# -- Haystack -------------------------------------------------------------------------------------


def extractive_generator():
    """The offline generator component (``extractive_generator.py``)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    try:
        from extractive_generator import ExtractiveGenerator
    finally:
        sys.path.pop(0)
    return ExtractiveGenerator()


def haystack_pipeline(store, k: int):
    """retriever → prompt builder → extractive generator, over a filled InMemoryDocumentStore."""
    from haystack import Pipeline
    from haystack.components.builders import PromptBuilder
    from haystack.components.retrievers.in_memory import InMemoryBM25Retriever

    template = "Context:\n{% for d in documents %}{{ d.content }}\n{% endfor %}Question: {{ query }}\nAnswer:"
    pipe = Pipeline()
    pipe.add_component("retriever", InMemoryBM25Retriever(document_store=store, top_k=k))
    pipe.add_component("prompt", PromptBuilder(template=template, required_variables=["query", "documents"]))
    pipe.add_component("generator", extractive_generator())
    pipe.connect("retriever.documents", "prompt.documents")
    pipe.connect("prompt.prompt", "generator.prompt")
    pipe.connect("retriever.documents", "generator.documents")
    return pipe


def haystack_store(corpus: dict[str, str]):
    from haystack import Document
    from haystack.document_stores.in_memory import InMemoryDocumentStore

    store = InMemoryDocumentStore()
    store.write_documents([Document(content=text, meta={"file_path": path}) for path, text in corpus.items()])
    return store


def run_haystack(pipe, questions: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Each question through the pipeline, traced: ``{query_id: {question, hits: [[id, score]…],
    answer, error}}`` as the pipeline returned them."""
    from openinference.instrumentation import using_metadata

    direct = {}
    for qid, question in questions.items():
        row: dict[str, Any] = {"question": question, "hits": [], "answer": None, "error": None}
        with using_metadata({"query_id": qid}):
            try:
                out = pipe.run(
                    {"retriever": {"query": question}, "prompt": {"query": question}},
                    include_outputs_from={"retriever"},
                )
            except Exception as exc:  # the traced failure: the trace has an ERROR span
                row["error"] = f"{type(exc).__name__}: {exc}"
                out = None
        if out is not None:
            row["hits"] = [[d.id, d.score] for d in out["retriever"]["documents"]]
            row["answer"] = out["generator"]["replies"][0]
        direct[qid] = row
    return direct


# -- LlamaIndex -----------------------------------------------------------------------------------


def llamaindex_engine(corpus: dict[str, str], k: int):
    from llama_index.core import Document
    from llama_index.core.llms import MockLLM
    from llama_index.core.node_parser import MarkdownNodeParser
    from llama_index.core.query_engine import RetrieverQueryEngine
    from llama_index.retrievers.bm25 import BM25Retriever

    docs = [Document(text=text, metadata={"file_path": path}) for path, text in corpus.items()]
    nodes = MarkdownNodeParser().get_nodes_from_documents(docs)
    retriever = BM25Retriever.from_defaults(nodes=nodes, similarity_top_k=k)
    return RetrieverQueryEngine.from_args(retriever, llm=MockLLM(max_tokens=6))


def run_llamaindex(engine, questions: dict[str, str]) -> dict[str, dict[str, Any]]:
    from openinference.instrumentation import using_metadata

    direct = {}
    for qid, question in questions.items():
        with using_metadata({"query_id": qid}):
            response = engine.query(question)
        direct[qid] = {
            "question": question,
            "hits": [[n.node.node_id, n.score] for n in response.source_nodes],
            "answer": str(response),
            "error": None,
        }
    return direct


# -- OTLP JSON ------------------------------------------------------------------------------------


def otlp_dict(spans: Iterable) -> dict[str, Any]:
    """The spans as protobuf's JSON mapping of an ExportTraceServiceRequest (ids base64)."""
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    return MessageToDict(encode_spans(list(spans)))


def _hex_ids(request: dict[str, Any]) -> dict[str, Any]:
    """The request with ids in hex and enums as integers (OTLP/JSON as the spec writes it)."""
    for resource in request.get("resourceSpans", []):
        for scope in resource.get("scopeSpans", []):
            for span in scope.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
                if "kind" in span:
                    span["kind"] = KIND_NUMBERS[span["kind"]]
                if "code" in span.get("status", {}):
                    span["status"]["code"] = STATUS_NUMBERS[span["status"]["code"]]
    return request


def write_otlp(spans: list, stem: Path) -> tuple[Path, Path, Path]:
    """``STEM_b64.json`` (one request, protobuf JSON), ``STEM_hex.jsonl`` (a request per trace
    per line, hex ids, integer enums) and ``STEM_sdk.json`` (a pretty-printed request per span)."""
    from google.protobuf.json_format import MessageToJson
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    b64 = stem.with_name(stem.name + "_b64.json")
    b64.write_text(json.dumps(otlp_dict(spans), ensure_ascii=False) + "\n", encoding="utf-8")
    by_trace: dict[int, list] = {}
    for span in spans:
        by_trace.setdefault(span.context.trace_id, []).append(span)
    hexed = stem.with_name(stem.name + "_hex.jsonl")
    hexed.write_text(
        "".join(
            json.dumps(_hex_ids(otlp_dict(group)), ensure_ascii=False) + "\n" for group in by_trace.values()
        ),
        encoding="utf-8",
    )
    sdk = stem.with_name(stem.name + "_sdk.json")
    sdk.write_text("".join(MessageToJson(encode_spans([span])) + "\n" for span in spans), encoding="utf-8")
    return b64, hexed, sdk


def generate(out: Path, k: int = 3) -> dict[str, Any]:
    """Both pipelines over :data:`CORPUS`, traced; writes the OTLP JSON files and
    ``expected.json`` into ``out`` and returns what expected.json holds."""
    out.mkdir(parents=True, exist_ok=True)
    tracing = Tracing.get()
    engine = llamaindex_engine(CORPUS, k)
    tracing.take()  # indexing spans are not queries
    expected: dict[str, Any] = {"versions": versions(), "k": k}
    expected["llamaindex"] = run_llamaindex(engine, {q: t for q, t in QUESTIONS.items() if q != "q-fail"})
    write_otlp(tracing.take(), out / "llamaindex")
    pipe = haystack_pipeline(haystack_store(CORPUS), k)
    tracing.take()
    expected["haystack"] = run_haystack(pipe, QUESTIONS)
    write_otlp(tracing.take(), out / "haystack")
    (out / "expected.json").write_text(
        json.dumps(expected, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    return expected


def generate_golden(corpus: Path, golden: Path, chunk_size: int, out: Path, k: int = 10) -> dict[str, Any]:
    """The golden set's questions through a traced Haystack pipeline over ``haystack_app.App``'s
    index of ``corpus`` (the same documents, hence the same ids, as the http/jsonl system test):
    writes ``haystack_b64.json``, ``haystack_hex.jsonl``, ``haystack_sdk.json`` and ``direct.json``
    (what the pipeline returned) into ``out``."""
    import yaml

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    try:
        from haystack_app import App
    finally:
        sys.path.pop(0)
    out.mkdir(parents=True, exist_ok=True)
    tracing = Tracing.get()
    app = App(corpus, chunk_size)
    pipe = haystack_pipeline(app.store, k)
    tracing.take()  # the indexing pipeline's spans
    queries = yaml.safe_load(golden.read_text(encoding="utf-8"))["queries"]
    direct = run_haystack(pipe, {q["id"]: q["query"] for q in queries})
    write_otlp(tracing.take(), out / "haystack")
    (out / "direct.json").write_text(json.dumps(direct, ensure_ascii=False) + "\n", encoding="utf-8")
    return direct


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "fixtures":
        print(json.dumps(generate(Path(sys.argv[2]))["versions"], indent=1))
    elif len(sys.argv) == 6 and sys.argv[1] == "golden":
        generate_golden(Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4]), Path(sys.argv[5]))
    else:
        raise SystemExit("usage: otel_traces.py fixtures OUT_DIR | golden CORPUS GOLDEN CHUNK_SIZE OUT_DIR")
