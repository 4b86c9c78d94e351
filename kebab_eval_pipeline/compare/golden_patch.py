"""The suspect-gold queue as a golden-set patch: candidate supports a person reviews and accepts.

The patch is a canonical golden file (``schema_version: "1"``): each queued query with its id, its
question and only the suggested supports — one per suspect hit, naming the hit by every id it
carries (``chunk_id``, ``doc_id``, ``rel_path`` from its document path, ``heading_path``, its
lines), so it matches that hit under any match criterion. Everything a reviewer needs to decide is
written as YAML comments above each support (the verdict and ranks, the hit's rank, its snippet,
the judge's relevance verdict when a judge ran), so ``golden validate`` reads the patch as it reads
any golden file. Accepting it is ``golden convert GOLDEN --accept PATCH``
(:mod:`kebab_eval_pipeline.golden.accept`).
"""

from __future__ import annotations

import json

import pandas as pd

from kebab_eval_pipeline.golden.convert import yaml_text
from kebab_eval_pipeline.golden.model import SCHEMA_VERSION, Support

_LINE_BREAKS = {0x85: " ", 0x2028: " ", 0x2029: " "}


def _comment_text(value: object, limit: int = 300) -> str:
    """One line safe inside a YAML comment: JSON-quoted (control characters escaped), the Unicode
    line breaks YAML would honour replaced, cut at ``limit`` characters."""
    text = " ".join(str(value).split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return json.dumps(text, ensure_ascii=False).translate(_LINE_BREAKS)


def _present(value: object) -> bool:
    if value is None or value is pd.NA:
        return False
    if isinstance(value, float) and value != value:
        return False
    if isinstance(value, str):
        return value != ""
    return True


def support_of(row) -> Support:
    """The support naming one suspect hit (every id it carries; grade 1)."""
    heading = row.heading_path
    headings = [str(h) for h in heading] if heading is not None and len(heading) else None
    return Support(
        chunk_id=str(row.chunk_id) if _present(row.chunk_id) else None,
        doc_id=str(row.doc_id) if _present(row.doc_id) else None,
        rel_path=str(row.doc_path) if _present(row.doc_path) else None,
        heading_path=headings,
        line_start=int(row.line_start) if _present(row.line_start) else None,
        line_end=int(row.line_end) if _present(row.line_end) else None,
    )


def _evidence(row, cutoff_note: str) -> list[str]:
    b_rank = "missed" if not _present(row.b_rank) else f"rank {int(row.b_rank)}"
    lines = [
        f"SUGGESTED ({row.verdict}: a found the first relevant hit at rank {int(row.a_rank)}, b {b_rank}"
        f"{cutoff_note if not _present(row.b_rank) else ''}); b's unjudged hit at rank {int(row.hit_rank)}",
    ]
    if _present(row.snippet):
        lines.append(f"snippet: {_comment_text(row.snippet)}")
    if _present(row.judge_relevant):
        score = f" ({float(row.judge_score):g}/5)" if _present(row.judge_score) else ""
        word = "relevant" if bool(row.judge_relevant) else "NOT relevant"
        # a judge may give its verdict without a reason (a missing string is NA, never falsy)
        reason = f": {_comment_text(row.judge_reasoning)}" if _present(row.judge_reasoning) else ""
        lines.append(f"judge: {word}{score}{reason}")
    else:
        lines.append("judge: not judged")
    return lines


def render_patch(queue: pd.DataFrame, info: dict) -> str:
    """The patch text for the suspect-gold ``queue`` (its worst-first order kept: the query of the
    worst row first, its hits by rank). ``info``: the comparison's info (run ids, both golden sets,
    the MRR cutoff is not needed: the ranks are in the queue)."""
    golden = info.get("golden_b") or {}
    run_a, run_b = info.get("run_a"), info.get("run_b")
    head = [
        f"# Candidate supports for golden set {_comment_text(golden.get('name'))} "
        f"(sha256 {str(golden.get('sha256'))[:12]}, {golden.get('path')})",
        f"# from the suspect-gold queue of run {run_b!r} compared with baseline {run_a!r}.",
        "# Each support below is SUGGESTED: a hit of the candidate run ranked above its first relevant",
        "# hit in a loss or regression, which the golden set never judged. Delete every support (or",
        "# query) that is not relevant to its question, then merge the rest into the golden set:",
        "#   kebab-eval golden convert GOLDEN --accept THIS_FILE --to canonical --out NEW_GOLDEN",
        "# and run both systems again on NEW_GOLDEN.",
    ]
    doc_head = yaml_text(
        {
            "schema_version": SCHEMA_VERSION,
            "name": f"suggested supports for {golden.get('name') or 'golden set'}",
        }
    )
    if len(queue) == 0:
        return "\n".join(head) + "\n" + doc_head + "queries: []\n"
    body = ["queries:"]
    order = pd.unique(queue["query_id"].astype(str))
    grouped = {qid: rows for qid, rows in queue.groupby(queue["query_id"].astype(str), sort=False)}
    for qid in order:
        rows = grouped[qid]
        first = rows.iloc[0]
        entry = yaml_text(
            [
                {
                    "id": qid,
                    "query": str(first["question"]) if _present(first["question"]) else qid,
                    "notes": f"suggested by kebab-eval golden suggest (run {run_b} vs {run_a})",
                }
            ]
        )
        body.append(entry.rstrip("\n"))
        body.append("  supports:")
        for row in rows.itertuples(index=False):
            body += [f"    # {line}" for line in _evidence(row, " within the MRR cutoff")]
            support = support_of(row).model_dump(exclude_none=True, exclude_defaults=True)
            item = yaml_text([support])
            body += ["    " + line for line in item.rstrip("\n").splitlines()]
    return "\n".join(head) + "\n" + doc_head + "\n".join(body) + "\n"
