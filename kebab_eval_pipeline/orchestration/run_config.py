"""Run config that a run would ignore is refused, naming it.

Dagster checks a run's config against the job's schema, but the job the UI's asset graph launches
(``__ASSET_JOB``) accepts any op and resource name: ``ops: {regression_bisect: …}`` against a
chain whose op is ``staging__regression_bisect`` — or ``resources: {eval_settings: …}`` against
``staging__eval_settings`` — runs with the entry silently ignored, and the step does its default
(no bisect, the file's settings). Every step of a chain first checks the run's config
(:func:`refuse_ignored_run_config`): a name under ``ops:`` that is not a node of the run, or under
``resources:`` that is not a resource of the run, fails the step with every offender named and,
when one exists, the name meant (the chain's own name for it).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from kebab_eval_pipeline.foundation.errors import InputError, Offender
from kebab_eval_pipeline.orchestration.failures import input_failure
from kebab_eval_pipeline.orchestration.registered_runs import SEPARATOR


def _meant(name: str, known: Collection[str]) -> str | None:
    """The known name ``name`` stands for: the same name under a chain's prefix
    (``regression_bisect`` → ``staging__regression_bisect``), or without one."""
    base = name.rsplit(SEPARATOR, 1)[-1]
    matches = sorted(k for k in known if k.rsplit(SEPARATOR, 1)[-1] == base)
    return " or ".join(matches) if matches else None


def ignored_entries(
    run_config: Mapping[str, Any], ops: Collection[str], resources: Collection[str]
) -> list[Offender]:
    """The entries of ``run_config`` a run with nodes ``ops`` and resource keys ``resources``
    would ignore: one Offender per name under ``ops:`` or ``resources:`` it does not have."""
    offenders = []
    for section, known, what in (("ops", ops, "op"), ("resources", resources, "resource")):
        entries = run_config.get(section) or {}
        if not isinstance(entries, Mapping):
            continue
        for name in entries:
            if name in known:
                continue
            meant = _meant(str(name), known)
            hint = (
                f": this run's {what} is {meant}"
                if meant
                else f" (this run's {section}: {', '.join(sorted(known))})"
            )
            offenders.append(
                Offender(
                    f"{section}.{name}",
                    f"no {what} of that name in this run, so Dagster would ignore it{hint}",
                )
            )
    return offenders


def refuse_ignored_run_config(context) -> None:
    """Fail the step (a bad-input failure: exit 2 from the CLI) when the run's config names an op
    or a resource the run does not have (:func:`ignored_entries`)."""
    job = context.job_def
    offenders = ignored_entries(
        context.run.run_config or {}, [n.name for n in job.nodes], list(job.resource_defs)
    )
    if offenders:
        raise input_failure(InputError("the run's config names what this run does not have", offenders))
