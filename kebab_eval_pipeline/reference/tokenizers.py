"""Named tokenizers of the reference system: ``words+bigrams`` (the default) and ``kiwi``.

A :class:`Tokenizer` gives BM25 its tokens (:meth:`~Tokenizer.tokenize`) and the answer score
gate its query terms (:meth:`~Tokenizer.query_terms`). An index records the name and version of
the tokenizer that built it, and queries against it must be tokenized by the same one (a query
token the index never produced matches nothing), so :func:`get_tokenizer` is how the index, the
gate and the CLI all find it.

* ``words+bigrams`` — :mod:`.tokenize`: Hangul runs kept whole plus their character bigrams;
  English stopwords dropped and a light Porter stem. No dependency. Version ``mixed-ko-en-1``.
* ``kiwi`` — Korean analysed into morphemes by Kiwi (the ``korean`` extra: ``kiwipiepy`` and
  ``kiwipiepy-model``, which carries the model in its wheel, so nothing is downloaded at run
  time). Content morphemes are kept: nouns, verb/adjective stems as their dictionary form
  (``담그는`` → ``담그다``, ``하얀`` → ``하얗다``) and roots. Latin and digit runs go through
  exactly the ``words+bigrams`` path, so English queries tokenize as before.
"""

from __future__ import annotations

import threading
import warnings
from dataclasses import dataclass
from typing import Any

from kebab_eval_pipeline.reference.tokenize import (
    _RUN,
    EN_STOPWORDS,
    GATE_EN_STOPWORDS,
    KO_STOPWORDS,
    TOKENIZER_VERSION,
    QueryTerm,
    hangul_bigrams,
    is_hangul,
    normalize,
    query_terms,
    stem,
    tokenize,
)

DEFAULT_TOKENIZER = "words+bigrams"
KIWI = "kiwi"
TOKENIZER_NAMES = (DEFAULT_TOKENIZER, KIWI)
KOREAN_EXTRA_HINT = 'pip install -e ".[korean]"'

# Bump when the kiwi token rules below change: an index built by older rules must be rebuilt.
KIWI_RULES_VERSION = "kiwi-1"


class Tokenizer:
    """A named, versioned tokenizer: ``tokenize`` feeds BM25, ``query_terms`` the answer gate.

    ``version`` names everything that decides the tokens (rules and, for ``kiwi``, the library
    and model versions); two tokenizers with the same version give the same tokens.
    """

    name: str
    version: str

    def tokenize(self, text: str) -> list[str]:
        """Tokens of ``text`` in text order, repeats kept (term frequency matters to BM25)."""
        raise NotImplementedError

    def query_terms(self, text: str) -> list[QueryTerm]:
        """Distinct content terms of a query (first-occurrence order), each with the index
        token(s) that evidence it; what the answer gate weighs."""
        raise NotImplementedError


class WordsBigramsTokenizer(Tokenizer):
    """Today's tokenizer (:mod:`.tokenize`), under the name ``words+bigrams``."""

    name = DEFAULT_TOKENIZER
    version = TOKENIZER_VERSION

    def tokenize(self, text: str) -> list[str]:
        return tokenize(text)

    def query_terms(self, text: str) -> list[QueryTerm]:
        return query_terms(text)


# Kiwi (Sejong-style) tags kept as content. Nouns: common, proper, numerals. NP (pronouns:
# 무엇, 이것, 여기) and NNB (bound nouns: 것, 수, 때) carry no topic. Stems of verbs (VV) and
# adjectives (VA) with their irregular variants (VV-I, VA-R, ...), and roots (XR: 깨끗 of
# 깨끗하다). Hanja (SH) is left to the word-run path, like Latin: it is not Hangul.
_NOUN_TAGS = frozenset({"NNG", "NNP", "NR"})
_STEM_TAGS = frozenset({"VV", "VA"})
_ROOT_TAGS = frozenset({"XR"})
# Dictionary forms of verbs/adjectives that appear in almost every question or sentence
# ("…해야 하나요", "…있나요", "어떻게") and say nothing about its topic.
KIWI_STOP_LEMMAS = frozenset(
    {"하다", "되다", "있다", "않다", "어떻다", "이렇다", "그렇다", "저렇다", "알리다", "주다"}
)
# Particles Kiwi sometimes tags as a one-syllable noun after a number or a Latin word
# ("0.30을" → 0.30 + 을/NNG).
_PARTICLE_NOUNS = frozenset({"을", "를", "은", "는", "의"})


