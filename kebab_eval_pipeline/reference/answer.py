"""Deterministic extractive answerer with a score gate (SPEC §4.1, answers).

No language model: the answer is up to three sentences copied from the top
retrieved chunks, each followed by a ``[#n]`` marker naming the hit rank it
came from. Being deterministic is the point: answer metrics (citation
correctness, refusal behaviour) can be tested against exact expectations.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol

from kebab_eval_pipeline.contract import Answer, Citation, Hit
from kebab_eval_pipeline.reference.tokenize import QueryTerm
from kebab_eval_pipeline.reference.tokenizers import DEFAULT_TOKENIZER, Tokenizer, get_tokenizer

PROMPT_TEMPLATE_VERSION = "extractive-1"
# Calibrated (`kebab-eval ref calibrate`, benchmarks/bench_refusal_gate.py) on the demo and both
# kebab-docs golden sets pooled (174 answerable, 31 unanswerable, lexical mode): the lowest
# over-refusal with refusal correctness >= 0.9 is top_hit at 0.35 (over-refusal 0.33). No feature
# and threshold reaches over-refusal <= 0.15 at that refusal correctness on the held-out kebab-docs
# set (best: best_of_top3 >= 0.28, 0.27), and what lowers it there lets the demo answer most of
# its unanswerable questions; so the default stays, and a corpus gets its own gate by calibrating.
DEFAULT_GATE_THRESHOLD = 0.35
#: What the score gate thresholds (see :class:`ExtractiveAnswerer`): the IDF-weighted share of the
#: query's content words covered by the top hit, by the best of the top three hits, or by the
#: top three hits together. ``kebab-eval ref calibrate`` sweeps each against a golden set.
GATE_FEATURES: tuple[str, ...] = ("top_hit", "best_of_top3", "top3_union")
DEFAULT_GATE_FEATURE = "top_hit"
_FEATURE_WORDS = {
    "top_hit": "top hit covers",
    "best_of_top3": "best of the top 3 hits covers",
    "top3_union": "top 3 hits together cover",
}
REFUSAL_TEXT = "I cannot answer this from the corpus: the retrieved passages do not cover the question."

_MAX_SENTENCE_CHARS = 300
_HEADING = re.compile(r"^ {0,3}#{1,6}(\s|$)")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)]|>)\s+")
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+")


class TermStats(Protocol):
    """What the gate needs from the index: document frequency and IDF of a token."""

    def doc_freq(self, token: str) -> int: ...

    def idf(self, token: str) -> float: ...


@dataclass(frozen=True)
class Evidence:
    """A retrieved hit together with its full chunk text (the hit's snippet may be truncated)."""

    hit: Hit
    text: str


class ExtractiveAnswerer:
    """Pick query-matching sentences from the top chunks, or refuse when evidence is weak.

    **The score gate.** Raw BM25 scores are not comparable across queries (they
    grow with query length and corpus statistics), so a fixed score threshold
    would refuse long questions and accept short off-topic ones. The gate uses
    a scale-free signal instead: *the share of the query's IDF mass that the top
    chunk covers*. Each distinct content word of the query (see
    :func:`~kebab_eval_pipeline.reference.tokenize.query_terms`) weighs
    its IDF — rare words matter more than common ones, and a word the corpus
    never uses weighs the most, because it is the clearest sign the corpus
    cannot answer. The top chunk (its heading path and text) covers a word when
    it contains the word's token (an English stem; for ``words+bigrams`` a Korean
    word's leading bigram, for ``kiwi`` the morpheme itself).

    ``tokenizer`` must be the one that built the index behind ``stats``: the gate
    looks its terms' tokens up in that index's vocabulary (default ``words+bigrams``).
    ``coverage = Σ idf·covered / Σ idf`` lies in [0, 1]; below ``threshold``
    the answerer refuses. No hits, or a query with no content words, also
    refuses. ``feature`` picks which hits are measured (:data:`GATE_FEATURES`):
    the top hit alone (``top_hit``), the best-covering of the top three
    (``best_of_top3``: a right answer at rank 2 is not refused), or the top
    three together (``top3_union``: a question whose words are spread over
    several passages).
    """

    def __init__(
        self,
        stats: TermStats,
        threshold: float = DEFAULT_GATE_THRESHOLD,
        max_sentences: int = 3,
        max_chunks: int = 3,
        min_relative_score: float = 0.5,
        feature: str = DEFAULT_GATE_FEATURE,
        tokenizer: Tokenizer | None = None,
    ) -> None:
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"gate threshold must be in [0, 1], got {threshold}")
        if feature not in GATE_FEATURES:
            raise ValueError(f"unknown gate feature {feature!r}; expected one of {', '.join(GATE_FEATURES)}")
        self.stats = stats
        self.threshold = threshold
        self.feature = feature
        self.max_sentences = max_sentences
        self.max_chunks = max_chunks
        self.min_relative_score = min_relative_score
        self.tokenizer = tokenizer or get_tokenizer(DEFAULT_TOKENIZER)

    def term_weights(self, query: str) -> list[tuple[QueryTerm, float]]:
        """Each content term of ``query`` with its IDF weight.

        A term's weight is the largest IDF among its tokens that the corpus
        contains, or the unseen-token IDF (the largest possible) when the
        corpus contains none of them.
        """
        weighted = []
        for term in self.tokenizer.query_terms(query):
            seen = [self.stats.idf(t) for t in term.tokens if self.stats.doc_freq(t) > 0]
            weight = max(seen) if seen else self.stats.idf(term.tokens[0])
            weighted.append((term, weight))
        return weighted

    def coverage(self, query: str, text: str) -> float | None:
        """Share of ``query``'s IDF mass that ``text`` covers, in [0, 1]; None if the query has no terms."""
        return _coverage(self.term_weights(query), set(self.tokenizer.tokenize(text)))

    def gate_features(self, query: str, evidence: list[Evidence]) -> dict[str, float] | None:
        """Every gate feature's value for ``query`` over ``evidence`` (hits in rank order), each in
        [0, 1]; None when the gate refuses whatever the threshold (no hits, or no content words)."""
        weights = self.term_weights(query)
        if not evidence or not weights:
            return None
        return _gate_features(weights, evidence, self.tokenizer)

    def answer(self, query: str, evidence: list[Evidence]) -> Answer:
        """Answer ``query`` from ``evidence`` (hits in rank order with their chunk text).

        Output: an :class:`Answer` with ``[#n]``-marked sentences (n = hit rank)
        and one :class:`Citation` per cited hit, ``grounded=True``; or a refusal
        (``refused=True``, ``grounded=False``, ``refusal_reason`` starting with
        ``"score_gate: "``, no citations).

        Sentences are scored by the same IDF-weighted term coverage as the gate;
        the best ``max_sentences`` from the first ``max_chunks`` hits that score
        at least ``min_relative_score`` × the best sentence are kept (ties:
        better hit, then earlier sentence) and printed in hit/text order.
        If the top chunk matched only through its heading path, its first
        sentence is used.
        """
        weights = self.term_weights(query)
        if not evidence:
            return _refusal("score_gate: no hits")
        if not weights:
            return _refusal("score_gate: query has no content words")
        top = evidence[0]
        cov = _gate_features(weights, evidence, self.tokenizer, only=self.feature)[self.feature]
        if cov < self.threshold:
            return _refusal(
                f"score_gate: {_FEATURE_WORDS[self.feature]} {cov:.2f} of the query's IDF mass "
                f"(threshold {self.threshold:.2f})"
            )

        candidates: list[tuple[float, int, int, str, Evidence]] = []
        for ev_pos, ev in enumerate(evidence[: self.max_chunks]):
            for s_pos, (sentence, tokens) in enumerate(_sentences_with_tokens(ev.text, self.tokenizer)):
                score = _coverage(weights, tokens, absolute=True) or 0.0
                if score > 0:
                    candidates.append((score, ev_pos, s_pos, sentence, ev))
        candidates.sort(key=lambda c: (-c[0], c[1], c[2]))
        if candidates:
            # A sentence sharing one common word with the query is not part of
            # the answer; keep only those close to the best one.
            floor = candidates[0][0] * self.min_relative_score
            candidates = [c for c in candidates if c[0] >= floor]
        chosen = sorted(candidates[: self.max_sentences], key=lambda c: (c[1], c[2]))
        if not chosen:
            first = split_sentences(top.text)
            if not first:
                return _refusal("score_gate: top hit has no extractable sentence")
            chosen = [(0.0, 0, 0, first[0], top)]

        parts: list[str] = []
        citations: list[Citation] = []
        cited: set[int] = set()
        for _, _, _, sentence, ev in chosen:
            marker = f"[#{ev.hit.rank}]"
            parts.append(f"{_clip(sentence)} {marker}")
            if ev.hit.rank not in cited:
                cited.add(ev.hit.rank)
                citations.append(
                    Citation(
                        chunk_id=ev.hit.chunk_id,
                        doc_path=ev.hit.doc_path,
                        line_start=ev.hit.line_start,
                        line_end=ev.hit.line_end,
                        marker=marker,
                    )
                )
        return Answer(
            text=" ".join(parts),
            citations=citations,
            grounded=True,
            refused=False,
            prompt_template_version=PROMPT_TEMPLATE_VERSION,
        )


