"""Benchmark: a whole ``kebab-eval run`` on a replayed WFGY trace vs pytrec_eval and ranx (issue 25).

    python benchmarks/bench_end_to_end.py                          # 20,000 queries × 100 hits
    python benchmarks/bench_end_to_end.py --queries 100000 --hits 100
    python benchmarks/bench_end_to_end.py --sizes 20000x100,100000x100
    python benchmarks/bench_end_to_end.py --queries 2000 --profile  # cProfile the run (top functions)
    python benchmarks/bench_end_to_end.py --data /tmp/e2e           # keep/reuse the generated files

Data (seeded, not timed): N WFGY gold lines (``qid``, ``question``, 1–3 ``gold_citations`` chunk
ids, ~5 % unanswerable) and a WFGY trace of the same N queries, each with H ranked
``retrieved_ids`` (distinct per query, drawn from a pool; about 60 % of queries retrieve one of
their gold chunks somewhere in the ranking) and an ``answer_json`` {``claim``, ``citations``}.
The same run and qrels are written as TREC files (``qid Q0 doc rank score tag`` /
``qid 0 doc grade``), every hit of every ranking.

Then, in one process, one after the other (each size in a fresh child process, so peak RSS is
that size's own):

- ``pytrec_eval``: ``parse_qrel`` + ``parse_run`` of the TREC files, then ``RelevanceEvaluator``
  (``success.10``, ``recip_rank``, ``recall.10``, ``P.10``, ``ndcg_cut.10``);
- ``ranx``: ``Qrels.from_file`` + ``Run.from_file`` (kind ``trec``), then ``evaluate`` (hit_rate@10,
  mrr@10, recall@10, precision@10, ndcg@10). ranx compiles numba kernels on first use: an untimed
  warm-up evaluates a tiny input first (its seconds are printed);
- ``kebab-eval run``: the CLI's own ``run`` command called in-process (config: ``system: {kind:
  replay, path: trace, format: wfgy}``, ``match: chunk``, ``baseline: none``, answers on, default
  gates), a fresh ``DAGSTER_HOME``: its input checks, the instance's start-up, the partition and
  input observation, the Dagster chain (``execute_in_process``) and the printed result. Imports are
  done before the clock starts, and so is the creation of the fresh home's SQLite instance (a home
  is created once and reused: the timed run opens it, as a user's next run does); both figures are
  printed. Per stage: step start → step success
  from the run's Dagster event log (as ``bench_scale.py`` does); "before chain" is everything the
  command does before the job starts (checks, instance, observation).

A second section times the *parsing* of the same responses by the adapters (no I/O): the JSON
body a system would send per query (``{"hits": [{"chunk_id": …, "rank": …, "score": …}, …]}``)
decoded and read by the http adapter's parser (``http._parse_search``), the command adapter's
(``command._parse_stdout``) and the replay reader (``read_trace`` + one ``run_queries``) — each
into the stored hits table.

With two sizes or more (``--sizes``), each tool's total — and each stage of ours — is fitted as
``a + b·N`` (least squares): ``a`` the fixed cost of a run, ``b`` the cost per query.

Targets (issue 25): the run on 20k × 100 faster than ranx and within 4× of pytrec_eval; 100k ×
100 in proportion. Not a test: timings depend on the machine (the load average is printed).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_golden import _hwm_mib

ROOT = Path(__file__).resolve().parents[1]
SEED = 25
CUTOFF = 10
TARGET_VS_RANX = 1.0
TARGET_VS_PYTREC = 4.0
STEPS = ("golden_set", "retrieval_results", "query_scores", "run_metrics", "ship_gates", "comparison_report")
SHORT = {"retrieval_results": "retrieval", "query_scores": "scores", "comparison_report": "comparison"}
GOLD_SHARE = 0.6  # queries whose ranking holds one of their gold chunks
UNANSWERABLE_SHARE = 0.05
WORDS = [
    *("index", "chunk", "query", "store", "cache", "vector", "lexical", "hybrid", "fusion", "rank"),
    *("answer", "citation", "refusal", "golden", "parser", "embedding", "corpus", "section"),
    *("heading", "document", "retrieval", "latency", "timeout", "config", "schema"),
]


# ------------------------------------------------------------------------------------------ data


def _sizes(text: str) -> list[tuple[int, int]]:
    out = []
    for part in text.split(","):
        n, _, h = part.partition("x")
        out.append((int(n), int(h or 100)))
    return out


def generate(folder: Path, n_queries: int, n_hits: int, seed: int = SEED) -> dict[str, Path]:
    """The WFGY gold + trace and the TREC qrels + run of one size in ``folder`` (reused if there)."""
    import numpy as np
    import orjson

    stem = f"{n_queries}x{n_hits}-s{seed}"
    paths = {
        "gold": folder / f"gold-{stem}.jsonl",
        "trace": folder / f"trace-{stem}.jsonl",
        "qrels": folder / f"qrels-{stem}.trec",
        "run": folder / f"run-{stem}.trec",
    }
    if all(p.exists() for p in paths.values()):
        return paths
    rng = random.Random(seed)
    nrng = np.random.default_rng(seed)
    n_docs = max(1000, n_queries // 2)
    parts = ("gold", "trace", "qrels", "run")
    handles = {name: paths[name].with_suffix(".part").open("wb") for name in parts}
    try:
        for i in range(1, n_queries + 1):
            qid = f"Q{i:07d}"
            # distinct chunk ids: (doc, chunk) pairs drawn without replacement per query
            docs = nrng.integers(0, n_docs, size=n_hits + 3)
            chunks = nrng.integers(0, 40, size=n_hits + 3)
            ids = list(
                dict.fromkeys(f"d{d:06d}#{c}" for d, c in zip(docs.tolist(), chunks.tolist(), strict=True))
            )
            while len(ids) < n_hits + 3:
                ids.append(f"x{i}-{len(ids)}#0")
            retrieved, spare = ids[:n_hits], ids[n_hits:]
            answerable = rng.random() >= UNANSWERABLE_SHARE
            gold: list[str] = []
            if answerable:
                n_gold = rng.randint(1, 3)
                if rng.random() < GOLD_SHARE:
                    gold = [retrieved[min(int(rng.expovariate(0.3)), n_hits - 1)]]
                gold += spare[: n_gold - len(gold)]
                gold = list(dict.fromkeys(gold))
            question = " ".join(rng.sample(WORDS, rng.randint(4, 9))) + "?"
            refused = (not answerable and rng.random() < 0.8) or rng.random() < 0.05
            claim = "not in context" if refused else f"The {rng.choice(WORDS)} is {rng.choice(WORDS)}."
            cites = [] if refused else retrieved[: rng.randint(1, 2)]
            handles["gold"].write(
                orjson.dumps(
                    {
                        "qid": qid,
                        "question": question,
                        "answerable": answerable,
                        "gold_claim_substr": [claim.split()[1].lower()] if answerable else [],
                        "gold_citations": gold,
                    }
                )
                + b"\n"
            )
            handles["trace"].write(
                orjson.dumps(
                    {
                        "qid": qid,
                        "q": question,
                        "retrieved_ids": retrieved,
                        "answer_json": {"claim": claim, "citations": cites},
                    }
                )
                + b"\n"
            )
            handles["qrels"].write("".join(f"{qid} 0 {c} 1\n" for c in gold).encode())
            handles["run"].write(
                "".join(
                    f"{qid} Q0 {c} {r} {n_hits + 1 - r} bench\n" for r, c in enumerate(retrieved, 1)
                ).encode()
            )
    finally:
        for fh in handles.values():
            fh.close()
    for name in parts:
        paths[name].with_suffix(".part").replace(paths[name])
    return paths


# ------------------------------------------------------------------------------------ the tools


def time_pytrec(paths: dict[str, Path]) -> dict:
    import pytrec_eval

    t0 = time.perf_counter()
    with paths["qrels"].open() as fh:
        qrels = pytrec_eval.parse_qrel(fh)
    with paths["run"].open() as fh:
        run = pytrec_eval.parse_run(fh)
    t1 = time.perf_counter()
    measures = {f"success.{CUTOFF}", "recip_rank", f"recall.{CUTOFF}", f"P.{CUTOFF}", f"ndcg_cut.{CUTOFF}"}
    res = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
    t2 = time.perf_counter()
    mean = sum(r[f"ndcg_cut_{CUTOFF}"] for r in res.values()) / max(len(res), 1)
    return {"parse_s": t1 - t0, "score_s": t2 - t1, "total_s": t2 - t0, "ndcg@10": mean}


def time_ranx(paths: dict[str, Path]) -> dict:
    import ranx

    metrics = ["hit_rate@10", "mrr@10", "recall@10", "precision@10", "ndcg@10"]
    # Untimed warm-up: ranx compiles its numba kernels (file parsing, sorting, each metric) on first
    # use; a tiny pair of TREC files in the data's id shapes goes through the same calls first.
    w0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        tiny_q, tiny_r = Path(tmp) / "q.trec", Path(tmp) / "r.trec"
        tiny_q.write_text("Q0000001 0 d000000#1 1\nQ0000002 0 d000001#2 1\n", encoding="ascii")
        tiny_r.write_text(
            "Q0000001 Q0 d000000#1 1 2 w\nQ0000001 Q0 d000000#3 2 1 w\nQ0000002 Q0 d000002#1 1 2 w\n",
            encoding="ascii",
        )
        ranx.evaluate(
            ranx.Qrels.from_file(str(tiny_q), kind="trec"),
            ranx.Run.from_file(str(tiny_r), kind="trec"),
            metrics,
            make_comparable=True,
        )
    warm = time.perf_counter() - w0
    t0 = time.perf_counter()
    qrels = ranx.Qrels.from_file(str(paths["qrels"]), kind="trec")
    run = ranx.Run.from_file(str(paths["run"]), kind="trec")
    t1 = time.perf_counter()
    res = ranx.evaluate(qrels, run, metrics, make_comparable=True)
    t2 = time.perf_counter()
    return {
        "parse_s": t1 - t0,
        "score_s": t2 - t1,
        "total_s": t2 - t0,
        "warmup_s": warm,
        "ndcg@10": res["ndcg@10"],
    }


def step_spans(instance, run_id: str) -> dict[str, tuple[float, float]]:
    """(STEP_START, STEP_SUCCESS or failure) timestamps per step, from the run's event log."""
    import dagster as dg

    kind = dg.DagsterEventType
    started: dict[str, float] = {}
    spans: dict[str, tuple[float, float]] = {}
    for record in instance.get_records_for_run(
        run_id, of_type={kind.STEP_START, kind.STEP_SUCCESS, kind.STEP_FAILURE, kind.RUN_START}
    ).records:
        entry = record.event_log_entry
        event = entry.dagster_event.event_type
        if event == kind.RUN_START:
            started["<run>"] = entry.timestamp
        elif event == kind.STEP_START:
            started[entry.step_key] = entry.timestamp
        elif entry.step_key in started:
            spans[entry.step_key] = (started[entry.step_key], entry.timestamp)
    if "<run>" in started:
        spans["<run>"] = (started["<run>"], started["<run>"])
    return spans


