"""The metric catalogue: every metric declared once, with every fact the rest of the package needs.

In the spirit of ir_measures' measure registry. A :class:`Measure` says what a metric is (family,
description, the per-query column it is the mean of, its denominator), how to read a change
(direction), which paired test applies (binary → exact McNemar, graded → randomization, ``None`` →
not testable, with the reason), whether it can be sliced (and so gated per slice), where it is shown
(headline, summary) and its trec_eval / ir_measures name. Gates, significance, history, the
reports, the UI's column descriptions, the export and ``metrics.aggregate`` all read it; nothing
else keeps a list of metric names.

A parametric family (``hit@k``) is declared once for every cut-off: ``at_k=True``, and ``{k}`` in
``column`` / ``trec_eval`` / ``ir_measures`` is replaced by the cut-off. A stem may have one plain
declaration and one ``@k`` family (``map``, average precision over every hit, and ``map@k``).
Example entry — a new measure is one entry like this plus the kernel that writes its per-query
column::

    register(
        Measure(
            name="precision",                       # metric names precision@1, precision@5, …
            at_k=True,
            family="retrieval",
            description="share of the top k hits credited to a gold support",
            column="precision@{k}",                 # the per-query column it is the mean of
            denominator="answerable queries with ≥1 positive support",
            test="graded",                          # randomization test (binary: exact McNemar)
            headline={5: 4},                        # precision@5 is 5th in the headline list
            trec_eval="P_{k}",
            ir_measures="P@{k}",
        )
    )

Names are parsed in exactly one place, :func:`parse`: ``NAME``, ``NAME@K``, either followed by
``[DIMENSION=VALUE]`` (a breakdown slice). Order: metrics are listed by :data:`FAMILIES`, then in
registration order, an ``@k`` family expanded over the run's cut-offs in place
(:func:`metric_names`) — the order of ``aggregate_metrics`` and of every report.

Extension modules (:data:`EXTENSIONS`, today the LLM judge) register their own measures; they are
imported on the first query of the catalogue, so the core never lists their metrics.
"""

from __future__ import annotations

import functools
import importlib
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal

from kebab_eval_pipeline.systems.capabilities import CAPABILITIES

__all__ = [
    "EXTENSIONS",
    "FAMILIES",
    "QUALITY_FAMILIES",
    "Measure",
    "MetricName",
    "MetricNameError",
    "card_names",
    "column_description",
    "direction",
    "family_names",
    "format_name",
    "headline_names",
    "is_sliceable",
    "lower_is_better",
    "measure",
    "measures",
    "metric_column",
    "metric_names",
    "needs",
    "not_measured",
    "parse",
    "register",
    "registered",
    "summary_names",
    "test_kind",
    "trec_names",
    "untestable_reason",
]

#: Families in report order (metrics are listed family by family, then in registration order).
FAMILIES: tuple[str, ...] = (
    "count",  # how many queries stand behind the run
    "retrieval",  # ranked hits against the gold supports
    "refusal",  # answering or refusing, against answerability
    "answer",  # citations and answer text
    "judge",  # the LLM judge's per-query scores
    "verification",  # hits checked against the source tree
    "operations",  # errors, timeouts, empty results, versions, latency
    "indexing",  # what the system indexed (its own coverage report)
    "judge_run",  # run-level statistics of the LLM judge: failures, agreement, spend, latency
    "judge_calibration",  # the judge against a person's labels: κ and corrected means
)
#: Families that say how good the results are (not what they cost or how the system behaved).
QUALITY_FAMILIES: tuple[str, ...] = ("retrieval", "refusal", "answer", "judge", "verification")
#: What a run must carry (systems/capabilities.py) for a metric of each family, unless the measure
#: says otherwise (``Measure.needs``): a metric whose needs the run lacks is null with the reason.
FAMILY_NEEDS: dict[str, tuple[str, ...]] = {
    "count": (),
    "retrieval": ("hits",),
    "refusal": ("answers",),
    "answer": ("answers",),
    "judge": ("answers",),
    "verification": ("hits",),
    "operations": (),
    "indexing": (),
    "judge_run": (),
    "judge_calibration": (),
}
#: Modules that register measures of their own (imported once, on the first catalogue query).
EXTENSIONS: tuple[str, ...] = ("kebab_eval_pipeline.judge.metrics",)

