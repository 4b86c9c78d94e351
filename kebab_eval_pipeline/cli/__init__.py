"""``kebab-eval``: the helper CLI for what Dagster's own CLI does not do.

:mod:`.main` assembles the commands (:mod:`.run`, :mod:`.runs`, :mod:`.baseline`, :mod:`.golden`,
:mod:`.stored`; the reference system's ``ref`` and the judge's ``judge`` sub-CLIs) and maps every
outcome to an exit code; :mod:`.driver` runs a partition in-process; :mod:`.instance` opens the
Dagster instance and the run store; :mod:`.show`, :mod:`.console`, :mod:`.tables`,
:mod:`.terminal` and :mod:`.progress_display` are what the CLI prints.
"""

from kebab_eval_pipeline.cli.main import app, console_main, main

__all__ = ["app", "console_main", "main"]
