"""Filling the gaps in the gold for one comparison: provisional relevance labels on unjudged hits.

Golden sets are sparse: most top hits of a run were never judged, and every retrieval metric counts
an unjudged hit as not relevant. A win that rests on hits the golden set never saw is not a win
anyone can defend — nor is a loss. With ``compare.provisional_depth: D`` (and a judge configured),
a comparison pools the hits of both runs at rank ≤ D that match no golden support (each distinct
passage of a query once), asks the judge the relevance question about each, and takes the ones it
calls relevant (score ≥ 3) as *provisional* supports of grade 1 (anchored on the hit's document,
heading path and lines, as ``golden record`` anchors a chosen hit). Both runs are then scored again
against the golden set plus those supports, and every headline metric is reported with and without
them. A metric whose delta changes sense (or appears, or vanishes) with the provisional labels is
flagged: its win or loss rests on unjudged hits.

Provisional labels never enter the golden set here; ``golden suggest`` and ``golden accept`` (the
suspect-gold review) are the way in. A failed or unparseable judgement leaves its hit unjudged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from kebab_eval_pipeline.compare.drift import restricted_scores
from kebab_eval_pipeline.compare.provisional_corrected import (
    corrected_metrics,
    few_labels_note,
    labelled_queries,
    person_verdicts,
)
from kebab_eval_pipeline.golden.columns import SUPPORT_COLUMNS
from kebab_eval_pipeline.golden.diff import GoldenDiff
from kebab_eval_pipeline.judge.agreement import agreement
from kebab_eval_pipeline.metrics.aggregate import score_results, summarize_scores
from kebab_eval_pipeline.metrics.matching import judged_hits, match_hits
from kebab_eval_pipeline.metrics.measurable import lacks_of, null_unmeasured
from kebab_eval_pipeline.store.runs import StoredRun

_ANCHOR = ("doc_path", "doc_id", "chunk_id", "heading_path", "line_start", "line_end", "snippet")
#: The pooled hits' columns, as the relevance judge reads them (``judge.relevance.relevance_inputs``).
POOL_COLUMNS = ("query_id", "question", *_ANCHOR, "runs")


def _anchor_key(frame: pd.DataFrame) -> pd.Series:
    """Per hit: the query and the anchor its provisional support would carry (as ``golden record``
    anchors a hit: its document, heading path and lines; its chunk id only when it names no
    document, its snippet only when it names nothing else) — one pooled passage per key, whatever
    chunk ids two chunkers gave it."""

    def text(column: str) -> pd.Series:
        if column not in frame.columns:
            return pd.Series([""] * len(frame), index=frame.index, dtype="string")
        values = frame[column]
        if column == "heading_path":
            values = values.map(lambda h: " > ".join(map(str, h)) if h is not None and len(h) else "")
        return values.astype("string").fillna("")

    doc_path, doc_id, chunk = text("doc_path"), text("doc_id"), text("chunk_id")
    heading, start, end = text("heading_path"), text("line_start"), text("line_end")
    document = doc_path.where(doc_path != "", "id:" + doc_id)
    no_document = (doc_path == "") & (doc_id == "")
    chunk = chunk.where(no_document, "")
    named = (document != "id:") | (heading != "") | (start != "") | (end != "") | (chunk != "")
    snippet = text("snippet").where(~named, "")
    key = frame["query_id"].astype("string")
    for part in (document, heading, start, end, chunk, snippet):
        key = key + "\x1f" + part
    return key


def pooled_unjudged(runs: Sequence[StoredRun], depth: int, criterion: str | None) -> pd.DataFrame:
    """The hits of ``runs`` at rank ≤ ``depth`` that match no support of their own golden set
    (:data:`POOL_COLUMNS`, one row per distinct passage of a query; ``runs``: which runs returned
    it, e.g. ``"a,b"``). ``criterion``: the comparison's (None: each run's stored one)."""
    frames = []
    for side, run in zip("ab"[: len(runs)], runs, strict=True):  # one run, or a comparison's two
        hits = run.retrieval.results.hits
        hits = hits[hits["rank"].to_numpy(dtype=np.int64) <= depth]
        crit = criterion or str(run.scores.info.get("match") or "auto")
        matches = match_hits(hits, run.golden.supports, crit)
        unjudged = hits.loc[~judged_hits(hits, matches)].copy()
        unjudged["runs"] = side
        frames.append(unjudged)
    pooled = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if pooled.empty:
        return pd.DataFrame({c: pd.Series([], dtype="object") for c in POOL_COLUMNS})
    pooled["_key"] = _anchor_key(pooled)
    sides = pooled.groupby("_key", sort=False)["runs"].agg(lambda s: ",".join(sorted(set(s))))
    pooled = pooled.drop_duplicates("_key").drop(columns="runs")
    pooled["runs"] = pooled["_key"].map(sides)
    queries = runs[-1].golden.queries
    questions = dict(zip(queries["query_id"].astype(str), queries["query"].astype(str), strict=True))
    # an unanswerable query has no relevant passage to find: nothing to pool
    answerable = set(queries.loc[queries["answerable"].astype(bool), "query_id"].astype(str))
    pooled = pooled[pooled["query_id"].astype(str).isin(answerable)]
    pooled["question"] = pooled["query_id"].astype(str).map(questions)
    for column in _ANCHOR:
        if column not in pooled.columns:
            pooled[column] = None
    return pooled[list(POOL_COLUMNS)].reset_index(drop=True)


def provisional_supports(judged: pd.DataFrame) -> pd.DataFrame:
    """The pooled hits the judge called relevant (``judge_relevant`` true) as golden supports of
    grade 1 (:data:`SUPPORT_COLUMNS`, anchored as ``golden record`` anchors a hit); ``support_idx``
    is numbered per query from 0 here and after each run's own supports by :func:`with_provisional`."""
    relevant = judged[judged["judge_relevant"].fillna(False).astype(bool)]
    if relevant.empty:
        return pd.DataFrame({c: pd.Series([], dtype=t) for c, t in SUPPORT_COLUMNS.items()})
    named_doc = relevant["doc_path"].notna().to_numpy() | relevant["doc_id"].notna().to_numpy()
    rows = pd.DataFrame(
        {
            "query_id": relevant["query_id"].astype(str).to_numpy(),
            "support_idx": relevant.groupby("query_id").cumcount().to_numpy(),
            "chunk_id": np.where(named_doc, None, relevant["chunk_id"].to_numpy(dtype=object)),
            "doc_id": np.where(relevant["doc_path"].notna(), None, relevant["doc_id"].to_numpy(dtype=object)),
            "rel_path": relevant["doc_path"].to_numpy(dtype=object),
            "heading_path": [list(h) if h is not None and len(h) else None for h in relevant["heading_path"]],
            "line_start": relevant["line_start"].to_numpy(dtype=object),
            "line_end": relevant["line_end"].to_numpy(dtype=object),
            "snippet": None,
            "symbol": None,
            "symbol_kind": None,
            "section": None,
            "grade": np.ones(len(relevant), dtype=np.int64),
        }
    )
    return rows.astype(SUPPORT_COLUMNS)