Direction = Literal["higher", "lower", "none"]
TestKind = Literal["binary", "graded"]


@dataclass(frozen=True)
class Measure:
    """One metric (or one ``@k`` family of metrics) and its facts.

    - ``name``: the metric name; for ``at_k`` families the stem (``hit`` → ``hit@5``).
    - ``family``: one of :data:`FAMILIES`.
    - ``description``: one line for people (reports, docs).
    - ``denominator``: what stands behind the mean — what makes the metric null for a query.
    - ``column``: the per-query ``query_scores`` column whose mean (over rows where it is defined)
      is this metric; ``None`` when it is not such a mean (counts, shares of hits or groups,
      percentiles, run-level numbers). ``{k}`` is replaced by the cut-off.
    - ``reads``: for a metric that is not a plain mean, the per-query columns it is computed from.
    - ``column_description``: text of the per-query column in the UI (default: ``description``).
    - ``direction``: ``"higher"`` or ``"lower"`` is better (decides which change is a regression);
      ``"none"`` for sizes (a change is neither better nor worse; gates read them as ``"higher"``).
    - ``test``: ``"binary"`` (0/1 per query: exact McNemar), ``"graded"`` (randomization test) or
      ``None`` (not testable; ``untestable`` says why).
    - ``sliceable``: computed per breakdown slice, so it can be gated per slice.
    - ``headline`` / ``summary``: position in the headline list (shown first, plotted across runs)
      and in the short summary list (history, per-category tables, comparison cards); an ``@k``
      family maps the cut-offs shown to positions (``{1: 0, 5: 1}``). ``None``: not shown there.
    - ``card``: position among the comparison report's headline cards (same form).
    - ``trec_eval`` / ``ir_measures``: the equivalent measure's name, ``{k}`` for the cut-off.
    - ``relevance_level``: the metric honours the run's relevance level (trec_eval's ``-l``).
    - ``needs``: what a run must carry (``systems.capabilities.CAPABILITIES``) for the metric to be
      measured; default: its family's (:data:`FAMILY_NEEDS`). A run lacking one reports the metric
      null with the reason (:func:`not_measured`), never 0.
    """

    name: str
    family: str
    description: str
    denominator: str
    column: str | None = None
    reads: tuple[str, ...] = ()
    column_description: str | None = None
    direction: Direction = "higher"
    test: TestKind | None = None
    untestable: str = ""
    at_k: bool = False
    sliceable: bool = True
    headline: int | Mapping[int, int] | None = None
    summary: int | Mapping[int, int] | None = None
    card: int | Mapping[int, int] | None = None
    trec_eval: str | None = None
    ir_measures: str | None = None
    relevance_level: bool = False
    needs: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ValueError(f"measure {self.name!r}: unknown family {self.family!r}; expected {FAMILIES}")
        if self.needs is None:
            object.__setattr__(self, "needs", FAMILY_NEEDS[self.family])
        unknown = [n for n in self.needs or () if n not in CAPABILITIES]
        if unknown:
            raise ValueError(
                f"measure {self.name!r}: unknown needs {unknown}; expected some of {CAPABILITIES}"
            )
        if not _NAME.fullmatch(self.name):
            raise ValueError(f"measure name {self.name!r} must match {_NAME.pattern}")
        if self.direction not in ("higher", "lower", "none"):
            raise ValueError(f"measure {self.name!r}: direction must be 'higher', 'lower' or 'none'")
        if self.test not in (None, "binary", "graded"):
            raise ValueError(f"measure {self.name!r}: test must be 'binary', 'graded' or None")
        if self.test is not None and self.column is None:
            raise ValueError(f"measure {self.name!r}: a paired test needs the per-query column")
        if self.test is None and self.column is not None and not self.untestable:
            raise ValueError(f"measure {self.name!r}: say why a per-query mean is not testable")
        for text in (self.column, self.trec_eval, self.ir_measures):
            if text is not None and ("{k}" in text) != self.at_k:
                raise ValueError(
                    f"measure {self.name!r}: {{k}} in {text!r} only (and always) for @k families"
                )

    def metric(self, k: int | None = None) -> str:
        """The metric name for cut-off ``k`` (``hit`` + 5 → ``hit@5``; ``mrr`` + None → ``mrr``)."""
        return format_name(self.name, k if self.at_k else None)

    def column_for(self, k: int | None = None) -> str | None:
        return None if self.column is None else self.column.replace("{k}", str(k))


