"""Meaning checks on a parsed golden set (SPEC §3.3): every offender, at once."""

from __future__ import annotations

from collections.abc import Callable

from kebab_eval_pipeline.errors import Offender
from kebab_eval_pipeline.golden.model import GoldenQuery
from kebab_eval_pipeline.yaml_io import id_problem

# Maps a query's index in its file to a human position ("line 12" / "queries[3]").
PositionOf = Callable[[int], str | None]


def validate_queries(
    queries: list[GoldenQuery], source_of: Callable[[int], tuple[str, str | None]]
) -> list[Offender]:
    """Cross-query and cross-field checks. ``source_of(i)`` gives (file, position) for query ``i``.

    Returns the offenders; an empty list means the set is valid.
    """
    offenders: list[Offender] = []

    def add(i: int, q: GoldenQuery, field: str, reason: str) -> None:
        file, position = source_of(i)
        offenders.append(Offender(file, reason, position=position, query_id=q.id, field=field))

    first_seen: dict[str, int] = {}
    for i, q in enumerate(queries):
        if not q.id.strip():
            add(i, q, "id", "empty id")
        elif (problem := id_problem(q.id, query_id=True)) is not None:
            add(i, q, "id", f"query id {problem}: ids become TREC query ids and file names")
        if q.id in first_seen:
            other_file, other_pos = source_of(first_seen[q.id])
            add(i, q, "id", f"duplicate id (first at {other_file}:{other_pos or '?'})")
        else:
            first_seen[q.id] = i
        if not q.query.strip():
            add(i, q, "query", "empty query")
        for j, s in enumerate(q.supports):
            for name in ("chunk_id", "doc_id"):
                value = getattr(s, name)
                if value is not None and (problem := id_problem(value)) is not None:
                    add(i, q, f"supports[{j}].{name}", f"{name} {problem}")
            if s.is_empty():
                add(i, q, f"supports[{j}]", "support names no evidence (no id, path, lines or snippet)")
            if q.pending:
                continue  # pending entries may carry placeholder line ranges
            if (s.line_start is not None and s.line_start < 1) or (s.line_end is not None and s.line_end < 1):
                add(i, q, f"supports[{j}]", "line numbers must be positive (1-based)")
            if s.line_start is not None and s.line_end is not None and s.line_start > s.line_end:
                add(i, q, f"supports[{j}]", f"line_start {s.line_start} > line_end {s.line_end}")
        for g, group in enumerate(q.required_support_groups):
            if not group:
                add(i, q, f"required_support_groups[{g}]", "empty group can never be satisfied")
            bad = [ix for ix in group if not 0 <= ix < len(q.supports)]
            if bad:
                add(
                    i,
                    q,
                    f"required_support_groups[{g}]",
                    f"index {bad} out of range (the query has {len(q.supports)} supports)",
                )
        if not q.answerable and q.supports:
            add(i, q, "supports", "an unanswerable query must not list gold supports")

    # Intent groups: paraphrases of one question must expect the same documents.
    groups: dict[str, list[int]] = {}
    for i, q in enumerate(queries):
        if q.group:
            groups.setdefault(q.group, []).append(i)
    for name, members in groups.items():
        reference = queries[members[0]].expected_doc_ids()
        for i in members[1:]:
            docs = queries[i].expected_doc_ids()
            if docs != reference:
                add(
                    i,
                    queries[i],
                    "group",
                    f"group {name!r}: expected docs {sorted(docs)} differ from "
                    f"{queries[members[0]].id!r}'s {sorted(reference)}",
                )
    return offenders
