"""The tables a run's results are stored in (SPEC §4), one declared column set per table.

What a system returns at the edge (:class:`~kebab_eval_pipeline.contract.Hit`,
:class:`~kebab_eval_pipeline.contract.Answer`, …) is in :mod:`kebab_eval_pipeline.contract`; the
adapter protocol is in :mod:`.protocol`. The runner turns the one into the other.
"""

from __future__ import annotations

# What a system's index holds: one row per chunk.
CATALOGUE_COLUMNS: dict[str, str] = {
    "chunk_id": "string",
    "doc_id": "string",
    "doc_path": "string",
    "heading_path": "object",  # list[str]
}


# Declared columns of the retrieval_results tables (pandas dtypes).
HIT_COLUMNS: dict[str, str] = {
    "query_id": "string",
    "rank": "int64",
    "chunk_id": "string",
    "doc_id": "string",
    "doc_path": "string",
    "heading_path": "object",  # list[str]
    "line_start": "Int64",
    "line_end": "Int64",
    "snippet": "string",
    "score": "float64",
    "score_kind": "string",
    "lexical_score": "float64",
    "vector_score": "float64",
    "lexical_rank": "Int64",
    "vector_rank": "Int64",
    "index_version": "string",
    "embedding_model": "string",
    "chunker_version": "string",
}

#: The outcome columns of a query's answer (null when it has none): the ``Answer`` field of the
#: same name (``text`` for ``answer_text``).
OUTCOME_ANSWER_COLUMNS: dict[str, str] = {
    "answer_text": "string",
    "refused": "boolean",
    "grounded": "boolean",
    "refusal_reason": "string",
    "prompt_template_version": "string",
    "model": "string",
    "prompt_tokens": "Int64",
    "completion_tokens": "Int64",
    "cost_usd": "float64",  # reported by the system, else priced from its tokens (systems/costs.py)
}

OUTCOME_COLUMNS: dict[str, str] = {
    "query_id": "string",
    "n_hits": "int64",
    "retrieval_ms": "float64",
    "answer_ms": "float64",
    "error": "string",  # "error_class: message" or null
    "error_class": "string",  # timeout | http_5xx | http_4xx | connection | bad_json | … (outcome.py)
    "timed_out": "bool",
    "attempts": "Int64",  # requests sent, retries included
    "answered": "bool",  # an answer was requested and produced
    **OUTCOME_ANSWER_COLUMNS,
    "scope": "object",  # list[str]: the folders the system searched, when it reports a scope; else null
}

CITATION_COLUMNS: dict[str, str] = {
    "query_id": "string",
    "position": "int64",
    "chunk_id": "string",
    "doc_path": "string",
    "line_start": "Int64",
    "line_end": "Int64",
    "marker": "string",
}