@dataclass(frozen=True)
class MetricName:
    """A parsed ``NAME[@K][[DIMENSION=VALUE]]``: ``ndcg@10[lang=ko]`` → stem ``ndcg``, k 10, slice."""

    stem: str
    k: int | None = None
    dimension: str | None = None
    value: str | None = None

    @property
    def metric(self) -> str:
        """The metric without the slice (``ndcg@10``)."""
        return format_name(self.stem, self.k)

    @property
    def label(self) -> str:
        """The whole name, canonical spacing (``ndcg@10[lang=ko]``)."""
        return self.metric if self.dimension is None else f"{self.metric}[{self.dimension}={self.value}]"


class MetricNameError(ValueError):
    """A metric name that does not parse (the message says what is wrong and the expected form)."""


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PARSE = re.compile(
    r"(?P<stem>[^\[\]@=]*?)\s*(?:@\s*(?P<k>[^\[\]@=]*?)\s*)?"
    r"(?:\[(?P<dimension>[^=\[\]]*)=(?P<value>[^\[\]]*)\])?"
)
_FORM = "expected NAME or NAME@K, optionally followed by [DIMENSION=VALUE]"


def parse(text: str, dimensions: Sequence[str] | None = None) -> MetricName:
    """Parse ``NAME``, ``NAME@K``, ``NAME[DIMENSION=VALUE]`` or ``NAME@K[DIMENSION=VALUE]``.

    Spaces around the parts are ignored (``mrr[ lang = ko ]``). NAME is letters, digits and ``_``
    (not starting with a digit); K a positive integer without leading zeros; DIMENSION non-empty;
    VALUE may be empty. ``dimensions``: when given, DIMENSION must be one of them. Whether the
    name is a *known* metric is :func:`measure`'s business, not the parser's.

    Raises :class:`MetricNameError` (a ValueError) naming the text and what is wrong.
    """
    if dimensions is None and isinstance(text, str):
        return _parse_plain(text)
    return _parse(text, dimensions)


@functools.lru_cache(maxsize=4096)
def _parse_plain(text: str) -> MetricName:
    # Comparisons and breakdowns look the same few hundred names up thousands of times; a
    # MetricName is frozen, so sharing one is safe (errors are raised again, never cached).
    return _parse(text, None)


def _parse(text: str, dimensions: Sequence[str] | None) -> MetricName:
    m = _PARSE.fullmatch(text.strip()) if isinstance(text, str) else None
    if m is None:
        raise MetricNameError(f"malformed metric name {text!r}: {_FORM}")
    stem, k, dimension, value = m.group("stem"), m.group("k"), m.group("dimension"), m.group("value")
    if not _NAME.fullmatch(stem):
        raise MetricNameError(f"malformed metric name {text!r}: NAME must be letters, digits and _; {_FORM}")
    if k is not None and not re.fullmatch(r"[1-9][0-9]*", k):
        raise MetricNameError(
            f"malformed metric name {text!r}: the cut-off after @ must be a positive integer"
        )
    if dimension is None:
        return MetricName(stem, None if k is None else int(k))
    dimension = dimension.strip()
    if not dimension:
        raise MetricNameError(f"malformed metric name {text!r}: empty DIMENSION; {_FORM}")
    if dimensions is not None and dimension not in dimensions:
        raise MetricNameError(
            f"unknown breakdown dimension {dimension!r} in {text!r}; expected one of {', '.join(dimensions)}"
        )
    return MetricName(stem, None if k is None else int(k), dimension, value.strip())


