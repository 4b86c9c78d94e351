"""Step failures that are not crashes: bad input (what every asset of a chain raises for an
InputError, and what the CLI turns into exit 2 with the message alone), another run owning the
partition (exit 4), and an interrupted run.

Each is a ``dg.Failure`` whose metadata names which of our errors it is (:data:`TYPED_FAILURES`),
so whoever reads a failed run back — the CLI's exit codes, a team's check — gets the typed error
again (:func:`raised_error`) from any executor's events, not from Dagster's record of class names."""

from __future__ import annotations

import dagster as dg

from kebab_eval_pipeline.foundation.errors import InputError, Interrupted, RunInProgress
from kebab_eval_pipeline.foundation.net.secrets import mask_text

#: Metadata key of a :func:`input_failure`: the CLI reads it to exit 2 with the message alone.
INPUT_ERROR_KEY = "input_error"
#: Metadata key of a :func:`run_in_progress_failure` (the CLI's exit 4).
RUN_IN_PROGRESS_KEY = "run_in_progress"
#: Our errors a step's failure stands for, by the metadata key its Failure carries.
TYPED_FAILURES: dict[str, type[Exception]] = {INPUT_ERROR_KEY: InputError, RUN_IN_PROGRESS_KEY: RunInProgress}


def input_failure(exc: InputError) -> dg.Failure:
    """A step failure that is bad input, not a crash: its description is the InputError's message
    (one line per offender), its metadata says so (``input_error``), and it is never retried. A
    message quoting a system's exception (a factory that raised) is masked of the run's secrets:
    the event log keeps it."""
    return dg.Failure(
        description=mask_text(exc.render()),
        metadata={INPUT_ERROR_KEY: dg.MetadataValue.json({"summary": mask_text(exc.summary)})},
        allow_retries=False,
    )


def interrupted_failure(exc: Interrupted) -> dg.Failure:
    """A step stopped by Ctrl-C (the CLI's cancellation): failed, and never retried — a retry
    policy would otherwise wait and run the step again after the user asked the run to stop."""
    return dg.Failure(description=str(exc), allow_retries=False)


def run_in_progress_failure(exc: RunInProgress) -> dg.Failure:
    """A step refused to write because another live run owns the partition: failed, never retried
    (the other run still owns it), its metadata saying so (``run_in_progress``)."""
    return dg.Failure(
        description=str(exc),
        metadata={RUN_IN_PROGRESS_KEY: dg.MetadataValue.text(str(exc))},
        allow_retries=False,
    )


def raised_error(step_failure_data) -> Exception | None:
    """Our typed error behind a failed step (the ``step_failure_data`` of its STEP_FAILURE event):
    an InputError or RunInProgress with the step's message, None for any other failure."""
    user = step_failure_data.user_failure_data
    metadata = (user.metadata or {}) if user is not None else {}
    for key, error in TYPED_FAILURES.items():
        if key in metadata:
            return error((user.description or "").strip())
    return None
