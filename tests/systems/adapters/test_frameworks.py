"""Real framework output read with the documented mappings, no shim.

Each test builds documents with the real library (the ``frameworks`` extra: haystack-ai,
llama-index-core, langchain-core + langchain-text-splitters), serialises them as the library does
by default, puts them in a response body (through a JSON round trip, as on the wire) and reads it
with ``parse_hits`` and the mapping of ``docs/examples/frameworks/<name>.yaml`` — the same YAML
the framework recipes show. The expected hit fields are written out by hand from the markdown below.

Skipped with a message when a library is missing; ``KEBAB_EVAL_REQUIRE_FRAMEWORKS=1`` (CI) turns
the skip into a failure.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

from kebab_eval_pipeline.chain.settings import load_settings
from kebab_eval_pipeline.systems.wire import ResponseMap, parse_hits
from tests import docs_pages

EXAMPLES = Path(__file__).resolve().parents[3] / "docs" / "examples" / "frameworks"

MARKDOWN = (
    "# Install\n\nRun pip install kebab.\n\n"
    "## From source\n\nClone the repository and build it.\n\n"
    "### Windows\n\nUse WSL to build on windows.\n"
)
FILE_PATH = "/srv/corpus/guide/install.md"  # the example configs' corpus root is /srv/corpus
# each section's full heading path, by its own heading
HEADINGS = {
    "Install": ["Install"],
    "From source": ["Install", "From source"],
    "Windows": ["Install", "From source", "Windows"],
}


def _installed(module: str) -> bool:
    # find_spec of a dotted name imports its parent, and raises when the parent is missing
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def frameworks_or_skip(*modules: str) -> None:
    """Skip when a framework library is missing — unless CI demands it, then fail loudly."""
    missing = [m for m in modules if not _installed(m)]
    if not missing:
        return
    hint = 'pip install -e ".[frameworks]"'
    if os.environ.get("KEBAB_EVAL_REQUIRE_FRAMEWORKS") == "1":
        pytest.fail(f"KEBAB_EVAL_REQUIRE_FRAMEWORKS=1 but {', '.join(missing)} missing ({hint})")
    pytest.skip(f"frameworks extra not installed: {', '.join(missing)} missing ({hint})")


def example_mapping(name: str) -> ResponseMap:
    return load_settings(EXAMPLES / f"{name}.yaml").system.response


def on_the_wire(body: object) -> object:
    return json.loads(json.dumps(body))


def test_each_framework_page_shows_its_example_mapping_verbatim():
    for name in ("haystack", "llamaindex", "langchain"):
        text = (EXAMPLES / f"{name}.yaml").read_text(encoding="utf-8")
        block = text[text.index("  response:\n") :]
        page = docs_pages.page(f"recipes/{name}.md")
        assert f"```yaml\n{block}```" in page, (
            f"recipes/{name}.md lacks the response block of docs/examples/frameworks/{name}.yaml"
        )


def test_haystack_documents_from_to_dict():
    frameworks_or_skip("haystack")
    from haystack import Document
    from haystack.components.preprocessors import MarkdownHeaderSplitter
    from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
    from haystack.document_stores.in_memory import InMemoryDocumentStore

    split = MarkdownHeaderSplitter(keep_headers=True).run(
        documents=[Document(content=MARKDOWN, meta={"file_path": FILE_PATH})]
    )["documents"]
    store = InMemoryDocumentStore()
    store.write_documents(split)
    found = InMemoryBM25Retriever(store).run(query="build on windows", top_k=3)["documents"]
    assert len(found) == 3 and all(d.score is not None for d in found)

    body = on_the_wire({"documents": [d.to_dict() for d in found]})  # Haystack's default (flat) form
    hits, warnings = parse_hits(body, 10, example_mapping("haystack"))
    assert warnings == []
    assert [
        h.model_dump(include={"rank", "chunk_id", "doc_path", "heading_path", "snippet", "score"})
        for h in hits
    ] == [
        {
            "rank": i,
            "chunk_id": d.id,
            "doc_path": "guide/install.md",
            "heading_path": HEADINGS[d.meta["header"]],
            "snippet": d.content,
            "score": d.score,
        }
        for i, d in enumerate(found, start=1)
    ]
    assert {h.score_kind for h in hits} == {"bm25"}
    assert hits[0].heading_path == ["Install", "From source", "Windows"]  # BM25 ranks it first
    assert hits[0].snippet == "### Windows\n\nUse WSL to build on windows.\n"

    # to_dict(flatten=False) keeps meta nested: the same mapping with "meta." in front
    nested = on_the_wire({"documents": [d.to_dict(flatten=False) for d in found]})
    nested_map = ResponseMap(
        hits="documents",
        hit_fields={
            "chunk_id": "id",
            "doc_path": {"path": "meta.file_path", "relative_to": "/srv/corpus"},
            "heading_path": {"concat": ["meta.parent_headers", "meta.header"]},
            "snippet": "content",
            "score_kind": {"const": "bm25"},
        },
    )
    assert parse_hits(nested, 10, nested_map) == (hits, [])


def test_llamaindex_nodes_with_score_from_to_dict():
    frameworks_or_skip("llama_index.core")
    from llama_index.core import Document
    from llama_index.core.node_parser import MarkdownNodeParser, SentenceSplitter
    from llama_index.core.schema import NodeWithScore

    doc = Document(text=MARKDOWN, metadata={"file_path": FILE_PATH, "file_name": "install.md"})
    nodes = MarkdownNodeParser(header_path_separator="\n").get_nodes_from_documents([doc])
    assert [n.metadata["header_path"] for n in nodes] == ["\n", "\nInstall\n", "\nInstall\nFrom source\n"]
    # the LlamaIndex recipe's OwnHeading: the section's own heading (its first line) as metadata
    for n in nodes:
        n.metadata["header"] = n.text.split("\n", 1)[0].lstrip("#").strip()
    scored = [NodeWithScore(node=n, score=s) for n, s in zip(reversed(nodes), (0.9, 0.5, 0.25), strict=True)]

    mapping = example_mapping("llamaindex")
    body = on_the_wire({"nodes": [n.to_dict() for n in scored]})
    hits, warnings = parse_hits(body, 10, mapping)
    assert warnings == []
    assert [
        (h.rank, h.chunk_id, h.doc_path, h.heading_path, h.snippet, h.score, h.score_kind) for h in hits
    ] == [
        (
            1,
            nodes[2].node_id,
            "guide/install.md",
            ["Install", "From source", "Windows"],
            nodes[2].text,
            0.9,
            "bm25",
        ),
        (2, nodes[1].node_id, "guide/install.md", ["Install", "From source"], nodes[1].text, 0.5, "bm25"),
        (3, nodes[0].node_id, "guide/install.md", ["Install"], nodes[0].text, 0.25, "bm25"),
    ]
    assert nodes[2].text == "### Windows\n\nUse WSL to build on windows."
    # pydantic's model_dump gives the same JSON
    assert parse_hits(on_the_wire({"nodes": [n.model_dump(mode="json") for n in scored]}), 10, mapping) == (
        hits,
        [],
    )
    # SentenceSplitter copies the metadata to every piece of a section: the later pieces, whose text
    # no longer starts with the heading, keep the section's full path; a heading holding "/" is whole
    long = "# Build / test\n\n" + " ".join(f"Sentence number {i} about the build." for i in range(60))
    section = MarkdownNodeParser(header_path_separator="\n").get_nodes_from_documents(
        [Document(text=long, metadata={"file_path": FILE_PATH})]
    )
    section[0].metadata["header"] = "Build / test"
    pieces = SentenceSplitter(chunk_size=128, chunk_overlap=0).get_nodes_from_documents(section)
    assert len(pieces) > 2 and not pieces[1].text.startswith("#")
    split, _ = parse_hits(
        on_the_wire({"nodes": [NodeWithScore(node=n, score=1.0).to_dict() for n in pieces]}), 10, mapping
    )
    assert [h.heading_path for h in split] == [["Build / test"]] * len(pieces)
    # a reader that records only the file name: the second path of `first`
    bare = NodeWithScore(
        node=type(nodes[0])(
            text="x", metadata={"file_name": "install.md", "header_path": "\n", "header": "Install"}
        ),
        score=1.0,
    )
    (hit,), _ = parse_hits(on_the_wire({"nodes": [bare.to_dict()]}), 10, mapping)
    assert (hit.doc_path, hit.heading_path) == ("install.md", ["Install"])


def test_langchain_documents_with_scores_from_model_dump():
    frameworks_or_skip("langchain_core", "langchain_text_splitters")
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_core.load import dumpd
    from langchain_core.vectorstores import InMemoryVectorStore
    from langchain_text_splitters import MarkdownHeaderTextSplitter

    splitter = MarkdownHeaderTextSplitter([("#" * n, f"Header {n}") for n in range(1, 7)])
    docs = splitter.split_text(MARKDOWN)
    for d in docs:
        d.metadata["source"] = FILE_PATH  # what a document loader records
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=16))
    store.add_documents(docs)
    found = store.similarity_search_with_score("build on windows", k=3)
    assert len(found) == 3 and all(d.id for d, _ in found)
    by_content = {
        "Run pip install kebab.": ["Install"],
        "Clone the repository and build it.": ["Install", "From source"],
        "Use WSL to build on windows.": ["Install", "From source", "Windows"],
    }

    # a retriever's documents (retriever.invoke), as the documented mapping reads them
    mapping = example_mapping("langchain")
    plain, warnings = parse_hits(on_the_wire({"results": [d.model_dump() for d, _ in found]}), 10, mapping)
    assert warnings == []
    assert [(h.rank, h.chunk_id, h.doc_path, h.heading_path, h.snippet, h.score) for h in plain] == [
        (i, d.id, "guide/install.md", by_content[d.page_content], d.page_content, None)
        for i, (d, _) in enumerate(found, start=1)
    ]

    # similarity_search_with_score's pairs: the LangChain page's "0." before each path, score "1", cosine
    def pair_path(spec):
        if isinstance(spec, str):
            return "0." + spec
        if "concat" in spec:
            return {**spec, "concat": [pair_path(p) for p in spec["concat"]]}
        return {**spec, "path": "0." + spec["path"]}

    pair_fields = {name: pair_path(spec) for name, spec in mapping.hit_fields.items()}
    pair_fields |= {"score": "1", "score_kind": {"const": "cosine"}}
    pair_map = ResponseMap.model_validate({**mapping.model_dump(), "hit_fields": pair_fields})
    pairs, _ = parse_hits(on_the_wire({"results": [[d.model_dump(), s] for d, s in found]}), 10, pair_map)
    assert pairs == [
        h.model_copy(update={"score": s, "score_kind": "cosine"})
        for h, (_, s) in zip(plain, found, strict=True)
    ]
    # langchain's own serialisation (dumpd) nests the same fields under "kwargs"
    kwargs_map = ResponseMap(
        hits="results",
        hit_fields={
            "chunk_id": "kwargs.id",
            "doc_path": {"path": "kwargs.metadata.source", "relative_to": "/srv/corpus"},
            "heading_path": {"concat": [f"kwargs.metadata.Header {n}" for n in range(1, 7)]},
            "snippet": "kwargs.page_content",
        },
    )
    dumped, _ = parse_hits(on_the_wire({"results": [dumpd(d) for d, _ in found]}), 10, kwargs_map)
    assert dumped == plain