def format_name(
    stem: str, k: int | None = None, dimension: str | None = None, value: str | None = None
) -> str:
    """The inverse of :func:`parse`: ``("ndcg", 10, "lang", "ko")`` → ``ndcg@10[lang=ko]``."""
    return MetricName(stem, k, dimension, value).label if dimension else stem + ("" if k is None else f"@{k}")


# ---------------------------------------------------------------------------------------------
# The registry

# Keyed by (name, at_k): a stem may be declared once plain and once as an @k family (``map`` is
# average precision over every hit, ``map@10`` the same cut at rank 10, as trec_eval's map_cut).
_REGISTRY: dict[tuple[str, bool], Measure] = {}
_extensions_loaded = False


def register(entry: Measure, *, replace: bool = False) -> Measure:
    """Declare ``entry``. A second declaration of the same name (plain, or ``@k``) is an error
    unless ``replace`` (re-importing a registering module declares the same entry again: allowed)."""
    key = (entry.name, entry.at_k)
    old = _REGISTRY.get(key)
    if old is not None and old != entry and not replace:
        shown = f"{entry.name}@k" if entry.at_k else entry.name
        raise ValueError(f"metric {shown!r} is already declared (family {old.family})")
    _REGISTRY[key] = entry
    return entry


@contextmanager
def registered(entry: Measure) -> Iterator[Measure]:
    """Declare ``entry`` for the duration of a ``with`` block (tests, experiments)."""
    _load_extensions()
    key = (entry.name, entry.at_k)
    previous = _REGISTRY.get(key)
    _REGISTRY[key] = entry
    try:
        yield entry
    finally:
        if previous is None:
            _REGISTRY.pop(key, None)
        else:
            _REGISTRY[key] = previous


def _load_extensions() -> None:
    global _extensions_loaded
    if not _extensions_loaded:
        _extensions_loaded = True
        for module in EXTENSIONS:
            importlib.import_module(module)


def measures() -> list[Measure]:
    """Every declared measure, in report order (family, then registration)."""
    _load_extensions()
    rank = {family: i for i, family in enumerate(FAMILIES)}
    order = {key: i for i, key in enumerate(_REGISTRY)}
    return sorted(_REGISTRY.values(), key=lambda e: (rank[e.family], order[(e.name, e.at_k)]))


def measure(name: str | MetricName) -> Measure | None:
    """The measure behind a metric name (``hit@5`` → the ``hit`` family), ignoring any slice.

    None for an unknown or malformed name, an ``@k`` family without its cut-off (``hit``) and a
    plain metric with one (``mrr@5``).
    """
    try:
        parsed = name if isinstance(name, MetricName) else parse(name)
    except MetricNameError:
        return None
    _load_extensions()
    return _REGISTRY.get((parsed.stem, parsed.k is not None))


def metric_names(ks: Iterable[int], families: Iterable[str] | None = None) -> list[str]:
    """Every metric a run with cut-offs ``ks`` can report, in report order (optionally only
    ``families``). An ``@k`` family expands over ``ks`` in place."""
    ks = list(ks)
    wanted = None if families is None else set(families)
    return [
        entry.metric(k)
        for entry in measures()
        if wanted is None or entry.family in wanted
        for k in (ks if entry.at_k else [None])
    ]


def family_names(*families: str) -> tuple[str, ...]:
    """The plain (non-``@k``) metric names of ``families``, in report order."""
    return tuple(e.name for e in measures() if e.family in families and not e.at_k)


def metric_column(name: str) -> str | None:
    """The per-query column whose mean is metric ``name`` (None: not a per-query mean, or unknown)."""
    entry = measure(name)
    return None if entry is None else entry.column_for(parse(name).k)


def needs(name: str) -> tuple[str, ...]:
    """What a run must carry for metric ``name`` (``()`` for an unknown name)."""
    entry = measure(name)
    return () if entry is None else tuple(entry.needs or ())


def not_measured(names: Iterable[str], lacks: Mapping[str, str]) -> dict[str, str]:
    """``{metric: reason}`` for each of ``names`` whose needs a run lacks (``lacks``: capability →
    why the run cannot carry it, ``systems.capabilities``): the reason of its first lacking need.
    Names keep their order; slices (``chr[lang=ko]``) are read as their metric."""
    if not lacks:
        return {}
    out = {}
    for name in names:
        missing = [n for n in needs(name) if n in lacks]
        if missing:
            out[name] = lacks[missing[0]]
    return out


