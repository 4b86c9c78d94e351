"""Accept reviewed supports into a golden set: the last step of the suspect-gold review.

``kebab-eval golden suggest`` writes candidate supports as a canonical golden file (a *patch*: each
query with only its suggested supports). A reviewer deletes what is not relevant, then
``kebab-eval golden convert GOLDEN --accept PATCH --to canonical --out NEW`` merges what is left:
each patch query's supports are appended to the golden query of the same id (a support naming the
same evidence as one the query already has is skipped, its grade included: a support given twice is
refused), nothing else of the query changes (question, groups, labels).
The merged set is validated as a loaded one is (an intent group whose members would now expect
different documents is refused), so NEW always loads.
"""

from __future__ import annotations

from dataclasses import dataclass

from kebab_eval_pipeline.foundation.errors import InputError, Offender
from kebab_eval_pipeline.golden.model import GoldenSet
from kebab_eval_pipeline.golden.validate import match_key, validate_queries


@dataclass(frozen=True)
class Accepted:
    """What :func:`accept_supports` did: the merged set, supports added, supports skipped because
    the query already had them, queries changed, and warnings (a patch question that differs from
    the golden one: the patch was made from another version of the set)."""

    golden: GoldenSet
    added: int
    duplicates: int
    queries: int
    warnings: tuple[str, ...] = ()


def accept_supports(golden: GoldenSet, patches: list[tuple[str, GoldenSet]]) -> Accepted:
    """Merge the supports of every patch (``(file name, patch set)``, in order) into ``golden``.

    Raises :class:`InputError` listing every patch query whose id the golden set does not have,
    every unanswerable query given supports, and every problem of the merged set; ``golden`` itself
    is never modified."""
    queries = [q.model_copy(deep=True) for q in golden.queries]
    index = {q.id: i for i, q in enumerate(queries)}
    offenders: list[Offender] = []
    warnings: list[str] = []
    added = duplicates = 0
    changed: set[str] = set()
    for name, patch in patches:
        for position, pq in enumerate(patch.queries):
            i = index.get(pq.id)
            if i is None:
                offenders.append(
                    Offender(
                        name,
                        "not in the golden set: a patch adds supports to existing queries only",
                        position=f"queries[{position}]",
                        query_id=pq.id,
                        field="id",
                    )
                )
                continue
            target = queries[i]
            if pq.supports and not target.answerable:
                offenders.append(
                    Offender(
                        name,
                        "the golden query is unanswerable: it must not list gold supports",
                        position=f"queries[{position}]",
                        query_id=pq.id,
                        field="supports",
                    )
                )
                continue
            if " ".join(pq.query.split()) != " ".join(target.query.split()):
                warnings.append(
                    f"{name}: query {pq.id!r} asks {pq.query!r} in the patch but {target.query!r} in the "
                    "golden set (the patch was made from another version of it)"
                )
            held = {match_key(s) for s in target.supports}
            for support in pq.supports:
                if match_key(support) in held:  # the same evidence (whatever its grade): kept as it is
                    duplicates += 1
                    continue
                held.add(match_key(support))
                target.supports.append(support.model_copy())
                added += 1
                changed.add(pq.id)
    if offenders:
        raise InputError("cannot accept the suggested supports", offenders)
    problems = validate_queries(queries, lambda i: ("<merged golden set>", f"queries[{i}]"))
    if problems:
        raise InputError("the golden set with the accepted supports is not valid", problems)
    merged = golden.model_copy(update={"queries": queries})
    return Accepted(merged, added, duplicates, len(changed), tuple(warnings))