def time_kebab(paths: dict[str, Path], home: Path, profile: bool) -> dict:
    """``kebab-eval run`` in-process on the trace (see the module docstring)."""
    t_import = time.perf_counter()
    import dagster as dg

    from kebab_eval_pipeline.cli.run import run as cli_run
    from kebab_eval_pipeline.definitions import build_definitions  # noqa: F401  (imports, not timed)
    from kebab_eval_pipeline.store.runs import RunStore

    import_s = time.perf_counter() - t_import
    home.mkdir(parents=True, exist_ok=True)
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n", encoding="utf-8")
    os.environ["DAGSTER_HOME"] = str(home)
    config = home / "run.yaml"
    config.write_text(
        json.dumps(
            {
                "golden": str(paths["gold"]),
                "system": {"kind": "replay", "path": str(paths["trace"]), "format": "wfgy"},
                "match": "chunk",
                "baseline": "none",
                "storage": str(home / "runs"),
            }
        ),
        encoding="utf-8",
    )
    # A DAGSTER_HOME is created once and then reused run after run: its SQLite schema is created
    # here, untimed (seconds on a loaded disk), and the timed run opens the existing instance as a
    # user's second run does. The creation's seconds are reported beside the figures.
    from kebab_eval_pipeline.cli.instance import open_instance

    c0 = time.perf_counter()
    open_instance().dispose()
    create_s = time.perf_counter() - c0
    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile()
    out = io.StringIO()
    started_wall = time.time()
    t0 = time.perf_counter()
    if profiler:
        profiler.enable()
    with contextlib.redirect_stdout(out):
        try:
            cli_run(run_id="bench-e2e", config=config)
        except Exception as exc:  # a failed gate is exit 1 in the CLI: the figures still count
            print(f"(run ended with {type(exc).__name__}: {exc})", file=sys.stderr)
    if profiler:
        profiler.disable()
    total = time.perf_counter() - t0
    instance = dg.DagsterInstance.get()
    runs = instance.get_run_records(limit=1)
    spans = step_spans(instance, runs[0].dagster_run.run_id) if runs else {}
    chain_start = spans.pop("<run>", (started_wall, started_wall))[0]
    metrics = RunStore(home / "runs").stored_run("bench-e2e").metrics.metrics
    result = {
        "import_s": import_s,
        "instance_create_s": create_s,
        "total_s": total,
        "before_chain_s": chain_start - started_wall,
        "steps": {step: end - start for step, (start, end) in spans.items()},
        "ndcg@10": metrics.get("ndcg@10"),
    }
    if profiler:
        import pstats

        text = io.StringIO()
        stats = pstats.Stats(profiler, stream=text).strip_dirs()
        stats.sort_stats("cumulative").print_stats(90)
        stats.sort_stats("tottime").print_stats(30)
        result["profile"] = text.getvalue()
    return result


