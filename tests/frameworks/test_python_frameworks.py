"""Real RAG frameworks evaluated in-process (``kind: python``): no server, no subprocess per query.

* **LlamaIndex** (``llamaindex_app.py``: ``MarkdownNodeParser`` → ``BM25Retriever`` from
  llama-index-retrievers-bm25, and a ``RetrieverQueryEngine`` with the offline ``MockLLM``) over the
  kebab-docs corpus, through a real ``kebab-eval run`` with answers on: the stored per-query scores
  equal an independent computation from the raw ``NodeWithScore`` results; every query is answered
  with the engine's text, cited by its source nodes; versions and packages are recorded.
* **LangChain** (``InMemoryVectorStore`` with langchain-core's ``DeterministicFakeEmbedding``, and a
  fake chat model reporting token usage), in-process through the pipeline functions: the
  retriever's documents read with docs/examples/frameworks/langchain.yaml's mapping unchanged,
  and the chat model's ``usage_metadata`` as the answer's token counts.

(Haystack in-process is in test_haystack_system.py, beside its http and command runs.) Skips
without the ``frameworks`` extra or the corpus, unless ``KEBAB_EVAL_REQUIRE_FRAMEWORKS=1``.
"""

from __future__ import annotations

import json
import re
import string
import sys
from pathlib import Path

import pytest
import yaml

from tests.frameworks.test_haystack_system import GOLDEN, KS, TOL, cli, no_traceback, per_query
from tests.frameworks.test_haystack_system import frameworks_or_skip as corpus_or_skip
from tests.systems.adapters.test_frameworks import frameworks_or_skip

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
EXAMPLES = REPO / "docs" / "examples" / "frameworks"


@pytest.fixture(scope="module")
def corpus() -> Path:
    frameworks_or_skip("llama_index.core", "llama_index.retrievers.bm25")
    return corpus_or_skip().resolve()


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> dict[str, str]:
    from tests.conftest import clean_cli_env

    return clean_cli_env(tmp_path_factory, "python-frameworks")


@pytest.fixture(scope="module")
def llamaindex_run(corpus, env, tmp_path_factory) -> dict:
    """``kebab-eval run`` of llamaindex_python.yaml, exported as JSON."""
    work = tmp_path_factory.mktemp("llamaindex")
    text = string.Template((HERE / "llamaindex_python.yaml").read_text(encoding="utf-8")).substitute(
        golden=str(GOLDEN), app_dir=str(HERE), corpus=str(corpus)
    )
    config = work / "llamaindex.yaml"
    config.write_text(text, encoding="utf-8")
    proc = cli(env, "run", "--config", str(config), "--run-id", "llamaindex-bm25")
    no_traceback(proc)
    assert proc.returncode == 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    exported = cli(env, "export", "llamaindex-bm25", "--format", "json")
    assert exported.returncode == 0, exported.stderr[-2000:]
    return {**json.loads(exported.stdout), "_stdout": proc.stdout}


def _norm(headings: list[str]) -> list[str]:
    return [" ".join(h.split()) for h in headings]


def llamaindex_ranks(corpus: Path) -> dict[str, int | None]:
    """Per answerable golden query: the rank (1..10) of the first raw LlamaIndex hit under the gold
    file and heading path, None when no top-10 hit is — from the NodeWithScore objects themselves
    (``metadata["file_path"]``, ``header_path`` + ``header``), not the mapping."""
    sys.path.insert(0, str(HERE))
    try:
        from llamaindex_app import build
    finally:
        sys.path.remove(str(HERE))
    system = build(str(corpus))
    ranks: dict[str, int | None] = {}
    for q in yaml.safe_load(GOLDEN.read_text(encoding="utf-8"))["queries"]:
        if not q.get("supports"):
            continue
        ranks[q["id"]] = None
        for rank, scored in enumerate(system.search(q["query"], 10)["nodes"], start=1):
            node = scored.node
            rel = Path(node.metadata["file_path"]).relative_to(corpus).as_posix()
            parents = [h for h in node.metadata["header_path"].split("\n") if h.strip()]
            own = node.metadata["header"]
            path = _norm(parents + ([own] if own else []))
            if any(
                rel == s["rel_path"] and path[: len(s["heading_path"])] == _norm(s["heading_path"])
                for s in q["supports"]
            ):
                ranks[q["id"]] = rank
                break
    return ranks


