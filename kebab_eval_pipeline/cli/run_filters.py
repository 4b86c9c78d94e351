"""``--role`` and ``--outcome``: which stored runs ``history``, ``bisect`` and ``sweep``'s leaderboard
keep, by what a run is (:mod:`kebab_eval_pipeline.foundation.run_roles`) and whether it passed
(:mod:`kebab_eval_pipeline.compare.outcome`)."""

from __future__ import annotations

from typing import Annotated

import typer

from kebab_eval_pipeline.foundation.errors import InputError, Offender

RoleFilterOption = Annotated[
    list[str] | None,
    typer.Option(
        "--role",
        help="Only runs of this role (repeatable): ci, nightly, system-change, golden-change, manual, "
        "team-check, experiment, sweep-variant, unknown; regular (every role but sweep variants and "
        "experiments); sweep:NAME (one sweep's variants).",
    ),
]
OutcomeOption = Annotated[
    str | None,
    typer.Option(
        "--outcome",
        help="Only runs that passed (system healthy, every blocking gate passed) or failed.",
    ),
]


def check_filters(roles: list[str] | None, outcome: str | None) -> tuple[list[str], str | None]:
    """The filters when valid (``roles`` as a list); else InputError naming every bad value (exit 2)."""
    from kebab_eval_pipeline.compare.outcome import OUTCOMES
    from kebab_eval_pipeline.foundation.run_roles import check_role_filter

    offenders = []
    try:
        check_role_filter(list(roles or []))
    except InputError as exc:
        offenders += exc.offenders
    if outcome is not None and outcome not in OUTCOMES:
        offenders.append(Offender("--outcome", f"{outcome!r}: expected one of {', '.join(OUTCOMES)}"))
    if offenders:
        raise InputError("bad run filters", offenders)
    return list(roles or []), outcome