@dataclass(frozen=True)
class KiwiRules:
    """What the ``kiwi`` tokenizer emits for Hangul (the shipped choice is the default; the
    others exist to be measured, see ``benchmarks/bench_korean_tokenizer.py``).

    ``join_compounds``: also emit adjacent nouns joined (``소금`` + ``물`` → also ``소금물``),
    so a compound written solid matches itself as well as its parts. ``oov_bigrams``: also
    emit the character bigrams of a morpheme Kiwi did not know (its ``oov`` flag).
    ``noun_bigrams``: also emit the character bigrams of every noun of three or more
    syllables (``소금물`` → also ``소금``, ``금물``): Kiwi keeps a compound its dictionary
    knows whole, so without them ``소금`` would not meet ``소금물``.
    ``adverbs``: keep general adverbs (MAG: ``쭈글쭈글``, but also ``다시``, ``너무``).
    ``word_bigrams``: also emit ``words+bigrams``' tokens for every Hangul run (a union).
    ``multi_dict``: load Kiwi's multi-word dictionary (see :func:`kiwi_analyser`).
    """

    join_compounds: bool = True
    noun_bigrams: bool = False
    oov_bigrams: bool = False
    adverbs: bool = False
    word_bigrams: bool = False
    multi_dict: bool = False

    def tag(self) -> str:
        """Short suffix naming the non-default rules (empty for the default)."""
        parts = [
            name
            for name, on in (
                ("nojoin", not self.join_compounds),
                ("nbi", self.noun_bigrams),
                ("oovbi", self.oov_bigrams),
                ("mag", self.adverbs),
                ("wb", self.word_bigrams),
                ("multi", self.multi_dict),
            )
            if on
        ]
        return "+".join(parts)


_KIWI_LOCK = threading.Lock()
_KIWI: dict[bool, Any] = {}


def kiwi_available() -> bool:
    """True when ``kiwipiepy`` and its model package import (the ``korean`` extra)."""
    try:
        import kiwipiepy  # noqa: F401
        import kiwipiepy_model  # noqa: F401
    except ImportError:
        return False
    return True


def _kiwi_versions() -> tuple[str, str]:
    try:
        import kiwipiepy
        import kiwipiepy_model
    except ImportError:
        raise ValueError(
            f"tokenizer 'kiwi' needs the korean extra (kiwipiepy, kiwipiepy-model): {KOREAN_EXTRA_HINT}"
        ) from None
    return kiwipiepy.__version__, getattr(kiwipiepy_model, "__version__", "unknown")


def kiwi_analyser(multi_dict: bool = False) -> Any:
    """The process's ``kiwipiepy.Kiwi`` instance, built on first use and then reused (loading
    the model takes seconds, so it is never done at import or more than once per process).

    ``multi_dict``: also load Kiwi's multi-word dictionary (Wikipedia titles spanning several
    words). Off by default: it more than doubles the load time and adds ~190 MB of memory (see
    :class:`KiwiRules`).
    """
    kiwi = _KIWI.get(multi_dict)
    if kiwi is None:
        with _KIWI_LOCK:
            kiwi = _KIWI.get(multi_dict)
            if kiwi is None:
                from kiwipiepy import Kiwi

                # Single-threaded: texts are analysed one at a time, and a thread pool per process
                # would compete for the cores with pytest-xdist / Dagster workers. kiwipiepy warns
                # that 0 meant "all cores" before 0.21; here it means one thread, as documented.
                with warnings.catch_warnings():
                    warnings.filterwarnings("ignore", "behavior of `num_workers=0`", DeprecationWarning)
                    kiwi = Kiwi(num_workers=0, load_multi_dict=multi_dict)
                kiwi.tokenize("")  # Kiwi finishes loading lazily on its first analysis
                _KIWI[multi_dict] = kiwi
    return kiwi


