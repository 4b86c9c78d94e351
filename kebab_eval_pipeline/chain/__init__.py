"""The evaluation chain as plain functions and typed values: the run config, the artifacts
between stages, and the stages themselves (golden set → retrieval → judge → scores → metrics →
comparison), callable and testable without Dagster."""
