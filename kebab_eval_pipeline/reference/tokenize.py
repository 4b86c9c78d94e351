"""Tokenizer for mixed Korean / English text (BM25 and the answer score gate).

Pipeline: NFKC → lowercase → split into word runs, where a run is a maximal
stretch of Hangul, or of other letters/digits (``_`` and punctuation split, so
``chunk_size`` is ``chunk`` + ``size``).

* Latin/digit runs: English stopwords dropped, then a light stemmer (Porter
  steps 1a-1c: plurals, -ed, -ing, final y) so ``salting``/``salted``/``salts``
  meet. No stemming library is installed, and these three steps are the
  well-known, low-risk part of Porter.
* Hangul runs: the run itself plus its character bigrams. Korean glues
  particles and endings onto words (``김치를``, ``김치는``), so the bigram
  ``김치`` is what lets ``김치를`` match ``김치``; the whole run keeps exact
  matches scoring higher. A handful of Korean question/function words are
  dropped whole.

Everything is deterministic: same text, same tokens, on every machine.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

TOKENIZER_VERSION = "mixed-ko-en-1"

_HANGUL = "\uac00-\ud7a3\u1100-\u11ff\u3130-\u318f"
# Hangul runs, or runs of any other word character except "_".
_RUN = re.compile(rf"[{_HANGUL}]+|[^\W_{_HANGUL}]+")
_HANGUL_RUN = re.compile(rf"[{_HANGUL}]+")


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


# Lucene's English list plus question and auxiliary words that golden-set
# questions are full of ("how do I ...", "what should ..."). Kept small on
# purpose: BM25's IDF already discounts common words, and "before", "over",
# "off" carry meaning in instructions.
EN_STOPWORDS = frozenset(
    _words(
        """
        a an and are as at be but by for if in into is it no not of on or such that the their then there
        these they this to was will with what which who whom whose when where why how do does did doing
        done i me my we our you your he she his her its can could should would shall may might must have
        has had am were been being from about so than too very just any some all each other
        """
    )
)

# The answer gate weighs every remaining query word, so it drops more: NLTK's
# English list on top (it covers the pieces contractions split into: "what's"
# → what + s, "isn't" → isn + t).
GATE_EN_STOPWORDS = EN_STOPWORDS | frozenset(
    _words(
        """
        myself ours ourselves yours yourself yourselves him himself hers herself itself them theirs
        themselves those having because until while against between through during before after above
        below up down out off over under again further once here more most nor only own same few s t don
        now d ll m o re ve y ain aren couldn didn doesn hadn hasn haven isn ma mightn mustn needn shan
        shouldn wasn weren won wouldn
        """
    )
)

# Korean question and function words that carry no topic on their own.
KO_STOPWORDS = frozenset(
    _words(
        """
        무엇 무엇인가요 무엇인가 무엇입니까 뭐 뭔가요 뭐야
        뭐예요 어떻게 어떤 어느 얼마 얼마나 언제 어디 어디에
        왜 누가 그리고 또는 및 등 그 이 저 것 수 있나요
        있습니까 있어요 하나요 합니까 해야 하나 인가요 입니까
        인지 알려줘 알려주세요 설명해줘 설명해주세요 대해
        대해서 대한 위해 위한 경우 때
        """
    )
)

# Common Korean particles / question endings, longest first. Used only to find
# a query word's content stem for the score gate (see :func:`query_terms`);
# BM25 matching relies on bigrams instead.
KO_SUFFIXES = tuple(
    sorted(
        _words(
            """
            에서는 으로는 에게는 이라는 이에요 인가요 입니까 습니까 했나요
            하나요 되나요 예요 에요 나요 가요 까요 니까 에서 으로 에게 까지
            부터 처럼 보다 이나 이란 라는 하는 하고 하면 해서
            은 는 이 가 을 를 의 에 도 만 로 와 과 요
            """
        ),
        key=len,
        reverse=True,
    )
)


def normalize(text: str) -> str:
    """NFKC-normalise and lowercase (full-width letters, compatibility jamo, ligatures fold)."""
    return unicodedata.normalize("NFKC", text).lower()


def word_runs(text: str) -> list[str]:
    """Word runs of normalised ``text`` (Hangul runs and other letter/digit runs), in order."""
    return _RUN.findall(normalize(text))


def is_hangul(run: str) -> bool:
    """True when ``run`` is a Hangul run (as produced by :func:`word_runs`)."""
    return bool(_HANGUL_RUN.fullmatch(run))


def hangul_bigrams(run: str) -> list[str]:
    """Character bigrams of a Hangul run; a one-character run gives ``[run]``."""
    if len(run) < 2:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def tokenize(text: str) -> list[str]:
    """Tokens for BM25, in text order, repeats kept (term frequency matters).

    ``tokenize("김치를 담그는 법")`` →
    ``["김치를", "김치", "치를", "담그는", "담그", "그는", "법"]``.

    Edge cases: empty or punctuation-only text gives ``[]``; a two-character
    Hangul run is emitted once (the run *is* its only bigram).
    """
    tokens: list[str] = []
    for run in word_runs(text):
        if is_hangul(run):
            if run in KO_STOPWORDS:
                continue
            if len(run) > 2:
                tokens.append(run)
            tokens.extend(hangul_bigrams(run))
        elif run not in EN_STOPWORDS:
            tokens.append(stem(run))
    return tokens


@dataclass(frozen=True)
class QueryTerm:
    """A content word of a query and the index token that evidences it.

    ``tokens`` holds one token today (an English stem, or a Korean word's first
    two syllables); it is a tuple so a term can later be evidenced by several
    tokens, a passage covering the share of them it contains.
    """

    surface: str
    tokens: tuple[str, ...]


def query_terms(text: str) -> list[QueryTerm]:
    """Distinct content words of a query, for the answer score gate.

    English words: :data:`GATE_EN_STOPWORDS` dropped, the stem is the token. Korean words:
    dropped if a function word; otherwise one trailing particle/ending is
    stripped (``농도는`` → ``농도``, ``얼마인가요`` → ``얼마`` → dropped), and the
    word is evidenced by its first two syllables (``소금물`` → ``소금``,
    ``쭈글쭈글한`` → ``쭈글``). Korean conjugation rewrites the *end* of a
    stem (``하얗고`` / ``하얀``, ``생겼는데`` / ``생기면``) while the start stays,
    so the leading bigram is the part a passage will share. One-syllable stems
    are dropped: a bare syllable (``법``, ``물``) is too ambiguous to count as
    evidence.

    Output keeps first-occurrence order; duplicates are merged.
    """
    terms: dict[str, QueryTerm] = {}
    for run in word_runs(text):
        if is_hangul(run):
            if run in KO_STOPWORDS:
                continue
            root = _strip_ko_suffix(run)
            if root in KO_STOPWORDS or len(root) < 2:
                continue
            terms.setdefault(root, QueryTerm(root, (root[:2],)))
        elif run not in GATE_EN_STOPWORDS:
            token = stem(run)
            terms.setdefault(token, QueryTerm(token, (token,)))
    return list(terms.values())


def _strip_ko_suffix(run: str) -> str:
    for suffix in KO_SUFFIXES:
        # Keep at least two syllables of stem: 가을 must not lose its 을.
        if run.endswith(suffix) and len(run) - len(suffix) >= 2:
            return run[: -len(suffix)]
    return run


# --- Porter stemmer, steps 1a-1c (Porter 1980) ---------------------------------

_VOWELS = frozenset("aeiou")


def _is_consonant(word: str, i: int) -> bool:
    ch = word[i]
    if ch in _VOWELS:
        return False
    if ch == "y":
        return i == 0 or not _is_consonant(word, i - 1)
    return True


def _measure(stem_: str) -> int:
    """Porter's m: the number of vowel→consonant transitions in ``stem_``."""
    m, prev_vowel = 0, False
    for i in range(len(stem_)):
        vowel = not _is_consonant(stem_, i)
        if prev_vowel and not vowel:
            m += 1
        prev_vowel = vowel
    return m


