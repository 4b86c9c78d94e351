"""What a run tells its readers: the run report, the summary, the UI's per-query tables, exports
(JSON, TREC), history and the CI outputs (JUnit, job summary, PR comment)."""
