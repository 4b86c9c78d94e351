"""The Celery app of the workers that run the chain's steps (``KEBAB_EVAL_EXECUTOR=celery``)::

    celery -A kebab_eval_pipeline.celery_worker worker -Q dagster --concurrency 1

dagster-celery's step task, with the settings of :mod:`kebab_eval_pipeline.orchestration.celery_app`
read from the same environment as the executor (``KEBAB_EVAL_CELERY_BROKER``: an InputError naming
it when unset). See docs/site/recipes/celery.md.
"""

from __future__ import annotations

# Imported here, in the worker's main process, so every pool process forked from it starts a step
# with dagster, pandas and the chain already loaded instead of importing them (seconds) per process.
import kebab_eval_pipeline.definitions  # noqa: F401
from kebab_eval_pipeline.orchestration.celery_app import make_worker_app

app = make_worker_app()