def _has_vowel(stem_: str) -> bool:
    return any(not _is_consonant(stem_, i) for i in range(len(stem_)))


def _ends_double_consonant(word: str) -> bool:
    return len(word) >= 2 and word[-1] == word[-2] and _is_consonant(word, len(word) - 1)


def _ends_cvc(word: str) -> bool:
    return (
        len(word) >= 3
        and _is_consonant(word, len(word) - 3)
        and not _is_consonant(word, len(word) - 2)
        and _is_consonant(word, len(word) - 1)
        and word[-1] not in "wxy"
    )


def stem(word: str) -> str:
    """Light English stem (Porter steps 1a, 1b, 1c) of a lowercase word.

    ``berries`` → ``berri``, ``salting`` → ``salt``, ``fermented`` →
    ``ferment``, ``making`` → ``make``. Words that are not plain ASCII letters
    (numbers, accented or non-Latin words) and words of ≤ 2 letters are
    returned unchanged.
    """
    if len(word) <= 2 or not (word.isascii() and word.isalpha()):
        return word
    # Step 1a: plurals.
    if word.endswith(("sses", "ies")):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith("ss"):
        word = word[:-1]
    # Step 1b: -eed / -ed / -ing.
    if word.endswith("eed"):
        if _measure(word[:-3]) > 0:
            word = word[:-1]
    else:
        for suffix in ("ed", "ing"):
            if word.endswith(suffix) and _has_vowel(word[: -len(suffix)]):
                word = word[: -len(suffix)]
                if word.endswith(("at", "bl", "iz")):
                    word += "e"
                elif _ends_double_consonant(word) and word[-1] not in "lsz":
                    word = word[:-1]
                elif _measure(word) == 1 and _ends_cvc(word):
                    word += "e"
                break
    # Step 1c: terminal y → i after a vowel-bearing stem (berry/berries meet).
    if word.endswith("y") and _has_vowel(word[:-1]):
        word = word[:-1] + "i"
    return word