def split_sentences(text: str) -> list[str]:
    """Candidate answer sentences of a chunk, in order.

    Heading lines and fence markers are dropped (a heading is a label, not an
    answer); paragraph lines are joined before splitting at ``. ! ?`` so a
    hard-wrapped sentence stays whole; list items, quotes and table rows start
    a new sentence with their marker stripped; lines inside a code fence are
    one candidate each. Empty text gives ``[]``.
    """
    paragraphs: list[str] = []
    current: list[str] = []
    in_fence = False

    def flush() -> None:
        if current:
            paragraphs.append(" ".join(current))
            current.clear()

    for raw in text.split("\n"):
        line = raw.strip()
        if _FENCE.match(raw):
            flush()
            in_fence = not in_fence
            continue
        if in_fence:
            if line:
                paragraphs.append(line)
            continue
        if not line or _HEADING.match(raw):
            flush()
            continue
        item = _ITEM.match(raw)
        if item or line.startswith("|"):
            flush()
            line = raw[item.end() :].strip() if item else line
        current.append(line)
    flush()

    sentences: list[str] = []
    for paragraph in paragraphs:
        sentences.extend(s for s in _SENTENCE_END.split(paragraph) if s.strip())
    return sentences


# The same chunks come back for many queries of a run; splitting and tokenizing their
# sentences once is most of an ask's cost (measured: tokenize was 60% of ask time).
# Keyed by the tokenizer too (one instance per tokenizer and process, see get_tokenizer).
@lru_cache(maxsize=8192)
def _sentences_with_tokens(text: str, tokenizer: Tokenizer) -> tuple[tuple[str, frozenset[str]], ...]:
    return tuple((sentence, frozenset(tokenizer.tokenize(sentence))) for sentence in split_sentences(text))


