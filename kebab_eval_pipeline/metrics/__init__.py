"""Metric kernels (SPEC §6): per-query scores, vectorised over whole runs, then aggregated.

- :mod:`.retrieval` — hit@k, MRR, recall@k (support), doc_recall@k (document), recall_any/all@k,
  precision@k, nDCG@k, and the one-to-one hit ↔ support assignment they credit
- :mod:`.answers` — refusals, citation coverage, CHR, answer precision, attribution, groundedness
- :mod:`.operations` — errors, timeouts, empty results/responses, version mix, latency
- :mod:`.aggregate` — the ``query_scores`` table, run metrics, denominators, breakdowns

Nothing is imported here, so :mod:`kebab_eval_pipeline.metrics.matching` and the kernels can import each
other's modules without cycles.
"""