class KiwiTokenizer(Tokenizer):
    """Korean morphemes by Kiwi; Latin/digit runs as ``words+bigrams`` does them.

    ``tokenize("김치를 담그는 법")`` → ``["김치", "담그다", "법"]``: particles and endings are
    gone, the stem is in dictionary form, so ``김치는`` / ``김치를`` / ``김치`` meet exactly.

    Thread safety: the Kiwi instance is shared by the process and each analysis holds a lock.
    Kiwi's documentation does not promise concurrent calls on one instance are safe, and the
    reference system analyses one text at a time anyway.
    """

    name = KIWI

    def __init__(self, rules: KiwiRules | None = None) -> None:
        self.rules = rules or KiwiRules()
        library, model = _kiwi_versions()  # ValueError naming the extra when it is missing
        suffix = f"+{self.rules.tag()}" if self.rules.tag() else ""
        self.version = f"{KIWI_RULES_VERSION}{suffix}+kiwipiepy-{library}+model-{model}"

    def _korean(self, text: str) -> list[tuple[int, str, tuple[str, ...]]]:
        """Content units of normalised ``text`` as ``(offset, surface, tokens)``, in text order.

        A unit is one stem or root (one token), or one run of adjacent nouns: its nouns, then
        (``join_compounds``) the run joined, then (``noun_bigrams`` / ``oov_bigrams``) bigrams.
        BM25 gets every token; the gate weighs a unit once, so a compound Kiwi split into
        three tokens (``워크`` + ``스페이스`` + ``워크스페이스``) is one query term, not three.
        """
        kiwi = kiwi_analyser(self.rules.multi_dict)
        with _KIWI_LOCK:
            analysed = kiwi.tokenize(text)
        rules = self.rules
        units: list[tuple[int, str, tuple[str, ...]]] = []
        nouns: list[Any] = []  # the current run of adjacent noun morphemes

        def flush() -> None:
            if not nouns:
                return
            forms = [n.form for n in nouns]
            tokens = [f for f in forms if f not in KO_STOPWORDS and f not in _PARTICLE_NOUNS]
            if rules.join_compounds and len(forms) > 1:
                tokens.append("".join(forms))
            for n in nouns:
                if len(n.form) > 2 and (rules.noun_bigrams or (rules.oov_bigrams and n.oov)):
                    tokens.extend(hangul_bigrams(n.form))
            tokens = [t for t in tokens if is_hangul(t)]
            if tokens:
                units.append((nouns[0].start, "".join(forms), tuple(tokens)))
            nouns.clear()

        for tok in analysed:
            tag = tok.tag.split("-", 1)[0]  # VV-I, VA-R: irregular variants of VV, VA
            if tag in _NOUN_TAGS:
                # Without join_compounds every noun is a unit of its own.
                if nouns and (not rules.join_compounds or tok.start != nouns[-1].end):
                    flush()
                nouns.append(tok)
                continue
            flush()
            if tag in _STEM_TAGS:
                token = tok.lemma
                if token in KIWI_STOP_LEMMAS:
                    continue
            elif tag in _ROOT_TAGS or (rules.adverbs and tag == "MAG" and tok.form not in KO_STOPWORDS):
                token = tok.form
            else:
                # Particles, endings, and Kiwi's own Latin, number and symbol tokens: those runs
                # are handled by the caller exactly as words+bigrams does, so English is unchanged.
                continue
            if is_hangul(token):
                units.append((tok.start, token, (token,)))
        flush()
        return units

    def tokenize(self, text: str) -> list[str]:
        norm = normalize(text)
        positioned: list[tuple[int, str]] = []
        has_hangul = False
        for match in _RUN.finditer(norm):
            run = match.group()
            if is_hangul(run):
                has_hangul = True
                if self.rules.word_bigrams and run not in KO_STOPWORDS:
                    if len(run) > 2:
                        positioned.append((match.start(), run))
                    positioned.extend((match.start(), b) for b in hangul_bigrams(run))
            elif run not in EN_STOPWORDS:
                positioned.append((match.start(), stem(run)))
        if has_hangul:  # English-only text never pays for an analysis
            positioned.extend((pos, t) for pos, _, unit in self._korean(norm) for t in unit)
        positioned.sort(key=lambda p: p[0])  # stable: ties keep emission order
        return [t for _, t in positioned]

    def query_terms(self, text: str) -> list[QueryTerm]:
        """Each distinct stem or root is a term evidenced by itself; a run of adjacent nouns is
        one term (surface: the run as written) evidenced by its tokens, a passage covering the
        share of them it holds (``워크스페이스`` → ``워크``, ``스페이스``, ``워크스페이스``: a
        compound counts once, whatever Kiwi split it into). English words as in
        ``words+bigrams`` (the gate's longer stopword list, then the stem).

        One-syllable Korean terms (``장``, ``달``, ``법``) are dropped, as ``words+bigrams``
        drops one-syllable stems: a bare syllable noun is too common and too ambiguous to count
        as evidence. Measured with ``benchmarks/bench_korean_tokenizer.py``'s three golden sets,
        dropping them refused one more unanswerable demo question and two fewer answerable
        holdout questions, and changed nothing else. (BM25 still gets them from
        :meth:`tokenize`.)
        """
        norm = normalize(text)
        positioned: list[tuple[int, str, tuple[str, ...]]] = []
        has_hangul = False
        for match in _RUN.finditer(norm):
            run = match.group()
            if is_hangul(run):
                has_hangul = True
            elif run not in GATE_EN_STOPWORDS:
                token = stem(run)
                positioned.append((match.start(), token, (token,)))
        if has_hangul:
            positioned.extend(self._korean(norm))
        positioned.sort(key=lambda p: p[0])
        terms: dict[str, QueryTerm] = {}
        for _, surface, unit in positioned:
            if len(surface) < 2 and is_hangul(surface):
                continue
            terms.setdefault(surface, QueryTerm(surface, tuple(dict.fromkeys(unit))))
        return list(terms.values())


