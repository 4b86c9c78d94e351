"""Step failures that are not crashes: bad input (what every asset of a chain raises for an
InputError, and what the CLI turns into exit 2 with the message alone), and an interrupted run."""

from __future__ import annotations

import dagster as dg

from kebab_eval_pipeline.errors import InputError, Interrupted
from kebab_eval_pipeline.net.secrets import mask_text

#: Metadata key of a :func:`input_failure`: the CLI reads it to exit 2 with the message alone.
INPUT_ERROR_KEY = "input_error"


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
