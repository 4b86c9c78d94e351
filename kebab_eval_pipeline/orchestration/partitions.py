"""One dynamic partition per evaluation run, keyed by run_id.

Every module that builds a definition imports this one first, so the warning filters below are in
place before any definition is built: partitioned asset checks and observable sources are marked
preview/beta in Dagster 1.13, and we rely on them deliberately (per-run gate results and staleness
in the UI).
"""

import warnings

import dagster as dg

from kebab_eval_pipeline.orchestration.registered_runs import EVAL_RUNS

warnings.filterwarnings("ignore", category=dg.PreviewWarning)
warnings.filterwarnings("ignore", category=dg.BetaWarning)

eval_runs = dg.DynamicPartitionsDefinition(name=EVAL_RUNS)
