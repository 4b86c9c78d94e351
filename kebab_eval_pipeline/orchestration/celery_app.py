"""The chain's steps on Celery workers (``KEBAB_EVAL_EXECUTOR=celery``, the ``celery`` extra).

Both sides of the queue are configured here, from the same environment variables, so the run
worker that submits steps and the Celery workers that run them can never disagree:

- :func:`celery_executor` — the Dagster executor (dagster-celery's) the code location uses;
- :func:`make_worker_app` — the Celery app workers run (``kebab_eval_pipeline.celery_worker``)::

      celery -A kebab_eval_pipeline.celery_worker worker -Q dagster --concurrency 1

Settings (environment):

- ``KEBAB_EVAL_CELERY_BROKER`` (required): the broker URL, e.g. ``redis://127.0.0.1:6379/0``;
- ``KEBAB_EVAL_CELERY_BACKEND`` (optional): where task results go; the broker URL by default (a
  Redis broker is also a result backend). Either URL may carry a password: Dagster reads them from
  the environment (``{"env": ...}`` config), so they are never stored in a run's config.

A step whose worker process dies (SIGKILL, out of memory) is run again, not lost: tasks are
acknowledged only once they finish (``task_acks_late``) and a task whose worker process is lost is
put back on the queue (``task_reject_on_worker_lost``), where the next free worker takes it. A
whole worker node lost (its main process too) leaves the task unacknowledged in Redis, which hands
it out again after the transport's ``visibility_timeout`` (one hour by default; it must exceed the
longest step, or a step still running would be handed out twice). ``worker_prefetch_multiplier = 1``
keeps a busy worker from holding steps another worker could run.
"""

from __future__ import annotations

import os
from typing import Any

from kebab_eval_pipeline.foundation.errors import InputError, Offender

BROKER_ENV = "KEBAB_EVAL_CELERY_BROKER"
BACKEND_ENV = "KEBAB_EVAL_CELERY_BACKEND"
#: The queue dagster-celery routes its step tasks to (workers must consume it: ``-Q dagster``).
QUEUE = "dagster"

#: Celery settings shared by the executor's app and the workers' app.
CELERY_SETTINGS: dict[str, Any] = {
    # A step's message is acknowledged when the step is done, and re-queued when the worker
    # process running it dies: a killed step runs again on another worker instead of vanishing.
    "task_acks_late": True,
    "task_reject_on_worker_lost": True,
    # One step at a time per worker process, none reserved ahead: an idle worker takes the next
    # step rather than a busy one holding it.
    "worker_prefetch_multiplier": 1,
    # Results are read once by the run worker; an hour is plenty and keeps Redis from filling.
    "result_expires": 3600,
    # Steps write their own logs to the Dagster instance; Celery's stdout capture adds nothing.
    "worker_redirect_stdouts": False,
}


def _require_extra() -> None:
    try:
        import dagster_celery  # noqa: F401
    except ImportError:
        raise InputError(
            "the Celery executor is not installed",
            [Offender("KEBAB_EVAL_EXECUTOR", 'celery needs the celery extra: pip install -e ".[celery]"')],
        ) from None


def _broker() -> str:
    broker = os.environ.get(BROKER_ENV)
    if not broker:
        raise InputError(
            "the Celery executor needs a broker",
            [Offender(BROKER_ENV, "not set: give the broker URL, e.g. redis://127.0.0.1:6379/0")],
        )
    return broker


def celery_executor():
    """dagster-celery's executor, configured from the environment (broker and backend read by
    Dagster from the variables, never copied into the run config). InputError naming the variable
    when the broker is missing, or naming the extra when dagster-celery is not installed."""
    _require_extra()
    _broker()
    from dagster_celery import celery_executor as dagster_celery_executor

    backend_env = BACKEND_ENV if os.environ.get(BACKEND_ENV) else BROKER_ENV
    return dagster_celery_executor.configured(
        {
            "broker": {"env": BROKER_ENV},
            "backend": {"env": backend_env},
            "config_source": dict(CELERY_SETTINGS),
        },
        name="celery",
    )


def make_worker_app():
    """The Celery app workers run: dagster-celery's app and step task, with the executor's settings."""
    _require_extra()
    from dagster_celery.executor import CeleryExecutor
    from dagster_celery.make_app import make_app
    from dagster_celery.tasks import create_task

    broker = _broker()
    backend = os.environ.get(BACKEND_ENV) or broker
    executor = CeleryExecutor.for_cli(
        broker=broker,
        backend=backend,
        config_source=dict(CELERY_SETTINGS),
    )
    app = make_app(executor.app_args())
    create_task(app)
    return app
