"""The OTLP recipe (docs/site/recipes/openinference.md), run as written: the code block under
"Getting OTLP JSON" and the replay config above it, around a real LlamaIndex pipeline.

* The recipe's Python (the ``OTLPJsonFile`` exporter under ``SimpleSpanProcessor``, the
  OpenInference LlamaIndex instrumentor) is taken from that page and run in a process of its own
  (the instrumentor patches LlamaIndex globally; forked from one that imported the libraries,
  tests/frameworks/recipe_zygote.py), with the 60 questions of
  ``tests/data/kebab_docs_haystack_golden.yaml`` asked of ``llamaindex_app.py``'s BM25 query engine
  over kebab-docs where the recipe says "your queries". The file it writes is what the SDK wrote:
  one pretty-printed request per span.
* The recipe's replay config (its ``relative_to`` pointed at the corpus) replays that file through
  ``kebab-eval run``; the same LlamaIndex system run in-process (``kind: python``) through
  ``kebab-eval run`` gives, per query, the same hits (path, text, score, in order), the same
  answer and the same retrieval scores.
* With ``BatchSpanProcessor`` in its place (several spans per request, a trace's spans in
  several batches) the file reads the same.
* The SDK's ``ConsoleSpanExporter`` output, which is not OTLP, is refused with exit 2, saying what
  it is.

On main before this recipe's reader, the first replay exited 2: "line 95, column 1: not JSON:
Extra data". Skips without the corpus or the ``frameworks`` extra, unless
``KEBAB_EVAL_REQUIRE_FRAMEWORKS=1``.
"""

from __future__ import annotations

import json
import os
import re
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests import docs_pages
from tests.frameworks.recipe_zygote import RecipeRunner
from tests.frameworks.test_haystack_system import (
    GOLDEN,
    TOL,
    cli,
    export,
    golden_queries,
    no_traceback,
    per_query,
)
from tests.frameworks.test_openinference_traces import RETRIEVAL_METRICS, needs_frameworks

HERE = Path(__file__).resolve().parent
QUERIES_MARK = "# … your queries …"


def readme_traces_section() -> str:
    """The OpenInference recipe's page, whose code it runs."""
    return docs_pages.page("recipes/openinference.md")


def recipe_code() -> tuple[str, str]:
    """The recipe's Python block, split where it says to run the queries: (before, after)."""
    section = readme_traces_section()
    after_mark = section.split("Getting OTLP JSON", 1)[1]
    code = re.search(r"```python\n(.*?)```", after_mark, re.S).group(1)  # type: ignore[union-attr]
    assert code.count(QUERIES_MARK) == 1, code
    before, after = code.split(QUERIES_MARK)
    return before, after


def recipe_config() -> dict:
    """The recipe's replay config (the first YAML block of the section)."""
    block = re.search(r"```yaml\n(.*?)```", readme_traces_section(), re.S).group(1)  # type: ignore[union-attr]
    return yaml.safe_load(block)


def test_the_recipe_is_complete_code():
    before, after = recipe_code()
    assert 'SimpleSpanProcessor(OTLPJsonFile("traces.json"))' in before
    assert "MessageToJson(encode_spans(spans))" in before and after.strip() == "provider.shutdown()"
    compile(before + after, "recipes/openinference.md", "exec")  # the block is Python as it stands
    system = recipe_config()["system"]
    assert system["kind"] == "replay" and system["path"] == "traces.json"


def traced(
    runner: RecipeRunner,
    work: Path,
    corpus: Path,
    questions: list[str],
    processor: str | None = None,
    threads: int = 1,
) -> Path:
    """Runs the README's code in ``work`` with ``questions`` asked of the LlamaIndex query engine
    where it says "your queries" (from ``threads`` threads at once), in a process of its own
    (forked by ``runner``; the instrumentor patches LlamaIndex globally); ``processor`` replaces
    ``SimpleSpanProcessor(`` (a variant). Returns the file it wrote (``traces.json`` in ``work``)."""
    before, after = recipe_code()
    if processor is not None:
        assert before.count("SimpleSpanProcessor(") == 1
        before = before.replace("SimpleSpanProcessor(", processor).replace(
            "import SimpleSpanProcessor,", "import BatchSpanProcessor, SimpleSpanProcessor,"
        )
    queries = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(HERE)!r})
        from llamaindex_app import TOP_K, build

        from concurrent.futures import ThreadPoolExecutor

        system = build({str(corpus)!r})
        with ThreadPoolExecutor({threads}) as pool:
            list(pool.map(lambda question: system.ask(question, TOP_K), {questions!r}))
        """
    )
    script = work / "traced_app.py"
    script.write_text(before + queries + after, encoding="utf-8")
    code, stderr = runner.run(script, timeout_s=600)
    assert code == 0, stderr[-3000:]
    return work / "traces.json"


NOT_SPACE = re.compile(r"\S")


def requests_in(path: Path) -> list[dict]:
    """The export requests of a file of requests one after another (the stdlib, not the reader)."""
    text, decoder, pos, out = path.read_text(encoding="utf-8"), json.JSONDecoder(), 0, []
    # each request's start found in place: slicing off the rest of the text at every request
    # copied it (quadratic: ~12 s for the 60-question file)
    while (start := NOT_SPACE.search(text, pos)) is not None:
        doc, pos = decoder.raw_decode(text, start.start())
        out.append(doc)
    return out


def spans_per_request(path: Path) -> list[int]:
    return [
        sum(len(scope["spans"]) for resource in doc["resourceSpans"] for scope in resource["scopeSpans"])
        for doc in requests_in(path)
    ]


# -- the kebab-docs golden set, end to end ---------------------------------------------------------


@pytest.fixture(scope="module")
def corpus() -> Path:
    return needs_frameworks(corpus_too=True).resolve()  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def runner() -> Iterator[RecipeRunner]:
    """One zygote for the module's five recipe runs (tests/frameworks/recipe_zygote.py)."""
    needs_frameworks(corpus_too=False)
    zygote = RecipeRunner({**os.environ, "HAYSTACK_TELEMETRY_ENABLED": "False"})
    yield zygote
    zygote.close()


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("otlp-recipe")


