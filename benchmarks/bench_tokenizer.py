"""What the reference tokenizer's Korean handling buys, measured on the bundled demo golden set.

Builds the demo corpus's lexical index once per tokenizer variant and scores the demo golden
set (retrieval only) per language:

* ``mixed-ko-en-1`` — the shipped tokenizer: Hangul runs kept whole *and* split into
  character bigrams; English stopwords dropped and a light Porter stem.
* ``runs-only`` — the same without Hangul bigrams (a Korean word must match exactly,
  particles and endings included: 김치를 ≠ 김치).
* ``bigrams-only`` — Hangul bigrams without the whole run (the classic CJK analyzer).
* ``whitespace`` — lowercase ``str.split``, the naive baseline.

Each variant is handed to ``ReferenceIndex.build`` as a tokenizer object (chunks and queries go
through it). ``benchmarks/bench_korean_tokenizer.py`` compares ``words+bigrams`` with ``kiwi``.

Run: ``python benchmarks/bench_tokenizer.py``. Takes a few seconds; prints hit@1, hit@5 and
MRR for Korean and English queries under each variant.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from kebab_eval_pipeline.chain import pipeline
from kebab_eval_pipeline.chain.artifacts import RetrievalArtifact
from kebab_eval_pipeline.chain.settings import RunSettings
from kebab_eval_pipeline.foundation.demo import DEMO_CORPUS
from kebab_eval_pipeline.metrics.aggregate import breakdowns
from kebab_eval_pipeline.reference.index import ReferenceIndex
from kebab_eval_pipeline.reference.tokenize import (
    EN_STOPWORDS,
    KO_STOPWORDS,
    hangul_bigrams,
    is_hangul,
    stem,
    tokenize,
    word_runs,
)
from kebab_eval_pipeline.reference.tokenizers import Tokenizer, WordsBigramsTokenizer
from kebab_eval_pipeline.systems.reference_adapter import ReferenceSystem
from kebab_eval_pipeline.systems.runner import run_golden


def _variant(keep_run: bool, bigrams: bool) -> Callable[[str], list[str]]:
    def tok(text: str) -> list[str]:
        out: list[str] = []
        for run in word_runs(text):
            if is_hangul(run):
                if run in KO_STOPWORDS:
                    continue
                if keep_run and (len(run) > 2 or not bigrams):
                    out.append(run)
                if bigrams:
                    out.extend(hangul_bigrams(run))
            elif run not in EN_STOPWORDS:
                out.append(stem(run))
        return out

    return tok


class _Variant(WordsBigramsTokenizer):
    """words+bigrams with another ``tokenize`` for BM25 (the gate is not run here)."""

    def __init__(self, name: str, tok: Callable[[str], list[str]]) -> None:
        self.version = f"bench-{name}"
        self._tok = tok

    def tokenize(self, text: str) -> list[str]:
        return self._tok(text)


VARIANTS: dict[str, Callable[[str], list[str]]] = {
    "mixed-ko-en-1": tokenize,
    "runs-only": _variant(keep_run=True, bigrams=False),
    "bigrams-only": _variant(keep_run=False, bigrams=True),
    "whitespace": lambda text: text.lower().split(),
}


def main() -> None:
    settings = RunSettings.model_validate({"answers": False})
    golden = pipeline.load_golden_artifact(settings)
    k = max(max(settings.k), settings.mrr_cutoff)
    print(f"demo golden set: {len(golden.queries)} queries; retrieval only, k={k}\n")
    print(f"{'tokenizer':<15} {'lang':<4} {'n':>3} {'hit@1':>7} {'hit@5':>7} {'mrr':>7}   build+run")
    for name, tok in VARIANTS.items():
        tokenizer: Tokenizer = _Variant(name, tok)
        started = time.perf_counter()
        system = ReferenceSystem(ReferenceIndex.build(DEMO_CORPUS, tokenizer=tokenizer))
        results = run_golden(system, golden.queries, k=k, answers=False)
        retrieval = RetrievalArtifact(results, {})
        scores = pipeline.score(settings, golden, retrieval).scores
        elapsed = time.perf_counter() - started
        by_lang = breakdowns(scores, settings.k)
        by_lang = by_lang[by_lang["dimension"] == "lang"]
        for lang in ("ko", "en"):
            row = by_lang[by_lang["value"] == lang]
            metric = dict(zip(row["metric"], row["score"], strict=True))
            n = int((scores["lang"] == lang).sum())
            print(
                f"{name:<15} {lang:<4} {n:>3} {metric['hit@1']:>7.4f} {metric['hit@5']:>7.4f} "
                f"{metric['mrr']:>7.4f}   {elapsed:.2f}s"
            )


if __name__ == "__main__":
    main()
