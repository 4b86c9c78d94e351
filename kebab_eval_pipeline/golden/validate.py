"""Meaning checks on a parsed golden set (SPEC §3.3): every offender, at once."""

from __future__ import annotations

from collections.abc import Callable

from kebab_eval_pipeline.foundation.errors import Offender
from kebab_eval_pipeline.foundation.yaml_io import id_problem
from kebab_eval_pipeline.golden.model import GoldenQuery, Support

#: The support fields a hit can be matched on (metrics/matching.py); ``grade`` says how relevant a
#: match is, ``symbol``/``symbol_kind``/``section`` are never compared.
MATCHED_FIELDS = ("chunk_id", "doc_id", "rel_path", "heading_path", "line_start", "line_end", "snippet")


def match_key(support: Support) -> tuple:
    """What a hit is matched against, as written (an empty text or heading list is unset, as the
    matcher reads it): two supports of one query with the same key are the same evidence under
    every match criterion (a hit matching one matches the other)."""
    return tuple(
        tuple(value) if isinstance(value, list) and value else None if value in ("", []) else value
        for value in (getattr(support, name) for name in MATCHED_FIELDS)
    )


def _given_twice(first: Support, again: Support, at: int) -> str:
    """Why a support repeating ``supports[at]`` is refused (as a qrels judgment given twice is).

    Not counted once instead: every support is one relevant item — R, the denominator of map,
    R-precision, recall and bpref, and a gain in the ideal DCG — that one hit can be credited
    with, so a gold document listed twice needs two hits of it and halves those scores; and a
    repeat is most often a copy-paste slip (``d1`` written where ``d2`` was meant), which only the
    author can resolve."""
    values = ((name, getattr(again, name)) for name in MATCHED_FIELDS)
    shown = ", ".join(f"{name} {value!r}" for name, value in values if value not in (None, [], ""))
    grades = f" (grades {first.grade} and {again.grade})" if first.grade != again.grade else ""
    return (
        f"support given twice for this query (first at supports[{at}]: {shown}){grades}: each support "
        "is one relevant item, so a repeat needs a second hit and halves map, recall and R-precision; "
        "remove one"
    )


#: Why an empty support is refused; an id written as an unquoted null or ~ is the usual way to get one.
NO_EVIDENCE = (
    "support names no evidence (no id, path, lines or snippet; an unquoted null or ~ is YAML's empty "
    "value: quote it to use it as an id)"
)


def validate_queries(
    queries: list[GoldenQuery], source_of: Callable[[int], tuple[str, str | None]]
) -> list[Offender]:
    """Cross-query and cross-field checks. ``source_of(i)`` gives (file, position) for query ``i``.

    Returns the offenders; an empty list means the set is valid.
    """
    checks = QueryChecks(source_of)
    for i, q in enumerate(queries):
        checks.check(i, q)
    return checks.finish()


class QueryChecks:
    """The checks of :func:`validate_queries`, fed one query at a time (``check``), so a loader can
    let each query's model go once it is checked and tabled: what the cross-query checks need later
    (first index per id; per intent group, each member's id and expected documents) is kept, not
    the models. ``finish`` adds the intent-group checks and returns every offender, in the order
    :func:`validate_queries` gives them."""

    def __init__(self, source_of: Callable[[int], tuple[str, str | None]]) -> None:
        self.source_of = source_of
        self.offenders: list[Offender] = []
        self.first_seen: dict[str, int] = {}
        self.groups: dict[str, list[tuple[int, str, frozenset[str]]]] = {}

    def _add(self, i: int, qid: str, field: str, reason: str) -> None:
        file, position = self.source_of(i)
        self.offenders.append(Offender(file, reason, position=position, query_id=qid, field=field))

    def check(self, i: int, q: GoldenQuery) -> None:
        """Query ``i``'s own checks, and its id against the ids before it."""
        add = self._add
        if not q.id.strip():
            add(i, q.id, "id", "empty id")
        elif (problem := id_problem(q.id, query_id=True)) is not None:
            add(i, q.id, "id", f"query id {problem}: ids become TREC query ids and file names")
        if q.id in self.first_seen:
            other_file, other_pos = self.source_of(self.first_seen[q.id])
            add(i, q.id, "id", f"duplicate id (first at {other_file}:{other_pos or '?'})")
        else:
            self.first_seen[q.id] = i
        if not q.query.strip():
            add(i, q.id, "query", "empty query")
        first_at: dict[tuple, int] = {}
        for j, s in enumerate(q.supports):
            # an empty support is refused below; two of them are not also "given twice"
            if not s.is_empty() and (earlier := first_at.setdefault(match_key(s), j)) != j:
                add(i, q.id, f"supports[{j}]", _given_twice(q.supports[earlier], s, earlier))
            for name in ("chunk_id", "doc_id"):
                value = getattr(s, name)
                if value is not None and (problem := id_problem(value)) is not None:
                    add(i, q.id, f"supports[{j}].{name}", f"{name} {problem}")
            if s.is_empty():
                add(i, q.id, f"supports[{j}]", NO_EVIDENCE)
            if q.pending:
                continue  # pending entries may carry placeholder line ranges
            if (s.line_start is not None and s.line_start < 1) or (s.line_end is not None and s.line_end < 1):
                add(i, q.id, f"supports[{j}]", "line numbers must be positive (1-based)")
            if s.line_start is not None and s.line_end is not None and s.line_start > s.line_end:
                add(i, q.id, f"supports[{j}]", f"line_start {s.line_start} > line_end {s.line_end}")
        for g, group in enumerate(q.required_support_groups):
            if not group:
                add(i, q.id, f"required_support_groups[{g}]", "empty group can never be satisfied")
            bad = [ix for ix in group if not 0 <= ix < len(q.supports)]
            if bad:
                add(
                    i,
                    q.id,
                    f"required_support_groups[{g}]",
                    f"index {bad} out of range (the query has {len(q.supports)} supports)",
                )
        if not q.answerable and q.supports:
            add(i, q.id, "supports", "an unanswerable query must not list gold supports")
        if q.group:
            self.groups.setdefault(q.group, []).append((i, q.id, q.expected_doc_ids()))

    def finish(self) -> list[Offender]:
        """Every offender: the per-query ones in query order, then the intent groups' (paraphrases
        of one question must expect the same documents)."""
        for name, members in self.groups.items():
            _, first_id, reference = members[0]
            for i, qid, docs in members[1:]:
                if docs != reference:
                    self._add(
                        i,
                        qid,
                        "group",
                        f"group {name!r}: expected docs {sorted(docs)} differ from "
                        f"{first_id!r}'s {sorted(reference)}",
                    )
        return self.offenders