@lru_cache(maxsize=8192)
def _token_set(text: str, tokenizer: Tokenizer) -> frozenset[str]:
    return frozenset(tokenizer.tokenize(text))


def _coverage(
    weights: list[tuple[QueryTerm, float]], tokens: frozenset[str] | set[str], absolute: bool = False
) -> float | None:
    total = sum(w for _, w in weights)
    if not weights or total <= 0:
        return None
    covered = sum(w * sum(t in tokens for t in term.tokens) / len(term.tokens) for term, w in weights)
    return covered if absolute else covered / total


def _gate_features(
    weights: list[tuple[QueryTerm, float]],
    evidence: list[Evidence],
    tokenizer: Tokenizer,
    only: str | None = None,
) -> dict[str, float]:
    """The gate features (all, or ``only`` one) of a non-empty ``evidence`` list, its texts
    tokenized by ``tokenizer`` (the index's)."""
    top3 = [_token_set(_context_text(ev), tokenizer) for ev in evidence[:3]]
    out: dict[str, float] = {}
    if only in (None, "top_hit"):
        out["top_hit"] = _coverage(weights, top3[0]) or 0.0
    if only in (None, "best_of_top3"):
        out["best_of_top3"] = max(_coverage(weights, tokens) or 0.0 for tokens in top3)
    if only in (None, "top3_union"):
        out["top3_union"] = _coverage(weights, frozenset().union(*top3)) or 0.0
    return out


def _context_text(ev: Evidence) -> str:
    # The gate looks at what retrieval looked at: heading path plus chunk text.
    return "\n".join([*ev.hit.heading_path, ev.text])


def _clip(sentence: str) -> str:
    return sentence if len(sentence) <= _MAX_SENTENCE_CHARS else sentence[: _MAX_SENTENCE_CHARS - 1] + "…"


def _refusal(reason: str) -> Answer:
    return Answer(
        text=REFUSAL_TEXT,
        citations=[],
        grounded=False,
        refused=True,
        refusal_reason=reason,
        prompt_template_version=PROMPT_TEMPLATE_VERSION,
    )