def provisional_scores(
    run: StoredRun, extra: pd.DataFrame, criterion: str | None, diff: GoldenDiff | None = None
) -> pd.DataFrame:
    """``run``'s per-query scores again against its golden set plus the ``extra`` supports of its
    queries — numbered after each query's own, so no provisional support takes a gold one's index —
    with the k, MRR cutoff, relevance level and criterion as compared, the metrics the run cannot
    measure nulled; over the queries unchanged between two golden sets when the comparison spans
    them (``diff``). A repeated run is scored from its first repeat (its stored results)."""
    info = run.scores.info
    ks = info.get("k") or run.metrics.info.get("k")
    own = run.golden.supports
    mine = extra[extra["query_id"].astype(str).isin(set(run.golden.queries["query_id"].astype(str)))]
    after = own.groupby("query_id")["support_idx"].max() if len(own) else pd.Series(dtype="int64")
    start = mine["query_id"].map(after).fillna(-1).astype(np.int64).to_numpy()
    mine = mine.assign(support_idx=start + 1 + mine["support_idx"].to_numpy(dtype=np.int64))
    scores = score_results(
        run.golden.queries,
        pd.concat([own, mine]).reset_index(drop=True),
        run.retrieval.results,
        ks,
        int(info.get("mrr_cutoff", 10)),
        criterion or str(info.get("match") or "auto"),
        run.scores.verification,
        relevance_level=int(info.get("relevance_level") or 1),
    )
    retrieval = run.retrieval
    scores, _ = null_unmeasured(
        scores, lacks_of(retrieval.results.system, bool(retrieval.info.get("answers", True)))
    )
    if diff is not None:  # across golden versions: the comparison's own queries only (compare/drift.py)
        scores = restricted_scores(scores, diff)
    return scores


def with_provisional(
    run: StoredRun, extra: pd.DataFrame, criterion: str | None, diff: GoldenDiff | None = None
) -> dict[str, float | None]:
    """The run metrics of :func:`provisional_scores`."""
    ks = run.scores.info.get("k") or run.metrics.info.get("k")
    return summarize_scores(provisional_scores(run, extra, criterion, diff), ks).metrics


