"""A synthetic history of 8 stored runs with two known change points, for the bisect tests.

Thirty queries, each with one gold document (``docs/qNN.md``, so every run is matched by
document). Each run is a replayed kebab trace scored by the real pipeline; what a run retrieves is
the rank of each query's gold document (None: not retrieved), so every per-query MRR is known:

- run 4 (step 3): the chunker changes (``c1`` → ``c2``, and with it the index version) and
  q01–q10 lose their gold document (MRR 1 → 0), while q25 rises 2 → 1 (MRR 0.5 → 1);
- run 7 (step 6): the embedding model changes (``e1`` → ``e2``) and q01–q10 find it again (0 → 1);
- every other step moves one or two of q21–q30 by a rank, in both directions (noise).

Run ids are not in time order (``build-q`` … ``build-i``), the runs are written to the store in a
shuffled order, and runs 5 and 6 share one ``created_at`` (the run id breaks the tie), so only
ordering by recorded time then id gives the history. A ninth run, on another golden set (other
content), is the oldest of all: the default golden set (the latest run's) leaves it out.
"""

from __future__ import annotations

import json
from pathlib import Path

from kebab_eval_pipeline.chain import pipeline
from kebab_eval_pipeline.chain.settings import settings_from_dict
from kebab_eval_pipeline.store.runs import RunStore
from tests.compare.conftest import hit, write_golden

QUERIES = [f"q{i:02d}" for i in range(1, 31)]
IDS = ["build-q", "build-w", "build-e", "build-r", "build-t", "build-y", "build-u", "build-i"]
CREATED = [
    "2026-03-01T08:00:00+00:00",
    "2026-03-02T08:00:00+00:00",
    "2026-03-03T08:00:00+00:00",
    "2026-03-04T08:00:00+00:00",
    "2026-03-05T08:00:00+00:00",
    "2026-03-05T08:00:00+00:00",  # same time as the run before: build-t < build-y by id
    "2026-03-07T08:00:00+00:00",
    "2026-03-08T08:00:00+00:00",
]
DROPPED = QUERIES[:10]  # q01..q10
OTHER_RUN = "build-old"  # on the other golden set, older than all


def _ranks() -> list[dict[str, int | None]]:
    base: dict[str, int | None] = {q: 1 for q in QUERIES[:20]}
    base |= {q: 2 for q in QUERIES[20:25]} | {q: 3 for q in QUERIES[25:]}
    moves: list[dict[str, int | None]] = [
        {},
        {"q21": 1, "q22": 3},  # step 1: +0.5, −1/6
        {"q21": 2, "q26": 2},  # step 2: −0.5, +1/6
        {**dict.fromkeys(DROPPED, None), "q25": 1},  # step 3: the drop (chunker c2)
        {"q27": 2, "q28": 4},  # step 4: +1/6, −1/12
        {"q22": 2},  # step 5: +1/6
        dict.fromkeys(DROPPED, 1),  # step 6: the rise (embedding model e2)
        {"q29": 1, "q30": 4},  # step 7: +2/3, −1/12
    ]
    out, current = [], dict(base)
    for move in moves:
        current = {**current, **move}
        out.append(dict(current))
    return out


RANKS = _ranks()


def mrr(run: int, query: str) -> float:
    """The MRR of ``query`` in run ``run`` (0-based), from :data:`RANKS`, as stored (4 decimals)."""
    rank = RANKS[run][query]
    return 0.0 if rank is None else round(1.0 / rank, 4)


def _trace(ranks: dict[str, int | None], chunker: str, model: str) -> list[dict]:
    rows = []
    for q in QUERIES:
        gold = ranks[q]
        hits = [
            hit(
                r,
                f"docs/{q}.md" if r == gold else f"docs/other-{q}-{r}.md",
                None,
                chunker,
                embedding_model=model,
            )
            for r in range(1, 6)
        ]
        rows.append({"query_id": q, "hits": hits})
    return rows


def _score(folder: Path, run_id: str, golden: Path, trace: list[dict]):
    # One trace path for every run: the system differs between runs only by what it returned
    # (its trace's sha256) and the versions its hits report.
    path = folder / "trace.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in trace), encoding="utf-8")
    s = settings_from_dict(
        {
            "baseline": "none",
            "golden": str(golden),
            "system": {"kind": "replay", "path": str(path), "format": "kebab"},
            "answers": False,
        }
    )
    g = pipeline.load_golden_artifact(s)
    r = pipeline.retrieve(s, g)
    scores = pipeline.score(s, g, r)
    return g, r, scores, pipeline.summarize(run_id, s, g, r, scores)


def write_history(folder: Path) -> RunStore:
    """The 8 runs (and the older run on another golden set) in a run store under ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    queries = [
        {"id": q, "query": f"question {q}", "supports": [{"rel_path": f"docs/{q}.md"}]} for q in QUERIES
    ]
    golden = write_golden(folder / "golden.yaml", queries, name="cmp")
    other = write_golden(folder / "other.yaml", queries[:20], name="other")
    store = RunStore(str(folder / "artifacts"))
    runs = [
        (IDS[i], golden, _trace(RANKS[i], "c1" if i < 3 else "c2", "e1" if i < 6 else "e2"), CREATED[i])
        for i in range(8)
    ]
    runs.append((OTHER_RUN, other, _trace(RANKS[0], "c1", "e1")[:20], "2026-02-01T08:00:00+00:00"))
    for i in (5, 2, 7, 0, 8, 3, 6, 1, 4):  # shuffled: the store's order is not the history's
        run_id, gold, trace, created = runs[i]
        g, r, scores, metrics = _score(folder, run_id, gold, trace)
        metrics.info["created_at"] = created
        for asset, artifact in (
            ("golden_set", g),
            ("retrieval_results", r),
            ("query_scores", scores),
            ("run_metrics", metrics),
        ):
            store.write(asset, run_id, *artifact.to_tables())
    return store