def lower_is_better(name: str) -> bool:
    """True when a rise of ``name`` is the regression (rates of bad events, latencies, spend)."""
    entry = measure(name)
    return entry is not None and entry.direction == "lower"


def direction(name: str) -> Direction | None:
    """``"higher"``, ``"lower"`` or ``"none"`` (a size: neither better nor worse); None if unknown."""
    entry = measure(name)
    return None if entry is None else entry.direction


def test_kind(name: str) -> TestKind | None:
    """``"binary"`` (exact McNemar), ``"graded"`` (randomization) or None (no paired test)."""
    entry = measure(name)
    return None if entry is None else entry.test


test_kind.__test__ = False  # type: ignore[attr-defined]  # not a pytest test when imported by one


def untestable_reason(name: str) -> str:
    """Why ``name`` has no paired test (for the comparison's note)."""
    entry = measure(name)
    if entry is None:
        return f"unknown metric {name!r}: not tested"
    return f"not tested: {entry.untestable or 'no per-query column'}, not a mean of per-query scores"


def is_sliceable(name: str) -> bool:
    """True when the breakdowns compute ``name`` per slice (so ``name[dim=value]`` can be gated)."""
    entry = measure(name)
    return entry is not None and entry.sliceable


def _ranked(attribute: str, ks: Iterable[int] | None) -> list[str]:
    allowed = None if ks is None else set(ks)
    found: list[tuple[int, str]] = []
    for entry in measures():
        spec = getattr(entry, attribute)
        if spec is None:
            continue
        if isinstance(spec, Mapping):
            found += [(pos, entry.metric(k)) for k, pos in spec.items() if allowed is None or k in allowed]
        else:
            found.append((spec, entry.name))
    return [name for _, name in sorted(found)]


def headline_names(ks: Iterable[int] | None = None) -> list[str]:
    """The headline metrics in order (``@k`` ones only for cut-offs in ``ks``; all when None)."""
    return _ranked("headline", ks)


def summary_names(ks: Iterable[int] | None = None, families: Iterable[str] | None = None) -> list[str]:
    """The short summary list in order (history's default columns; the per-category tables and
    comparison cards take its quality families), optionally only ``families``."""
    names = _ranked("summary", ks)
    if families is None:
        return names
    wanted = set(families)
    return [n for n in names if (e := measure(n)) is not None and e.family in wanted]


def card_names(ks: Iterable[int] | None = None) -> list[str]:
    """The comparison report's headline cards in order (``@k`` ones only for cut-offs in ``ks``)."""
    return _ranked("card", ks)


def column_description(column: str) -> str | None:
    """The description of a per-query ``query_scores`` column that some metric is the mean of."""
    for entry in measures():
        if entry.column is None:
            continue
        pattern = re.escape(entry.column).replace(re.escape("{k}"), r"([1-9][0-9]*)")
        m = re.fullmatch(pattern, column)
        if m:
            text = entry.column_description or entry.description
            return text.replace("{k}", m.group(1)) if entry.at_k else text
    return None


def trec_names(name: str) -> tuple[str | None, str | None]:
    """(trec_eval name, ir_measures name) of metric ``name`` — (None, None) when it has none."""
    entry = measure(name)
    if entry is None:
        return None, None
    k = parse(name).k
    return tuple(  # type: ignore[return-value]
        None if t is None else t.replace("{k}", str(k)) for t in (entry.trec_eval, entry.ir_measures)
    )


# ---------------------------------------------------------------------------------------------
# The core's measures (the judge declares its own in kebab_eval_pipeline.judge.metrics)

_APPLICABLE = "applicable queries: answerable, with ≥1 relevant support (grade ≥ the relevance level)"
_ANSWERED = "queries with an answer (answer requested, produced, no error)"
_LATENCY = "queries with a recorded {} latency"