def _sense(delta: float | None) -> int:
    return 0 if delta is None or abs(delta) < 5e-5 else (1 if delta > 0 else -1)


def provisional_rows(
    metrics: Sequence[str],
    before: tuple[dict, dict],
    after: tuple[dict, dict],
) -> list[dict]:
    """Per metric of ``metrics`` (both runs having it): a and b as compared (``before``) and with
    the provisional labels (``after``), both deltas, and ``rests_on_unjudged`` — the delta's sense
    (up, down, none) differs between the two."""
    rows = []
    for name in metrics:
        values = [m.get(name) for m in (*before, *after)]
        if any(v is None for v in values):
            continue
        a, b, a_p, b_p = (float(v) for v in values)
        delta, delta_p = round(b - a, 4), round(b_p - a_p, 4)
        rows.append(
            {
                "metric": name,
                "a": a,
                "b": b,
                "delta": delta,
                "a_provisional": a_p,
                "b_provisional": b_p,
                "delta_provisional": delta_p,
                "rests_on_unjudged": _sense(delta) != _sense(delta_p),
            }
        )
    return rows


def provisional_comparison(
    a: StoredRun,
    b: StoredRun,
    depth: int,
    criterion: str | None,
    metrics: Sequence[str],
    judge: Callable[[pd.DataFrame], tuple[pd.DataFrame, dict]],
    diff: GoldenDiff | None = None,
    references: pd.DataFrame | None = None,
    alpha: float = 0.05,
) -> dict:
    """The comparison's ``provisional`` record (module doc): ``depth``, how many unjudged hits were
    pooled and judged relevant, not relevant or left without a verdict, the judge described, the
    per-metric rows (:func:`provisional_rows`) and which metrics rest on unjudged hits. With a
    person's reference labels (``references``, :func:`~kebab_eval_pipeline.judge.labels.reference_labels`)
    on pooled hits, each row also has ``corrected`` — a, b and Δ corrected by them, with their
    ``1 − alpha`` intervals (:mod:`.provisional_corrected`) — and the record a ``people`` summary."""
    pool = pooled_unjudged((a, b), depth, criterion)
    judged, judge_info = (
        judge(pool)
        if len(pool)
        else (
            pool.assign(
                judge_relevant=pd.Series([], dtype="boolean"), item_hash=pd.Series([], dtype="string")
            ),
            {},
        )
    )
    verdict = judged["judge_relevant"]
    extra = provisional_supports(judged)
    judge_scores = (
        provisional_scores(a, extra, criterion, diff),
        provisional_scores(b, extra, criterion, diff),
    )
    ks = b.scores.info.get("k") or b.metrics.info.get("k")
    after = tuple(summarize_scores(s, ks).metrics for s in judge_scores)
    # "as judged" through the same scoring without the extra supports (not the compared metrics: a
    # repeated run's are means over its repeats), so the two deltas differ by the labels alone
    empty = extra.iloc[0:0]
    before = (with_provisional(a, empty, criterion, diff), with_provisional(b, empty, criterion, diff))
    rows = provisional_rows(metrics, before, after)
    repeated = [r.run_id for r in (a, b) if r.metrics.info.get("repeats")]
    record = {
        "depth": depth,
        "pooled": len(pool),
        "relevant": int(verdict.fillna(False).astype(bool).sum()),
        "not_relevant": int((verdict == False).fillna(False).astype(bool).sum()),  # noqa: E712 (NA-aware)
        "no_verdict": int(verdict.isna().sum()),
        "judge": judge_info.get("judge"),
        "metrics": rows,
        "rests_on_unjudged": [r["metric"] for r in rows if r["rests_on_unjudged"]],
        "note": f"repeated runs ({', '.join(repeated)}): from their first repeat" if repeated else "",
    }
    people = person_verdicts(judged, references)
    labelled = labelled_queries(judged, people)
    if labelled:
        record["people"], record["people_disagree"] = _people_correction(
            a, b, criterion, diff, judged, people, labelled, judge_scores, rows, alpha
        )
    elif people.notna().any():  # labels on the pool, but no whole query: said, not silently unused
        record["people_note"] = (
            f"people labelled {int(people.notna().sum())} pooled hit(s), but no query has all its pooled "
            "hits labelled, so nothing is corrected: label whole queries with `kebab-eval judge label "
            "--criterion relevance --against` on these two runs"
        )
    return record


