"""Comparing stored runs: two runs with paired tests and per-query verdicts, many runs ranked, and a
metric bisected over the runs on one golden set."""
