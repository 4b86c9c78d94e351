"""The team's Dagster definitions, loaded by ``dg`` (``[tool.dg]`` in pyproject.toml) and by
``team_search.definitions``: ``assets.py`` (the team's own assets) and one folder per evaluation
chain, each a ``defs.yaml`` of kebab-eval-pipeline's ``EvaluationChainComponent``."""
