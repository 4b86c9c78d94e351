"""Leaked questions: questions that quote a corpus document verbatim.

A question copied out of the document that answers it is found by any lexical retriever through
the copy, not through understanding: it inflates lexical scores and says little about a user who
asks in their own words. Both sides are normalised (:func:`~.text.normalise`) and cut into word
n-grams; a question's **share** is the fraction of its word n-grams found verbatim in one document
(the document where the fraction is highest), and its **quoted span** the longest run of its words
covered by consecutive found n-grams. A question with fewer words than ``n`` is never a leak.

One hash join of the questions' n-grams with the corpus's distinct (document, n-gram) pairs, then
group counts: no loop over questions or documents.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from kebab_eval_pipeline.golden_health.text import normalise, rolling_ngrams, word_ids

#: One row per question whose best document holds at least the threshold share of its n-grams.
LEAK_COLUMNS: dict[str, str] = {
    "row": "int64",  # the question's position in the input
    "document": "string",
    "share": "float64",  # found n-grams / the question's n-grams
    "span": "string",  # the longest quoted run of words (normalised text)
    "span_words": "int64",
}


def _empty() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series([], dtype=t) for c, t in LEAK_COLUMNS.items()})


def leaked_questions(questions: pd.Series, documents: pd.DataFrame, n: int, threshold: float) -> pd.DataFrame:
    """The questions (``questions``: texts in row order) quoting a document of ``documents``
    (columns ``document``, ``text``) for at least ``threshold`` of their word ``n``-grams.

    Output: :data:`LEAK_COLUMNS`, one row per leaked question (its best document: the highest
    share, ties broken by document name), ordered by row. ``share`` is rounded to 4 decimals."""
    q_norm = normalise(questions.reset_index(drop=True))
    d_norm = normalise(documents["text"].reset_index(drop=True))
    if len(q_norm) == 0 or len(d_norm) == 0:
        return _empty()
    q_ids, q_off, vocabulary = word_ids(q_norm)
    d_ids, d_off, _ = word_ids(d_norm, vocabulary)
    q_row, q_start, q_hash = rolling_ngrams(q_ids, q_off, n)
    d_row, _, d_hash = rolling_ngrams(d_ids, d_off, n)
    # Only the n-grams some question has matter: the corpus side is cut to those before the join.
    wanted = np.isin(d_hash, q_hash)
    corpus = pd.DataFrame({"hash": d_hash[wanted], "doc": d_row[wanted]}).drop_duplicates()
    grams = pd.DataFrame({"row": q_row, "start": q_start, "hash": q_hash})
    total = grams.groupby("row").size()
    found = grams.merge(corpus, on="hash")
    if found.empty:
        return _empty()
    names = documents["document"].astype("string").reset_index(drop=True)
    per_doc = found.groupby(["row", "doc"]).size().rename("found").reset_index()
    per_doc["share"] = per_doc["found"] / total.reindex(per_doc["row"]).to_numpy()
    per_doc["name"] = names.to_numpy(dtype=object)[per_doc["doc"].to_numpy()]
    best = per_doc.sort_values(["row", "share", "name"], ascending=[True, False, True], kind="stable")
    best = best.drop_duplicates("row")
    best = best[best["share"] >= threshold]
    if best.empty:
        return _empty()
    # The longest run of consecutive found starts in the best document: a run of r starts covers
    # r + n - 1 words.
    hits = found.merge(best[["row", "doc"]], on=["row", "doc"]).sort_values(["row", "start"])
    hits = hits.drop_duplicates(["row", "start"])
    breaks = (hits["row"].diff() != 0) | (hits["start"].diff() != 1)
    hits["run"] = breaks.cumsum()
    runs = hits.groupby("run").agg(row=("row", "first"), first=("start", "min"), length=("start", "size"))
    runs = runs.sort_values(["row", "length", "first"], ascending=[True, False, True], kind="stable")
    longest = runs.drop_duplicates("row").set_index("row")
    words = vocabulary.to_numpy(dtype=object)
    out_rows = best["row"].to_numpy()
    spans = []
    for row in out_rows:  # the flagged questions only: building their span strings
        first, length = int(longest.at[row, "first"]), int(longest.at[row, "length"])
        ids = q_ids[q_off[row] + first : q_off[row] + first + length + n - 1].astype(np.int64) - 1
        spans.append(" ".join(words[ids]))
    out = pd.DataFrame(
        {
            "row": out_rows,
            "document": best["name"].to_numpy(dtype=object),
            "share": np.round(best["share"].to_numpy(dtype=np.float64), 4),
            "span": spans,
            "span_words": longest.loc[out_rows, "length"].to_numpy() + n - 1,
        }
    )
    return out.astype(LEAK_COLUMNS).reset_index(drop=True)
