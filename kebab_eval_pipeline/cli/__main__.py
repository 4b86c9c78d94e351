"""``python -m kebab_eval_pipeline.cli``: the ``kebab-eval`` command."""

from kebab_eval_pipeline.cli import console_main

console_main()