@pytest.fixture(scope="module")
def env(work) -> dict[str, str]:
    home = work / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("KEBAB_EVAL_", "DAGSTER_"))}
    environment["DAGSTER_HOME"] = str(home)
    return environment


@pytest.fixture(scope="module")
def trace(runner, work, corpus) -> Path:
    return traced(runner, work, corpus, [q["query"] for q in golden_queries()])


def run_and_export(env: dict[str, str], config: dict, where: Path, run_id: str) -> dict:
    path = where / f"{run_id}.yaml"
    path.write_text(yaml.safe_dump(config, allow_unicode=True), encoding="utf-8")
    proc = cli(env, "run", "--config", str(path), "--run-id", run_id, "--baseline", "none")
    no_traceback(proc)
    assert proc.returncode == 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return {**export(env, run_id), "_stdout": proc.stdout, "_stderr": proc.stderr}


SHARED = {"golden": str(GOLDEN), "k": [1, 3, 5, 10], "answers": True}


@pytest.fixture(scope="module")
def replayed(work, env, trace, corpus) -> dict:
    """``kebab-eval run`` of the README's replay config (beside the trace, as its path says)."""
    config = recipe_config()
    mapping = config["system"]["response"]["hit_fields"]["doc_path"]
    assert mapping["relative_to"] == "/srv/corpus"  # the README's placeholder for your corpus
    mapping["relative_to"] = str(corpus)
    return run_and_export(env, {**SHARED, **config}, work, "otlp-recipe")


@pytest.fixture(scope="module")
def in_process(work, env, corpus) -> dict:
    """The same LlamaIndex system run in-process, mapped as the trace's documents are (the
    reader's defaults: chunk_id ← id, snippet ← content, score; doc_path as the recipe maps it)."""
    system = {
        "kind": "python",
        "callable": "llamaindex_app:build",
        "args": {"corpus": str(corpus)},
        "path": [str(HERE)],
        "timeout_s": 60,
        "response": {
            "hits": "nodes",
            "hit_fields": {
                "chunk_id": "node.id_",
                "doc_path": {"path": "node.metadata.file_path", "relative_to": str(corpus)},
                "snippet": "node.text",
                "score": "score",
            },
            "answer_fields": {"text": "response"},
        },
    }
    return run_and_export(env, {**SHARED, "system": system}, work, "llamaindex-in-process")


def test_the_recipe_writes_a_pretty_printed_request_per_span(trace):
    text = trace.read_text(encoding="utf-8")
    counts = spans_per_request(trace)
    assert set(counts) == {1} and len(counts) > 3 * 60  # ≥ retrieve, query, LLM spans per question
    assert text.startswith('{\n  "resourceSpans": [\n')
    assert text.count('\n{\n  "resourceSpans"') == len(counts) - 1


def test_the_replayed_recipe_scores_as_the_system_in_process(replayed, in_process):
    """Per golden query: the same hits (path, text, score, in order), the same answer, the same
    retrieval scores; and so the same metrics."""
    assert replayed["system"]["kind"] == "replay" and in_process["system"]["kind"] == "python"
    traced_rows, live_rows = per_query(replayed), per_query(in_process)
    assert set(traced_rows) == set(live_rows) and len(traced_rows) == 60
    answerable = 0
    for qid, live in live_rows.items():
        row = traced_rows[qid]
        assert row["error"] is None and live["error"] is None, (qid, row["error"], live["error"])
        assert [(h["doc_path"], h["snippet"], h["score"]) for h in row["hits"]] == [
            (h["doc_path"], h["snippet"], h["score"]) for h in live["hits"]
        ], qid
        assert len(row["hits"]) == 10
        assert row["answer"]["text"] == live["answer"]["text"], qid
        assert row["match_criterion"] == live["match_criterion"], qid
        for name in RETRIEVAL_METRICS:
            expected = live["scores"].get(name)
            if expected is None:
                assert row["scores"].get(name) is None, (qid, name)
            else:
                answerable += name == "mrr"
                assert row["scores"][name] == pytest.approx(expected, abs=TOL), (qid, name)
    assert answerable == 52
    for name in RETRIEVAL_METRICS:
        assert replayed["metrics"][name] == pytest.approx(in_process["metrics"][name], abs=TOL), name
    print("README recipe replayed vs in-process:", {m: replayed["metrics"][m] for m in ("mrr", "hit@10")})
    assert replayed["metrics"]["mrr"] > 0.3  # the system finds things: equality is not of zeros