_WORDS_BIGRAMS = WordsBigramsTokenizer()
_KIWI_TOKENIZER: KiwiTokenizer | None = None


def get_tokenizer(name: str = DEFAULT_TOKENIZER) -> Tokenizer:
    """The tokenizer called ``name`` (one of :data:`TOKENIZER_NAMES`), one instance per process.

    Edge cases: an unknown name raises ``ValueError`` listing the known ones; ``kiwi`` without
    the korean extra raises ``ValueError`` naming ``pip install -e ".[korean]"``. Getting the
    ``kiwi`` tokenizer does not load Kiwi: the first analysis does.
    """
    global _KIWI_TOKENIZER
    if name == DEFAULT_TOKENIZER:
        return _WORDS_BIGRAMS
    if name == KIWI:
        if _KIWI_TOKENIZER is None:
            _KIWI_TOKENIZER = KiwiTokenizer()
        return _KIWI_TOKENIZER
    raise ValueError(f"unknown tokenizer {name!r}; expected one of {', '.join(TOKENIZER_NAMES)}")


def tokenizer_for_manifest(manifest: dict) -> Tokenizer:
    """The tokenizer an index's manifest was built with, checked against the installed one.

    A manifest without a ``tokenizer`` name predates the choice and was built by
    ``words+bigrams`` when its ``tokenizer_version`` is ``mixed-ko-en-1``.

    Edge cases (all ``ValueError`` saying to rebuild the index): an unknown tokenizer name or
    version; a version other than the installed tokenizer's (e.g. after upgrading kiwipiepy);
    ``kiwi`` without the korean extra (the message also names ``pip install -e ".[korean]"``).
    """
    version = manifest.get("tokenizer_version")
    name = manifest.get("tokenizer")
    if name is None and version == TOKENIZER_VERSION:
        name = DEFAULT_TOKENIZER
    if name not in TOKENIZER_NAMES:
        raise ValueError(
            f"index was built with an unknown tokenizer {name!r} (version {version!r}); "
            f"rebuild the index (known tokenizers: {', '.join(TOKENIZER_NAMES)})"
        )
    try:
        tokenizer = get_tokenizer(name)
    except ValueError as exc:
        raise ValueError(f"{exc}; or rebuild the index with another tokenizer") from None
    if tokenizer.version != version:
        raise ValueError(
            f"index was built with tokenizer {name!r} version {version!r}, this installation has "
            f"{tokenizer.version!r}; rebuild the index"
        )
    return tokenizer