def test_llamaindex_scores_equal_an_independent_computation(llamaindex_run, corpus):
    ranks = llamaindex_ranks(corpus)
    assert len(ranks) == 52
    stored = per_query(llamaindex_run)
    for qid, rank in ranks.items():
        scores = stored[qid]["scores"]
        assert stored[qid]["error"] is None, (qid, stored[qid]["error"])
        assert scores["mrr"] == pytest.approx(1 / rank if rank else 0.0, abs=TOL), qid
        for k in KS:
            assert scores[f"hit@{k}"] == (1.0 if rank is not None and rank <= k else 0.0), (qid, k)
    mrr = sum(1 / r for r in ranks.values() if r) / len(ranks)
    hit10 = sum(r is not None for r in ranks.values()) / len(ranks)
    print(f"LlamaIndex BM25 (MarkdownNodeParser sections), 52 queries: MRR {mrr:.4f}, hit@10 {hit10:.4f}")
    assert llamaindex_run["metrics"]["mrr"] == pytest.approx(mrr, abs=TOL)
    assert llamaindex_run["metrics"]["error_rate"] == 0.0
    assert mrr > 0.4 and hit10 > 0.7  # a working BM25 over sections, not a mapping that zeroes


def test_llamaindex_hits_answers_and_versions(llamaindex_run, corpus):
    rows = llamaindex_run["per_query"]
    assert len(rows) == 60
    hits = [h for q in rows for h in q["hits"]]
    assert len(hits) == 600  # k = 10 for every query
    assert all(h["doc_path"].endswith(".md") and not h["doc_path"].startswith("/") for h in hits)
    assert all(h["score_kind"] == "bm25" and h["score"] > 0 for h in hits)
    # a section's own heading comes from its first line; only a file's front matter has none
    assert all(bool(h["heading_path"]) == bool(re.match(r"#{1,6}[ \t]", h["snippet"])) for h in hits)
    assert sum(not h["heading_path"] for h in hits) < 20
    for q in rows:  # MockLLM's text; the citations are the engine's source nodes, best first
        assert q["answer"]["text"].startswith("text text"), q["query_id"]
        cited = [c["chunk_id"] for c in q["answer"]["citations"]]
        assert cited[:10] == [h["chunk_id"] for h in q["hits"]], q["query_id"]
    system = llamaindex_run["system"]
    assert system["kind"] == "python" and system["callable"] == "llamaindex_app:build"
    from importlib.metadata import version

    packages = system["packages"].split(", ")
    assert f"llama-index-core=={version('llama-index-core')}" in packages
    assert f"llama-index-retrievers-bm25=={version('llama-index-retrievers-bm25')}" in packages
    assert llamaindex_run["versions"]["chunker_version"] == "llamaindex-markdown-node-parser"
    assert system["coverage"]["docs_processed"] == 45.0 and system["coverage"]["chunks"] > 45
    assert "python: llamaindex_app:build" in llamaindex_run["_stdout"]


# -- LangChain, in-process through the pipeline functions -------------------------------------------

MARKDOWN = (
    "# Install\n\nRun pip install kebab.\n\n"
    "## From source\n\nClone the repository and build it.\n\n"
    "### Windows\n\nUse WSL to build on windows.\n"
)