def _people_correction(a, b, criterion, diff, judged, people, labelled, judge_scores, rows, alpha):
    """The ``people`` summary and, per row of ``rows`` (filled in place), ``corrected``: the
    metrics corrected by people's labels; with the metrics whose corrected Δ's interval lies wholly
    on the other side of zero from the judge's provisional Δ."""
    as_people = judged.assign(judge_relevant=people)
    as_people = as_people[as_people["query_id"].astype(str).isin(labelled)]
    extra = provisional_supports(as_people)
    people_scores = (
        provisional_scores(a, extra, criterion, diff),
        provisional_scores(b, extra, criterion, diff),
    )
    pooled = set(judged["query_id"].astype(str))
    corrected = corrected_metrics(
        [r["metric"] for r in rows], judge_scores, people_scores, pooled, labelled, alpha
    )
    disagree = []
    for row in rows:
        row["corrected"] = corrected.get(row["metric"])
        delta = (row["corrected"] or {}).get("delta") or {}
        low, high = delta.get("ci_low"), delta.get("ci_high")
        sense = _sense(row["delta_provisional"])
        if low is not None and ((sense > 0 and high < 0) or (sense < 0 and low > 0)):
            disagree.append(row["metric"])
    known = (people.notna() & judged["judge_relevant"].notna()).to_numpy()
    words = ["not relevant", "relevant"]
    said = [words[int(v)] for v in judged["judge_relevant"][known].astype(bool)]
    truth = [words[int(v)] for v in people[known].astype(bool)]
    summary = {
        "pooled_queries": len(pooled),
        "labelled_queries": len(labelled),
        "labelled_hits": int(people.notna().sum()),
        "relevant_by_people": int(people.fillna(False).astype(bool).sum()),
        "judge_agrees": int(sum(t == j for t, j in zip(truth, said, strict=True))),
        # the relevance judge against people, on the pooled hits both gave a verdict
        "agreement": agreement(truth, said, words).as_dict(),
        "alpha": alpha,
        "note": few_labels_note(len(labelled)),
    }
    return summary, disagree


def provisional_markdown(record: dict | None) -> str:
    """The comparison report's section on provisional labels ("" without a record)."""
    if not record:
        return ""
    people = record.get("people")
    lines = [
        "",
        "## With provisional labels",
        "",
        f"{record['pooled']} hit(s) at rank ≤ {record['depth']} of either run matched no golden "
        f"support; the judge called {record['relevant']} relevant, {record['not_relevant']} not "
        f"relevant ({record['no_verdict']} without a verdict). The relevant ones were added as "
        "provisional supports (never to the golden set)"
        + (f"; {record['note']}" if record.get("note") else "")
        + ":",
    ]
    if record.get("people_note"):
        lines += ["", record["people_note"][0].upper() + record["people_note"][1:] + "."]
    if people:
        level = round(100 * (1 - people["alpha"]))
        lines += [
            "",
            f"People labelled every pooled hit of {people['labelled_queries']} of the "
            f"{people['pooled_queries']} queries with pooled hits ({people['labelled_hits']} hit(s), "
            f"{people['relevant_by_people']} relevant; the judge agreed on {people['judge_agrees']}"
            + _kappa_words(people.get("agreement"))
            + "). "
            f"The last column is Δ as people would have labelled every pooled hit: a "
            f"prediction-powered estimate from those queries, with its {level}% interval"
            + (f" ({people['note']})" if people.get("note") else "")
            + ".",
        ]
    header = "| metric | Δ as judged | Δ with provisional labels | rests on unjudged hits |"
    rule = "|---|---:|---:|---|"
    if people:
        header += " Δ corrected by people's labels |"
        rule += "---:|"
    lines += ["", header, rule]
    for r in record["metrics"]:
        flag = "**yes**" if r["rests_on_unjudged"] else "no"
        line = f"| `{r['metric']}` | {r['delta']:+.4f} | {r['delta_provisional']:+.4f} | {flag} |"
        if people:
            line += f" {_corrected_cell((r.get('corrected') or {}).get('delta'))} |"
        lines.append(line)
    return "\n".join(lines) + "\n"


def _kappa_words(agreed: dict | None) -> str:
    if not agreed or agreed.get("kappa") is None:
        return ""
    return f", Cohen's κ {agreed['kappa']:.2f} [{agreed['ci_low']:.2f}, {agreed['ci_high']:.2f}]"


def _corrected_cell(value: dict | None) -> str:
    if not value or value.get("estimate") is None:
        return "—" if not value else f"— ({value['note']})"
    if value["note"] == "every pooled query labelled":
        return f"{value['estimate']:+.4f} (every pooled query labelled)"
    return f"{value['estimate']:+.4f} [{value['ci_low']:+.4f}, {value['ci_high']:+.4f}]"