# ----------------------------------------------------------------------------- adapter parsing


def time_parsing(paths: dict[str, Path], n_hits: int) -> dict:
    """Each adapter's parsing of the same responses into the hits table (no I/O)."""
    import orjson
    import pandas as pd

    from kebab_eval_pipeline.systems.command import parse_json_output
    from kebab_eval_pipeline.systems.hits import HitBlock, hits_frame
    from kebab_eval_pipeline.systems.http_body import parse_body
    from kebab_eval_pipeline.systems.kinds.replay import ReplaySystemSettings
    from kebab_eval_pipeline.systems.replay import ReplaySystem
    from kebab_eval_pipeline.systems.runner import run_golden
    from kebab_eval_pipeline.systems.wire import ResponseMap, parse_hit_block, parse_hits

    bodies = []
    qids = []
    with paths["trace"].open("rb") as fh:
        for line in fh:
            rec = orjson.loads(line)
            qids.append(rec["qid"])
            hits = [
                {"chunk_id": c, "rank": r, "score": float(n_hits + 1 - r), "score_kind": "bm25"}
                for r, c in enumerate(rec["retrieved_ids"], 1)
            ]
            bodies.append(orjson.dumps({"hits": hits}))
    queries = pd.DataFrame({"query_id": qids, "query": qids})
    out = {}
    mapping = ResponseMap()

    def table(parse, decode) -> float:
        started = time.perf_counter()
        blocks = []
        for qid, body in zip(qids, bodies, strict=True):
            block, _ = parse(decode(body), n_hits, mapping)
            blocks.append((qid, block))
        frame = hits_frame(blocks)
        assert len(frame) == sum(b.n for _, b in blocks)
        return time.perf_counter() - started

    out["http"] = table(parse_hit_block, parse_body)  # the http adapter: body bytes → JSON → hits
    out["command"] = table(parse_hit_block, lambda b: parse_json_output(b.decode("utf-8")))  # stdout text
    out["per_hit_models"] = table(
        lambda payload, k, m: (HitBlock.from_hits(parse_hits(payload, k, m)[0]), []), parse_body
    )  # the documented per-hit API (Hit models) into the same table, for comparison
    t0 = time.perf_counter()
    system = ReplaySystem(ReplaySystemSettings(kind="replay", path=str(paths["trace"]), format="wfgy"))
    results = run_golden(system, queries, k=n_hits, answers=False)
    out["replay"] = time.perf_counter() - t0
    out["replay_hits"] = len(results.hits)
    return out