class LangChainRAG:
    """What a LangChain user would hand kind: python: a vector store and a chat model."""

    def __init__(self, source: str) -> None:
        from langchain_core.embeddings import DeterministicFakeEmbedding
        from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
        from langchain_core.messages import AIMessage
        from langchain_core.vectorstores import InMemoryVectorStore
        from langchain_text_splitters import MarkdownHeaderTextSplitter

        splitter = MarkdownHeaderTextSplitter([("#" * n, f"Header {n}") for n in range(1, 7)])
        docs = splitter.split_text(MARKDOWN)
        for d in docs:
            d.metadata["source"] = source
        self.store = InMemoryVectorStore(DeterministicFakeEmbedding(size=16))
        self.store.add_documents(docs)
        usage = {"input_tokens": 40, "output_tokens": 7, "total_tokens": 47}
        self.llm = GenericFakeChatModel(
            messages=iter([AIMessage(content=f"answer {i}", usage_metadata=usage) for i in range(100)])
        )

    def search(self, query: str, k: int) -> dict:
        # under "results", as the documented http body: the langchain.yaml mapping applies unchanged
        return {"results": self.store.as_retriever(search_kwargs={"k": k}).invoke(query)}

    def ask(self, query: str, k: int):
        return self.llm.invoke(query)  # an AIMessage, usage_metadata included


def langchain_system() -> LangChainRAG:
    """A factory (called by the adapter once per process and config)."""
    return LangChainRAG("/srv/corpus/guide/install.md")


def test_langchain_pairs_and_usage_in_process(tmp_path):
    frameworks_or_skip("langchain_core", "langchain_text_splitters")
    from kebab_eval_pipeline.chain import pipeline
    from kebab_eval_pipeline.chain.settings import load_settings

    golden = tmp_path / "golden.yaml"
    golden.write_text(
        yaml.safe_dump(
            {
                "name": "langchain-tiny",
                "queries": [
                    {
                        "id": "q1",
                        "query": "build on windows",
                        "supports": [
                            {
                                "rel_path": "guide/install.md",
                                "heading_path": ["Install", "From source", "Windows"],
                            }
                        ],
                    },
                    {
                        "id": "q2",
                        "query": "pip install",
                        "supports": [{"rel_path": "guide/install.md", "heading_path": ["Install"]}],
                    },
                ],
            }
        ),
        encoding="utf-8",
    )
    example = yaml.safe_load((EXAMPLES / "langchain.yaml").read_text(encoding="utf-8"))["system"]
    config = tmp_path / "langchain.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "golden": str(golden),
                "system": {
                    "kind": "python",
                    "callable": "tests.frameworks.test_python_frameworks:langchain_system",
                    "response": {**example["response"], "answer_fields": {"text": "content"}},
                },
                "k": [1, 3],
                "answers": True,
                "match": "anchor",
                "baseline": "none",
            }
        ),
        encoding="utf-8",
    )
    settings = load_settings(config)
    art = pipeline.load_golden_artifact(settings)
    retrieval = pipeline.retrieve(settings, art).results
    outcomes = retrieval.outcomes.set_index("query_id")
    assert outcomes["error"].isna().all(), outcomes["error"].tolist()
    hits = retrieval.hits
    assert len(hits) == 6  # 3 sections, k = max(k, mrr_cutoff) ≥ 3
    assert set(hits["doc_path"]) == {"guide/install.md"}
    assert sorted(map(tuple, hits[hits["query_id"] == "q1"]["heading_path"])) == [
        ("Install",),
        ("Install", "From source"),
        ("Install", "From source", "Windows"),
    ]
    assert hits["score"].isna().all()  # a retriever's documents carry no score
    # the AIMessage's usage_metadata (input/output tokens) as the answer's token counts
    assert outcomes["answer_text"].str.startswith("answer ").all()
    assert outcomes["prompt_tokens"].tolist() == [40, 40] and outcomes["completion_tokens"].tolist() == [7, 7]
    assert retrieval.system.details["packages"].startswith("langchain-core==")