_CORE: tuple[Measure, ...] = (
    Measure(
        "n_queries",
        "count",
        "golden queries in the run",
        "—",
        direction="none",
        sliceable=False,
        untestable="a count",
    ),
    Measure(
        "n_applicable",
        "count",
        "queries that can be scored for retrieval (answerable, with a positive support)",
        "—",
        direction="none",
        sliceable=False,
        untestable="a count",
    ),
    Measure(
        "mrr",
        "retrieval",
        "mean reciprocal rank of the first relevant hit (ranks up to the MRR cut-off)",
        _APPLICABLE,
        column="mrr",
        test="graded",
        headline=2,
        summary=1,
        card=0,
        trec_eval="recip_rank",
        ir_measures="RR",
        relevance_level=True,
    ),
    Measure(
        "hit",
        "retrieval",
        "1 when a relevant hit is among the top {k}",
        _APPLICABLE,
        column="hit@{k}",
        test="binary",
        at_k=True,
        headline={1: 0, 5: 1},
        summary={5: 0},
        card={5: 1},
        trec_eval="success_{k}",
        ir_measures="Success@{k}",
        relevance_level=True,
    ),
    Measure(
        "recall",
        "retrieval",
        "share of the gold supports credited within the top {k} (one hit credits one support)",
        _APPLICABLE,
        column="recall@{k}",
        test="graded",
        at_k=True,
        headline={5: 3},
        summary={5: 2},
        card={5: 2},
        trec_eval="recall_{k}",
        ir_measures="R@{k}",
        relevance_level=True,
    ),
    Measure(
        "doc_recall",
        "retrieval",
        "share of the gold documents with a hit in the top {k}",
        _APPLICABLE,
        column="doc_recall@{k}",
        test="graded",
        at_k=True,
        relevance_level=True,
    ),
    Measure(
        "recall_any",
        "retrieval",
        "1 when any required support group is found in the top {k}",
        _APPLICABLE,
        column="recall_any@{k}",
        test="binary",
        at_k=True,
        relevance_level=True,
    ),
    Measure(
        "recall_all",
        "retrieval",
        "1 when every required support group is found in the top {k}",
        _APPLICABLE,
        column="recall_all@{k}",
        test="binary",
        at_k=True,
        relevance_level=True,
    ),
    Measure(
        "precision",
        "retrieval",
        "share of the top {k} hits credited to a gold support",
        _APPLICABLE,
        column="precision@{k}",
        test="graded",
        at_k=True,
        headline={5: 4},
        trec_eval="P_{k}",
        ir_measures="P@{k}",
        relevance_level=True,
    ),
    Measure(
        "ndcg",
        "retrieval",
        "normalised discounted cumulative gain of the top {k} (graded supports)",
        _APPLICABLE,
        column="ndcg@{k}",
        test="graded",
        at_k=True,
        headline={10: 5},
        card={10: 3},
        trec_eval="ndcg_cut_{k}",
        ir_measures="nDCG@{k}",
    ),
    Measure(
        "map",
        "retrieval",
        "average precision over every returned hit: Σ precision at each credited relevant hit ÷ "
        "the relevant supports (MAP as the mean)",
        _APPLICABLE,
        column="map",
        column_description="average precision over every returned hit (0 without a relevant hit)",
        test="graded",
        trec_eval="map",
        ir_measures="AP",
        relevance_level=True,
    ),
    Measure(
        "map",
        "retrieval",
        "average precision of the top {k}: Σ precision at each credited relevant hit of rank ≤ {k} "
        "÷ all relevant supports (not min(k, R))",
        _APPLICABLE,
        column="map@{k}",
        test="graded",
        at_k=True,
        trec_eval="map_cut_{k}",
        ir_measures="AP@{k}",
        relevance_level=True,
    ),
    Measure(
        "rprec",
        "retrieval",
        "R-precision: credited relevant hits in the top R ÷ R (R = the query's relevant supports)",
        _APPLICABLE,
        column="rprec",
        test="graded",
        trec_eval="Rprec",
        ir_measures="Rprec",
        relevance_level=True,
    ),
    Measure(
        "bpref",
        "retrieval",
        "binary preference: per credited relevant hit, 1 − (judged non-relevant hits above it, at most "
        "R) ÷ min(R, judged non-relevant supports), summed ÷ R; unjudged hits are ignored",
        _APPLICABLE,
        column="bpref",
        test="graded",
        trec_eval="bpref",
        ir_measures="Bpref",
        relevance_level=True,
    ),
    Measure(
        "judged",
        "retrieval",
        "share of the top {k} hits that match any gold support of the query, whatever its grade, "
        "÷ min({k}, hits returned); 0 without hits (judgement coverage: an unjudged hit is not known "
        "to be non-relevant)",
        _APPLICABLE,
        column="judged@{k}",
        # A coverage diagnostic, not a quality: more judged hits make the other numbers more
        # trustworthy, but a system is not worse for returning what the golden set never judged.
        direction="none",
        test="graded",
        at_k=True,
        ir_measures="Judged@{k}",
    ),
    Measure(
        "group_consistency",
        "retrieval",
        "share of intent groups whose every member has hit@{k} = 1",
        "intent groups with ≥1 member whose hit@k is defined",
        reads=("group", "hit@{k}"),
        untestable="a share of intent groups, not of queries",
        at_k=True,
    ),
    Measure(
        "scope_miss_rate",
        "retrieval",
        "share of queries whose searched folders held none of their gold evidence",
        "applicable queries whose system reported the folders it searched",
        column="scope_miss",
        test="binary",
        direction="lower",
    ),
    Measure(
        "refusal_correctness",
        "refusal",
        "share of unanswerable queries the system refused",
        "unanswerable queries with an answer",
        column="refusal_correct",
        column_description="1 when an unanswerable query was refused",
        test="binary",
        headline=6,
        summary=3,
        card=4,
    ),
    Measure(
        "under_refusal_rate",
        "refusal",
        "share of unanswerable queries answered instead of refused",
        "unanswerable queries with an answer",
        column="under_refusal",
        test="binary",
        direction="lower",
        headline=8,
    ),
    Measure(
        "over_refusal_rate",
        "refusal",
        "share of answerable queries refused",
        "answerable queries with an answer",
        column="over_refusal",
        test="binary",
        direction="lower",
        headline=7,
    ),
    Measure(
        "citation_coverage",
        "answer",
        "share of answers with ≥1 citation where every citation is real",
        "answered queries (an answer, not refused)",
        column="citation_ok",
        test="binary",
        needs=("answers", "citations"),
    ),
    Measure(
        "chr",
        "answer",
        "citation hit rate: ≥1 citation, every citation resolves to a retrieved hit, one is gold",
        "answered queries (an answer, not refused)",
        column="chr",
        test="binary",
        headline=10,
        needs=("answers", "citations"),
    ),
    Measure(
        "answer_precision",
        "answer",
        "answerable, the answer contains a gold claim and the citation hit rate condition holds",
        "answered queries (an answer, not refused)",
        column="answer_precision",
        test="binary",
        headline=9,
        card=5,
        needs=("answers", "citations"),
    ),
    Measure(
        "attribution_hit_rate",
        "answer",
        "share of answers with a gold citation",
        "answerable, answered queries",
        column="attribution_hit",
        test="binary",
        needs=("answers", "citations"),
    ),
    Measure(
        "groundedness_rule",
        "answer",
        "rule-based groundedness: every must_contain string and no forbidden string in the answer",
        "answered queries with any must_contain or forbidden string",
        column="groundedness_rule",
        test="binary",
    ),
    Measure(
        "recency_correctness",
        "answer",
        "the answer follows the query's recency rule (cites the newer evidence, or both)",
        "queries with a recency rule, ≥1 gold support and an answer (a refusal scores 0)",
        column="recency_ok",
        test="binary",
        needs=("answers", "citations"),
    ),
    Measure(
        "hallucination_rate",
        "verification",
        "share of verified hits that do not exist in the source tree",
        "hits verified against the source root (null without one)",
        reads=("verified_hits", "hallucinated_hits"),
        untestable="a share of hits, not of queries",
        direction="lower",
        headline=11,
    ),
    Measure(
        "error_rate",
        "operations",
        "share of queries that failed",
        "all queries",
        reads=("error",),
        untestable="an operational rate",
        direction="lower",
        headline=13,
        summary=4,
    ),
    Measure(
        "timeout_rate",
        "operations",
        "share of queries that timed out",
        "all queries",
        reads=("timed_out",),
        untestable="an operational rate",
        direction="lower",
    ),
    Measure(
        "empty_result_rate",
        "operations",
        "share of queries that returned no hit",
        "all queries",
        reads=("empty_result",),
        untestable="an operational rate",
        direction="lower",
        headline=12,
    ),
    Measure(
        "empty_response_rate",
        "operations",
        "share of answers that are empty",
        _ANSWERED,
        reads=("empty_response",),
        untestable="an operational rate",
        direction="lower",
        needs=("answers",),
    ),
    Measure(
        "mixed_version_rate",
        "operations",
        "share of hits whose index/embedding/chunker version differs from the run's",
        "all hits",
        reads=("mixed_version_hits", "n_hits"),
        untestable="a share of hits, not of queries",
        direction="lower",
    ),
    *(
        Measure(
            f"{column}_{stat}",
            "operations",
            f"{'search' if column == 'retrieval_ms' else 'answer'} latency, "
            f"{'maximum' if stat == 'max' else stat} (ms)",
            _LATENCY.format("retrieval" if column == "retrieval_ms" else "answer"),
            reads=(column,),
            untestable="a latency percentile/maximum",
            direction="lower",
            needs=("hits",) if column == "retrieval_ms" else ("answers",),
        )
        for column in ("retrieval_ms", "answer_ms")
        for stat in ("p50", "p95", "max")
    ),
    Measure(
        "total_suite_ms",
        "operations",
        "sum of every recorded search and answer latency (serial suite time, ms)",
        "queries with a recorded latency",
        reads=("retrieval_ms", "answer_ms"),
        untestable="a suite total",
        direction="lower",
    ),
    Measure(
        "system_prompt_tokens",
        "operations",
        "prompt tokens the system under test reported for its answers",
        "answers that report token counts",
        reads=("system_prompt_tokens",),
        untestable="a run total",
        direction="lower",
        sliceable=False,
        needs=("answers", "token_counts"),
    ),
    Measure(
        "system_completion_tokens",
        "operations",
        "completion tokens the system under test reported for its answers",
        "answers that report token counts",
        reads=("system_completion_tokens",),
        untestable="a run total",
        direction="lower",
        sliceable=False,
        needs=("answers", "token_counts"),
    ),
    Measure(
        "system_cost_usd",
        "operations",
        "what the system under test's answers cost, USD: reported, or tokens × system_costs.prices "
        "(null when an answer with tokens has no price)",
        "answers with a cost",
        reads=("system_cost_usd", "system_prompt_tokens", "system_completion_tokens"),
        untestable="a run total",
        direction="lower",
        sliceable=False,
        needs=("answers",),
    ),
    *(
        Measure(
            name,
            "indexing",
            text,
            "the system's coverage report (null when it reports none)",
            untestable="run-level indexing coverage",
            direction=direction,
            sliceable=False,
        )
        for name, text, direction in (
            # sizes: a change is neither better nor worse
            ("index_docs", "documents the system processed", "none"),
            ("index_zero_chunk_docs", "documents that produced no chunk", "lower"),
            ("index_zero_chunk_rate", "share of processed documents that produced no chunk", "lower"),
            ("index_chunks", "chunks in the index", "none"),
            ("index_chunks_skipped", "chunks the chunker skipped", "lower"),
            ("index_tokens_min", "smallest chunk, tokens", "none"),
            ("index_tokens_mean", "mean chunk size, tokens", "none"),
            ("index_tokens_p95", "95th percentile chunk size, tokens", "none"),
            ("index_tokens_max", "largest chunk, tokens", "none"),
            # links left out, reported for review, not a quality
            ("index_skipped_symlinks", "symlinks in the corpus the index did not follow", "none"),
        )
    ),
)
for _entry in _CORE:
    register(_entry)
del _entry
