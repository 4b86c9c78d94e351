"""words+bigrams against kiwi (Korean morphemes), lexical mode, on the golden sets we ship.

For each golden set — the bundled demo set, the kebab-docs example set over its 45-document
corpus, and the kebab-docs holdout set when ``docs/examples/kebab-docs/golden-holdout.yaml``
exists — and each tokenizer, builds the reference index (timed), runs every query in lexical
mode, and prints per language (ko, en) hit@5 and MRR, the answer gate's refusals (answerable
questions refused / unanswerable ones refused, at the shipped threshold), the index build
time and the search throughput (queries/s, best of 5 passes over the set), each with its
ratio to ``words+bigrams``.

Tokenizers: ``words+bigrams`` (the default), ``kiwi`` (the shipped rules) and kiwi rule
variants (see :class:`~kebab_eval_pipeline.reference.tokenizers.KiwiRules`):
``kiwi+nojoin`` (no joined compounds), ``kiwi+oovbi`` (bigrams of words Kiwi does not know),
``kiwi+nbi`` (bigrams of nouns of 3+ syllables), ``kiwi+nbi+nojoin``, ``kiwi+mag`` (adverbs
kept), ``kiwi+wb`` (morphemes plus words+bigrams' Hangul tokens), ``kiwi+multi`` (Kiwi's
multi-word dictionary loaded).

Needs the korean extra (``pip install -e ".[korean]"``). Run from the repository root:
``python benchmarks/bench_korean_tokenizer.py`` (about a minute on two cores). The build time
of the first kiwi index includes loading Kiwi's model once (printed separately).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from kebab_eval_pipeline.chain import pipeline
from kebab_eval_pipeline.chain.artifacts import RetrievalArtifact
from kebab_eval_pipeline.chain.settings import load_settings
from kebab_eval_pipeline.metrics.aggregate import breakdowns
from kebab_eval_pipeline.reference.index import ReferenceIndex
from kebab_eval_pipeline.reference.tokenizers import (
    KiwiRules,
    KiwiTokenizer,
    Tokenizer,
    get_tokenizer,
    kiwi_analyser,
)
from kebab_eval_pipeline.systems.reference_adapter import ReferenceSystem
from kebab_eval_pipeline.systems.runner import run_golden

ROOT = Path(__file__).resolve().parents[1]
KEBAB_DOCS = ROOT / "docs/examples/kebab-docs"
PASSES = 5  # search passes over a golden set; the fastest is reported (the machine is shared)


def tokenizers() -> dict[str, Tokenizer]:
    return {
        "words+bigrams": get_tokenizer("words+bigrams"),
        "kiwi": get_tokenizer("kiwi"),
        "kiwi+nojoin": KiwiTokenizer(KiwiRules(join_compounds=False)),
        "kiwi+oovbi": KiwiTokenizer(KiwiRules(oov_bigrams=True)),
        "kiwi+nbi": KiwiTokenizer(KiwiRules(noun_bigrams=True)),
        "kiwi+nbi+nojoin": KiwiTokenizer(KiwiRules(noun_bigrams=True, join_compounds=False)),
        "kiwi+mag": KiwiTokenizer(KiwiRules(adverbs=True)),
        "kiwi+wb": KiwiTokenizer(KiwiRules(word_bigrams=True)),
        "kiwi+multi": KiwiTokenizer(KiwiRules(multi_dict=True)),
    }


def golden_sets(kebab_docs: Path) -> list[tuple[str, object]]:
    config = kebab_docs / "lexical.yaml"
    sets = [
        ("demo", load_settings(None, {"answers": False})),
        ("kebab-docs", load_settings(config, {"answers": False})),
    ]
    holdout = kebab_docs / "golden-holdout.yaml"
    if holdout.is_file():
        sets.append(("kebab-holdout", load_settings(config, {"answers": False, "golden": str(holdout)})))
    return sets


def measure(settings, golden, tokenizer: Tokenizer) -> dict[str, float]:
    corpus = Path(settings.system.corpus) if settings.system.corpus else None
    if corpus is None:
        from kebab_eval_pipeline.foundation.demo import DEMO_CORPUS

        corpus = DEMO_CORPUS
    started = time.perf_counter()
    index = ReferenceIndex.build(corpus, chunk_size=settings.system.chunk_size, tokenizer=tokenizer)
    build_s = time.perf_counter() - started
    k = max(max(settings.k), settings.mrr_cutoff)
    queries = list(golden.queries["query"])
    best = float("inf")
    for _ in range(PASSES):
        started = time.perf_counter()
        for q in queries:
            index.search(q, k=k)
        best = min(best, time.perf_counter() - started)
    system = ReferenceSystem(index)
    results = run_golden(system, golden.queries, k=k, answers=False)
    scores = pipeline.score(settings, golden, RetrievalArtifact(results, {})).scores
    by_lang = breakdowns(scores, settings.k)
    by_lang = by_lang[by_lang["dimension"] == "lang"]
    out: dict[str, float] = {"build_s": build_s, "qps": len(queries) / best}
    for lang in ("ko", "en"):
        row = by_lang[by_lang["value"] == lang]
        metric = dict(zip(row["metric"], row["score"], strict=True))
        out[f"{lang}_n"] = int((scores["lang"] == lang).sum())
        out[f"{lang}_hit@5"] = metric.get("hit@5", float("nan"))
        out[f"{lang}_mrr"] = metric.get("mrr", float("nan"))
    # The answer gate at the shipped threshold, on the top-5 hits (what `ref ask` uses).
    refused = {True: [0, 0], False: [0, 0]}
    for q, answerable in zip(queries, golden.queries["answerable"], strict=True):
        answer = index.ask(q, index.search(q, k=5))
        refused[bool(answerable)][0] += answer.refused
        refused[bool(answerable)][1] += 1
    out["refused_answerable"] = f"{refused[True][0]}/{refused[True][1]}"
    out["refused_unanswerable"] = f"{refused[False][0]}/{refused[False][1]}"
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", nargs="*", help="tokenizer names to run (default: all)")
    parser.add_argument(
        "--kebab-docs",
        type=Path,
        default=KEBAB_DOCS,
        help="the kebab-docs example folder (lexical.yaml, golden.yaml, golden-holdout.yaml if any)",
    )
    args = parser.parse_args()
    # Load Kiwi once (per dictionary setting), outside every timed build.
    for multi in (False, True):
        started = time.perf_counter()
        kiwi_analyser(multi)
        elapsed = time.perf_counter() - started
        print(f"Kiwi load (multi-word dictionary {'on' if multi else 'off'}): {elapsed:.2f}s")
    print()
    # Import bm25s and build once untimed, so the first timed build does not pay for imports.
    from kebab_eval_pipeline.foundation.demo import DEMO_CORPUS

    ReferenceIndex.build(DEMO_CORPUS)
    toks = tokenizers()
    if args.only:
        toks = {n: t for n, t in toks.items() if n in args.only}
    for set_name, settings in golden_sets(args.kebab_docs):
        golden = pipeline.load_golden_artifact(settings)
        print(
            f"== {set_name}: {len(golden.queries)} queries, lexical, chunk_size {settings.system.chunk_size}"
        )
        header = (
            f"{'tokenizer':<14} {'ko n':>4} {'ko hit@5':>8} {'ko mrr':>7} {'en n':>4} {'en hit@5':>8} "
            f"{'en mrr':>7} {'build s':>8} {'q/s':>7} {'refused ans':>11} {'refused unans':>13}"
        )
        print(header)
        base = None
        rows = {}
        for name, tok in toks.items():
            m = measure(settings, golden, tok)
            rows[name] = m
            base = base or m
            print(
                f"{name:<14} {m['ko_n']:>4} {m['ko_hit@5']:>8.4f} {m['ko_mrr']:>7.4f} {m['en_n']:>4} "
                f"{m['en_hit@5']:>8.4f} {m['en_mrr']:>7.4f} {m['build_s']:>8.2f} {m['qps']:>7.0f} "
                f"{m['refused_answerable']:>11} {m['refused_unanswerable']:>13}"
            )
        print("ratios to words+bigrams (ko mrr, en mrr, build time, q/s):")
        for name, m in rows.items():
            if m is base:
                continue
            ratio = [
                m["ko_mrr"] / base["ko_mrr"] if base["ko_mrr"] else float("nan"),
                m["en_mrr"] / base["en_mrr"] if base["en_mrr"] else float("nan"),
                m["build_s"] / base["build_s"],
                m["qps"] / base["qps"],
            ]
            print(f"  {name:<14} " + "  ".join(f"{r:6.2f}x" for r in ratio))
        print()


if __name__ == "__main__":
    main()