# -------------------------------------------------------------------------------------- workers


def worker(n_queries: int, n_hits: int, folder: Path, profile: bool, skip_parsing: bool) -> dict:
    t0 = time.perf_counter()
    paths = generate(folder, n_queries, n_hits)
    gen_s = time.perf_counter() - t0
    load = os.getloadavg()[0]
    result: dict = {"queries": n_queries, "hits": n_hits, "generate_s": gen_s, "load_before": load}
    result["pytrec"] = time_pytrec(paths)
    result["ranx"] = time_ranx(paths)
    with tempfile.TemporaryDirectory(prefix="bench_e2e_home_") as home:
        result["kebab"] = time_kebab(paths, Path(home), profile)
    if not skip_parsing:
        result["parsing"] = time_parsing(paths, n_hits)
    result["load_after"] = os.getloadavg()[0]
    result["hwm_mib"] = _hwm_mib()
    result["maxrss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return result


def report(r: dict) -> None:
    p, x, k = r["pytrec"], r["ranx"], r["kebab"]
    print(
        f"\n{r['queries']:,} queries × {r['hits']} hits (data generated in {r['generate_s']:.1f} s, untimed)"
    )
    print(f"load average 1m: {r['load_before']:.2f} → {r['load_after']:.2f}; cores {os.cpu_count()}")
    print(f"{'tool':<16}{'parse s':>9}{'score s':>9}{'total s':>9}   ndcg@10")
    print(
        f"{'pytrec_eval':<16}{p['parse_s']:>9.2f}{p['score_s']:>9.2f}{p['total_s']:>9.2f}"
        f"   {p['ndcg@10']:.4f}"
    )
    print(
        f"{'ranx':<16}{x['parse_s']:>9.2f}{x['score_s']:>9.2f}{x['total_s']:>9.2f}   {x['ndcg@10']:.4f}"
        f"   (numba warm-up {x['warmup_s']:.1f} s, untimed)"
    )
    nd = k["ndcg@10"]
    print(f"{'kebab-eval run':<16}{'':>9}{'':>9}{k['total_s']:>9.2f}   {nd if nd is None else f'{nd:.4f}'}")
    print(
        f"  untimed: imports {k['import_s']:.2f} s, creating the fresh DAGSTER_HOME's instance "
        f"{k['instance_create_s']:.2f} s (once per home; the timed run opens it)"
    )
    steps = k["steps"]
    shown = [s for s in (*STEPS, *sorted(set(steps) - set(STEPS))) if s in steps]
    other = k["total_s"] - k["before_chain_s"] - sum(steps.values())
    print(
        "  stages: before chain "
        + f"{k['before_chain_s']:.2f} s, "
        + ", ".join(f"{SHORT.get(s, s)} {steps[s]:.2f} s" for s in shown)
        + f", other {other:.2f} s"
    )
    vs_ranx, vs_pytrec = k["total_s"] / x["total_s"], k["total_s"] / p["total_s"]
    print(
        f"ratios: ours/ranx {vs_ranx:.2f}× (target ≤ {TARGET_VS_RANX:.0f}×: "
        f"{'met' if vs_ranx <= TARGET_VS_RANX else 'MISSED'}), ours/pytrec_eval {vs_pytrec:.2f}× "
        f"(target ≤ {TARGET_VS_PYTREC:.0f}×: {'met' if vs_pytrec <= TARGET_VS_PYTREC else 'MISSED'})"
    )
    print(f"peak RSS of this size's process: {r['hwm_mib']:.0f} MiB (ru_maxrss {r['maxrss_mib']:.0f} MiB)")
    if "parsing" in r:
        s = r["parsing"]
        print(
            f"adapter parsing into the hits table ({s['replay_hits']:,} hits): http {s['http']:.2f} s, "
            f"command {s['command']:.2f} s, replay (read_trace + run_golden) {s['replay']:.2f} s; "
            f"per-hit Hit models (parse_hits) {s['per_hit_models']:.2f} s"
        )
    if k.get("profile"):
        print(k["profile"])


def fixed_and_per_query(results: list[dict]) -> None:
    """Each tool's time as ``a + b·N`` (least squares over the sizes run; hits per query as run):
    ``a`` is the fixed cost a run pays whatever its size, ``b`` the cost per query."""
    import numpy as np

    if len({r["queries"] for r in results}) < 2:
        return
    n = np.array([r["queries"] for r in results], dtype=float)
    print(f"\nfixed + per-query cost (fit over {', '.join(f'{int(x):,}' for x in n)} queries):")
    print(f"{'':<40}{'fixed a (s)':>12}{'per 10k queries (s)':>21}")

    def row(label: str, seconds: list[float]) -> None:
        b, a = np.polyfit(n, np.array(seconds, dtype=float), 1)
        print(f"{label:<40}{a:>12.2f}{b * 10_000:>21.2f}")

    def by_kind(steps: dict[str, float]) -> dict[str, float]:
        out: dict[str, float] = {}
        for step, seconds in steps.items():  # shard steps summed per kind (their count grows with N)
            kind = re.sub(r"\[[^\]]*\]$", "[*]", step)
            out[kind] = out.get(kind, 0.0) + seconds
        return out

    row("pytrec_eval", [r["pytrec"]["total_s"] for r in results])
    row("ranx", [r["ranx"]["total_s"] for r in results])
    row("kebab-eval run", [r["kebab"]["total_s"] for r in results])
    row("  before chain", [r["kebab"]["before_chain_s"] for r in results])
    kinds = [by_kind(r["kebab"]["steps"]) for r in results]
    steps = sorted({s for k in kinds for s in k}, key=lambda s: (s not in STEPS, s))
    for step in steps:
        row(f"  {SHORT.get(step, step)}", [k.get(step, 0.0) for k in kinds])
    row(
        "  other (Dagster)",
        [
            r["kebab"]["total_s"] - r["kebab"]["before_chain_s"] - sum(r["kebab"]["steps"].values())
            for r in results
        ],
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=20_000)
    ap.add_argument("--hits", type=int, default=100)
    ap.add_argument("--sizes", help="comma-separated NxH sizes (e.g. 20000x100,100000x100)")
    ap.add_argument("--profile", action="store_true", help="cProfile the kebab-eval run; print top functions")
    ap.add_argument("--skip-parsing", action="store_true", help="leave out the adapter parsing section")
    ap.add_argument("--data", type=Path, help="reuse/keep generated files in this directory")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        n, h = _sizes(args.worker)[0]
        print(json.dumps(worker(n, h, args.data, args.profile, args.skip_parsing)))
        return
    sizes = _sizes(args.sizes) if args.sizes else [(args.queries, args.hits)]
    tmp = Path(tempfile.mkdtemp(prefix="bench_e2e_"))
    folder = args.data or tmp
    folder.mkdir(parents=True, exist_ok=True)
    print(f"python {sys.version.split()[0]}, cores {os.cpu_count()}, data in {folder}", flush=True)
    results = []
    try:
        for n, h in sizes:
            argv = [sys.executable, __file__, "--worker", f"{n}x{h}", "--data", str(folder)]
            argv += [
                flag
                for flag, on in (("--profile", args.profile), ("--skip-parsing", args.skip_parsing))
                if on
            ]
            env = {k: v for k, v in os.environ.items() if not k.startswith("KEBAB_EVAL_")}
            env["PYTHONPATH"] = str(ROOT)
            proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
            if proc.returncode:
                raise SystemExit(
                    f"{n}x{h} failed ({proc.returncode}):\n{proc.stderr[-6000:]}{proc.stdout[-3000:]}"
                )
            results.append(json.loads(proc.stdout.strip().splitlines()[-1]))
            report(results[-1])
        fixed_and_per_query(results)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