# -- variants --------------------------------------------------------------------------------------


def test_a_batch_span_processor_file_reads_as_the_simple_one(runner, tmp_path, corpus):
    """The recipe with BatchSpanProcessor (5 spans per export): requests of several spans, a
    trace's spans in more than one of them; the reader gives what the simple file gives."""
    from kebab_eval_pipeline.systems.replay import read_trace

    questions = [q["query"] for q in golden_queries()[:6]]
    (tmp_path / "simple").mkdir()
    (tmp_path / "batch").mkdir()
    simple = traced(runner, tmp_path / "simple", corpus, questions)
    batch = traced(
        runner,
        tmp_path / "batch",
        corpus,
        questions,
        processor="BatchSpanProcessor(max_export_batch_size=5, span_exporter=",
    )
    counts = spans_per_request(batch)
    assert max(counts) == 5 and len(counts) > 1
    traces_per_request = [
        {s["traceId"] for r in doc["resourceSpans"] for sc in r["scopeSpans"] for s in sc["spans"]}
        for doc in requests_in(batch)
    ]
    assert any(len(ids) > 1 for ids in traces_per_request)  # a request holds spans of two traces

    def read(path: Path) -> dict:
        records, _, _, _, _ = read_trace(path, "openinference", "question")
        return {
            key: (
                [(h["doc_path"], h["snippet"], h["score"]) for h in r.raw_hits],
                r.raw_answer["text"],
                r.error,
            )
            for key, r in records.items()
        }

    assert read(batch) == read(simple) and len(read(simple)) == len(set(questions))


def test_spans_ending_on_several_threads_at_once_are_written_whole(runner, tmp_path, corpus):
    """Questions asked from 8 threads: the traces' spans end, and are exported, interleaved (a
    trace's requests are not next to each other in the file); it reads as the one-thread file."""
    from kebab_eval_pipeline.systems.replay import read_trace

    questions = [q["query"] for q in golden_queries()[:24]]
    (tmp_path / "one").mkdir()
    (tmp_path / "eight").mkdir()
    one = traced(runner, tmp_path / "one", corpus, questions)
    eight = traced(runner, tmp_path / "eight", corpus, questions, threads=8)
    assert len(requests_in(eight)) == len(requests_in(one))
    order = [
        s["traceId"]
        for doc in requests_in(eight)
        for r in doc["resourceSpans"]
        for sc in r["scopeSpans"]
        for s in sc["spans"]
    ]
    runs = [trace for i, trace in enumerate(order) if i == 0 or order[i - 1] != trace]
    assert len(runs) > len(set(order))  # some trace's spans are split by another's

    def read(path: Path) -> dict:
        records, _, _, _, _ = read_trace(path, "openinference", "question")
        return {
            key: [(h["doc_path"], h["snippet"], h["score"]) for h in r.raw_hits] for key, r in records.items()
        }

    assert read(eight) == read(one) and len(read(one)) == len(set(questions))


def test_console_span_exporter_output_is_refused_saying_what_it_is(tmp_path, env):
    """What the SDK's ConsoleSpanExporter writes to a file (span.to_json() per span) is not OTLP:
    exit 2 naming it, under format auto and format openinference."""
    needs_frameworks(corpus_too=False)
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

    path = tmp_path / "console.json"
    with open(path, "w", encoding="utf-8") as out:
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(out=out)))
        with provider.get_tracer("t").start_as_current_span("query"):
            pass
        provider.shutdown()
    assert json.loads(path.read_text(encoding="utf-8"))["context"]["trace_id"].startswith("0x")
    golden = tmp_path / "gold.yaml"
    golden.write_text(yaml.safe_dump({"queries": [{"id": "q1", "query": "query"}]}), encoding="utf-8")
    for fmt in ("auto", "openinference"):
        config = tmp_path / f"{fmt}.yaml"
        system = {"kind": "replay", "path": str(path), "format": fmt}
        config.write_text(yaml.safe_dump({"golden": str(golden), "system": system}), encoding="utf-8")
        proc = cli(env, "run", "--config", str(config), "--run-id", f"console-{fmt}", "--baseline", "none")
        no_traceback(proc)
        assert proc.returncode == 2, proc.stderr[-2000:]
        assert "ConsoleSpanExporter output (span.to_json()), not OTLP JSON" in proc.stderr, proc.stderr
