"""kebab-eval-pipeline: evaluate RAG and search systems against golden query sets, as Dagster partitions.

The Dagster code location is :data:`kebab_eval_pipeline.definitions.defs`
(``dagster dev`` finds it through ``workspace.yaml`` / ``[tool.dagster]``). It is
kept out of this package's ``__init__`` so that the command-line tools, above all
``kebab-eval ref search`` — run once per query by the command adapter — start
without importing Dagster.
"""
