"""One dynamic partition per evaluation run, keyed by run_id."""

import dagster as dg

from kebab_eval_pipeline.orchestration.registered_runs import EVAL_RUNS

eval_runs = dg.DynamicPartitionsDefinition(name=EVAL_RUNS)
