"""One dynamic partition per evaluation run, keyed by run_id."""

import dagster as dg

eval_runs = dg.DynamicPartitionsDefinition(name="eval_runs")
