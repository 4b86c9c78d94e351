"""Benchmark: the whole evaluation chain through Dagster at 1k, 10k and 100k queries (issue 8).

    python benchmarks/bench_scale.py                              # 1k, 10k and 100k queries
    python benchmarks/bench_scale.py --sizes 1000,10000           # other sizes
    python benchmarks/bench_scale.py --corpus ../shared/corpora/kebab-docs --seed 3
    python benchmarks/bench_scale.py --no-answers --baseline auto
    python benchmarks/bench_scale.py --sizes 100000 --profile     # cProfile the chain (top functions)
    python benchmarks/bench_scale.py --data /tmp/bs               # keep/reuse the golden files

Golden sets (seeded, built in a child process and not timed): N distinct queries synthesised from
``--corpus`` (default: the bundled demo corpus, so the benchmark runs from the repository alone),
chunked as the reference system chunks it. Most are word windows (4–14 words) of the corpus's
prose lines, half of them with one inner word left out (as people type); their gold support is
the line's document and section (``rel_path`` + ``heading_path``), with the line itself for six
lines in ten, without it for three (anchor matching) and only the document for one; half carry
``must_contain`` (another word of the line). Section headings become queries too (up to 5 %, one
per section), 5 % are out-of-scope questions (``answerable: false``), and windows of one line
sampled more than once form an intent group for one line in ten. Retrieval therefore does real
work and the metrics are neither 0 nor 1. The file is canonical JSONL (SPEC §3), one query per line.

Each size runs in a fresh subprocess with its own temporary ``DAGSTER_HOME`` (SQLite instance,
index cache and artifacts in it), as ``kebab-eval run`` does: build the definitions from a run
config (reference system, ``mode: lexical``, answers on unless ``--no-answers``, ``baseline``
``none`` unless told), register the ``eval_runs`` partition, observe the inputs (this builds the
lexical index: "setup" in the table), then ``execute_in_process`` the job — golden_set →
retrieval_results → query_scores → run_metrics (+ the ship_gates check step) →
comparison_report — with the console logger at WARNING. "chain" is that call's wall time and
"chain cpu" the process's CPU time in it; the per-stage seconds are step start → step success
from the run's Dagster event log; "other" is chain minus the steps (run start/end, event-log
writes between steps). A thread samples RSS and CPU time every 50 ms, giving each step's CPU
seconds, its RSS when it started and its peak (what a step leaves resident shows there). Peak
RSS is the child's ``VmHWM`` (its high-water mark since exec), with ``ru_maxrss`` beside it (on
Linux that one also counts the memory of the parent it was forked from, so the parent imports
nothing heavy). On a shared machine compare CPU seconds: wall time includes waiting for a core.

Targets (issue 8): from 10k to 100k queries the chain's time grows ≤ 11×, and the 100k run peaks
≤ 4 GiB. Not a test: timings depend on the machine and on whatever else runs on it (the load
average is printed beside each row).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench_golden import _hwm_mib, _rss_mib
from bench_reference import _HANGUL, _clean

ROOT = Path(__file__).resolve().parents[1]
DEMO_CORPUS = ROOT / "kebab_eval_pipeline/data/demo/corpus"
SIZES = "1000,10000,100000"
TARGET_GROWTH = 11.0
TARGET_PEAK_MIB = 4096.0
# The steps in chain order: the five assets and the gate-check step on run_metrics.
STEPS = ("golden_set", "retrieval_results", "query_scores", "run_metrics", "ship_gates", "comparison_report")
SHORT = {"retrieval_results": "retrieval", "query_scores": "scores", "comparison_report": "comparison"}
RUN_ID = "bench-scale"
# The parent's own settings must not leak into the child's run (it has its own DAGSTER_HOME).
SCRUBBED_ENV = ("KEBAB_EVAL_CONFIG", "KEBAB_EVAL_STORAGE", "KEBAB_EVAL_INDEX_CACHE", "KEBAB_EVAL_EXECUTOR")

UNANSWERABLE_SHARE = 0.05
HEADING_SHARE = 0.05
MUST_CONTAIN_SHARE = 0.5
EXACT_SHARE = 0.5  # of the line queries; the others drop one inner word of their window
WINDOW_SIZES = range(4, 15)
_OFF_TOPIC_TEXT = (
    "kubernetes ingress certificate rotation mortgage refinancing rate football transfer window "
    "quarterly earnings call smartphone battery replacement airline baggage allowance tax return "
    "deadline guitar chord progression volcano eruption forecast marathon training plan "
    "cryptocurrency wallet recovery printer driver install"
)
OFF_TOPIC = _OFF_TOPIC_TEXT.split()  # words of out-of-scope questions (none is in the demo corpus)
OFF_TOPIC_STARTS = ("How do I", "What is the", "When does the", "Why does my", "Where can I find the")

# ------------------------------------------------------------------------------------- golden set


def _passages(corpus: Path) -> list[tuple[str, list[str], int, list[str]]]:
    """(rel_path, heading_path, line, words) for every prose line (≥ 4 words) of the corpus's chunks."""

    from kebab_eval_pipeline.reference.chunk import chunk_corpus
    from kebab_eval_pipeline.reference.ingest import read_corpus
    from kebab_eval_pipeline.systems.kinds.reference import ReferenceSystemSettings

    defaults = ReferenceSystemSettings()
    chunks = chunk_corpus(read_corpus(corpus), defaults.chunk_size, defaults.chunk_overlap).chunks
    out = []
    for chunk in chunks:
        in_code = False
        for offset, raw in enumerate(chunk.text.split("\n")):
            stripped = raw.lstrip()
            if stripped.startswith(("```", "~~~")):
                in_code = not in_code
                continue
            if in_code or stripped.startswith(("|", "#", "---")) or not stripped:
                continue
            words = _clean(raw).split()
            if len(words) >= 4:
                out.append((chunk.doc_path, list(chunk.heading_path), chunk.line_start + offset, words))
    return out


def _windows(passages: list) -> tuple[list[tuple[str, int, int, int]], list[tuple[str, int, int, int]]]:
    """Distinct word windows (4–14 words) of every line, and the same with one inner word dropped
    (as people leave words out): ``(text, passage, start, span)`` each, in corpus order."""
    seen: set[str] = set()
    exact: list[tuple[str, int, int, int]] = []
    dropped: list[tuple[str, int, int, int]] = []
    for p, (_, _, _, words) in enumerate(passages):
        for size in WINDOW_SIZES:
            for start in range(len(words) - size + 1):
                text = " ".join(words[start : start + size])
                if text.lower() not in seen:
                    seen.add(text.lower())
                    exact.append((text, p, start, size))
    for p, (_, _, _, words) in enumerate(passages):
        for size in WINDOW_SIZES:
            for start in range(len(words) - size):
                span = words[start : start + size + 1]
                for d in range(1, size):
                    text = " ".join(span[:d] + span[d + 1 :])
                    if text.lower() not in seen:
                        seen.add(text.lower())
                        dropped.append((text, p, start, size + 1))
    return exact, dropped


def _support(rel_path: str, heading_path: list[str], line: int, passage: int) -> dict:
    """Six lines in ten are named with their line, three only by section, one only by document."""
    kind = passage % 10
    if kind == 9 or not heading_path:
        return {"rel_path": rel_path}
    support = {"rel_path": rel_path, "heading_path": heading_path}
    if kind < 6:
        support.update(line_start=line, line_end=line)
    return support


def _must_word(words: list[str], start: int, size: int, rng: random.Random) -> str | None:
    """A word of the line (≥ 5 letters), outside the query's window when there is one."""
    cleaned = [w.strip(".,;:!?()\"'") for w in words]
    outside = [w for i, w in enumerate(cleaned) if not start <= i < start + size and len(w) >= 5]
    inside = [w for w in cleaned if len(w) >= 5]
    pool = outside or inside
    return rng.choice(pool) if pool else None


def generate_queries(corpus: Path, n_queries: int, seed: int) -> list[dict]:
    """``n_queries`` distinct canonical queries over ``corpus`` (see the module docstring)."""
    rng = random.Random(seed)
    passages = _passages(corpus)
    exact, dropped = _windows(passages)
    sections = sorted({(rel, tuple(hp)) for rel, hp, _, _ in passages if len(hp) > 1})
    n_unans = round(n_queries * UNANSWERABLE_SHARE)
    n_head = min(round(n_queries * HEADING_SHARE), len(sections))
    n_lines = n_queries - n_unans - n_head
    n_exact = min(round(n_lines * EXACT_SHARE), len(exact))
    if n_lines - n_exact > len(dropped):
        raise SystemExit(
            f"error: {corpus} yields {len(exact) + len(dropped):,} distinct word windows; "
            f"{n_lines:,} are needed for {n_queries:,} queries (use a larger --corpus)"
        )
    picked = rng.sample(exact, n_exact) + rng.sample(dropped, n_lines - n_exact)
    per_passage: dict[int, int] = {}
    for _, p, _, _ in picked:
        per_passage[p] = per_passage.get(p, 0) + 1
    queries: list[dict] = []
    for text, p, start, span in picked:
        rel, heading_path, line, words = passages[p]
        q: dict = {
            "query": text,
            "lang": "ko" if len(_HANGUL.findall(text)) >= 2 else "en",
            "category": "factual",
            "difficulty": "easy" if span >= 10 else "medium" if span >= 6 else "hard",
            "tags": [rel.split("/", 1)[0]],
            "supports": [_support(rel, heading_path, line, p)],
        }
        if per_passage[p] > 1 and p % 10 == 0:  # windows of one line: paraphrases, one intent
            q["group"] = f"line-{p}"
        if rng.random() < MUST_CONTAIN_SHARE and (word := _must_word(words, start, span, rng)):
            q["must_contain"] = [word]
        queries.append(q)
    seen = {q["query"].lower() for q in queries}
    for rel, heading_path in rng.sample(sections, len(sections)):
        text = " ".join(heading_path[-2:])
        if n_head == 0:
            break
        if text.lower() in seen:
            continue
        seen.add(text.lower())
        n_head -= 1
        queries.append(
            {
                "query": text,
                "lang": "ko" if len(_HANGUL.findall(text)) >= 2 else "en",
                "category": "factual",
                "difficulty": "medium",
                "tags": [rel.split("/", 1)[0], "heading"],
                "supports": [{"rel_path": rel, "heading_path": list(heading_path)}],
            }
        )
    n_unans += n_head  # headings that repeat a window's text: out-of-scope questions instead
    while n_unans:
        text = f"{rng.choice(OFF_TOPIC_STARTS)} {' '.join(rng.sample(OFF_TOPIC, rng.randint(3, 6)))}?"
        if text.lower() in seen:
            continue
        seen.add(text.lower())
        n_unans -= 1
        queries.append({"query": text, "lang": "en", "answerable": False, "category": "out_of_scope"})
    rng.shuffle(queries)
    return [{"id": f"q-{i:06d}", **q} for i, q in enumerate(queries, start=1)]


def write_golden(corpus: Path, n_queries: int, seed: int, folder: Path) -> Path:
    """The golden set as canonical JSONL in ``folder`` (reused when already there)."""
    path = folder / f"golden-{corpus.name}-{n_queries}-s{seed}.jsonl"
    if not path.exists():
        partial = path.with_suffix(".part")
        with partial.open("w", encoding="utf-8") as fh:
            for q in generate_queries(corpus, n_queries, seed):
                fh.write(json.dumps(q, ensure_ascii=False) + "\n")
        partial.replace(path)
    return path


# ------------------------------------------------------------------------------------------ worker


def step_spans(instance, run_id: str) -> dict[str, tuple[float, float]]:
    """(STEP_START, STEP_SUCCESS or failure) timestamps per step, from the run's event log."""
    import dagster as dg

    kind = dg.DagsterEventType
    started: dict[str, float] = {}
    spans: dict[str, tuple[float, float]] = {}
    for record in instance.get_records_for_run(
        run_id, of_type={kind.STEP_START, kind.STEP_SUCCESS, kind.STEP_FAILURE}
    ).records:
        entry = record.event_log_entry
        if entry.dagster_event.event_type == kind.STEP_START:
            started[entry.step_key] = entry.timestamp
        elif entry.step_key in started:
            spans[entry.step_key] = (started[entry.step_key], entry.timestamp)
    return spans


class Sampler(threading.Thread):
    """This process's RSS and CPU time every ``interval`` seconds, stamped with wall-clock time
    (the event log's clock), to tell what each step used."""

    def __init__(self, interval: float = 0.05) -> None:
        super().__init__(daemon=True)
        self.interval = interval
        self.samples: list[tuple[float, float, float]] = []  # (time.time(), RSS MiB, CPU s)
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(self.interval):
            self.samples.append((time.time(), _rss_mib(), time.process_time()))

    def between(self, start: float, end: float) -> dict | None:
        """RSS when the step started, peak RSS and CPU seconds while it ran (samples in [start, end])."""
        inside = [(rss, cpu) for t, rss, cpu in self.samples if start <= t <= end]
        if not inside:
            return None
        return {
            "rss_start": inside[0][0],
            "rss_peak": max(rss for rss, _ in inside),
            "cpu_s": inside[-1][1] - inside[0][1],
        }


def worker(config: Path, profile: bool) -> dict:
    """One size in this fresh process: what ``kebab-eval run`` does, timed and measured."""
    t_import = time.perf_counter()
    import dagster as dg
    from bench_chain import QUIET

    from kebab_eval_pipeline.definitions import JOB_NAME, build_definitions, run_settings
    from kebab_eval_pipeline.orchestration.assets import observe_inputs
    from kebab_eval_pipeline.orchestration.partitions import eval_runs

    import_s, import_rss = time.perf_counter() - t_import, _rss_mib()
    t0 = time.perf_counter()
    defs = build_definitions(config)
    instance = dg.DagsterInstance.get()
    instance.add_dynamic_partitions(eval_runs.name, [RUN_ID])
    observe_inputs(instance, run_settings(defs))  # builds the lexical index
    job = defs.resolve_job_def(JOB_NAME)
    t1 = time.perf_counter()
    profiler = cProfile.Profile() if profile else None
    sampler = Sampler()
    sampler.start()
    cpu0 = time.process_time()
    if profiler:
        profiler.enable()
    result = job.execute_in_process(
        partition_key=RUN_ID, instance=instance, run_config=QUIET, raise_on_error=False
    )
    if profiler:
        profiler.disable()
    t2, cpu2 = time.perf_counter(), time.process_time()
    sampler.done.set()
    sampler.join()
    if not result.success:
        failures = [e.step_failure_data.error.to_string() for e in result.all_events if e.is_step_failure]
        raise SystemExit("run failed:\n" + "\n".join(failures))
    mats = {
        e.asset_key.path[-1]: e.step_materialization_data.materialization.metadata
        for e in result.get_asset_materialization_events()
    }
    metrics = {
        k.removeprefix("metric/"): v.value for k, v in mats["run_metrics"].items() if k.startswith("metric/")
    }
    spans = step_spans(instance, result.run_id)
    out = {
        "queries": mats["golden_set"]["golden_queries"].value,
        "import_s": import_s,
        "setup_s": t1 - t0,
        "chain_s": t2 - t1,
        "chain_cpu_s": cpu2 - cpu0,
        "steps": {step: end - start for step, (start, end) in spans.items()},
        "step_use": {step: sampler.between(*span) for step, span in spans.items()},
        "metrics": metrics,
        "import_rss_mib": import_rss,
        "hwm_mib": _hwm_mib(),
        "maxrss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    if profiler:
        text = io.StringIO()
        stats = pstats.Stats(profiler, stream=text).strip_dirs()
        stats.sort_stats("cumulative").print_stats(30)
        stats.sort_stats("tottime").print_stats(25)
        out["profile"] = text.getvalue()
    return out


# -------------------------------------------------------------------------------------------- main


def _child(*argv: str, env: dict[str, str] | None = None) -> dict:
    """Run this script in a fresh interpreter; its last stdout line is JSON."""
    proc = subprocess.run(
        [sys.executable, __file__, *argv],
        capture_output=True,
        text=True,
        env={**(env or os.environ), "PYTHONPATH": str(ROOT)},
        check=False,
    )
    if proc.returncode:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}):\n{proc.stderr}{proc.stdout[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_size(golden: Path, corpus: Path, args: argparse.Namespace, home: Path) -> dict:
    """Materialise the chain for one golden set in a child with a fresh DAGSTER_HOME."""
    home.mkdir(parents=True)
    (home / "dagster.yaml").touch()
    config = home / "run.yaml"
    run = {
        "golden": str(golden),
        "system": {"kind": "reference", "corpus": str(corpus), "mode": "lexical"},
        "answers": args.answers,
        "baseline": args.baseline,
    }
    config.write_text(json.dumps(run, indent=2), encoding="utf-8")  # JSON is YAML
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED_ENV}
    env["DAGSTER_HOME"] = str(home)
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    argv = ["--worker", "--config", str(config), *(["--profile"] if args.profile else [])]
    result = _child(*argv, env=env)
    result["process_s"] = time.perf_counter() - started
    result["load"] = (load_before, os.getloadavg()[0])
    return result


def _stage_names(rows: list[dict]) -> list[str]:
    """The chain's steps in order, then any other step a configuration adds."""
    others = sorted({s for r in rows for s in r["steps"]} - set(STEPS))
    return [*STEPS, *others]


def _short(step: str) -> str:
    return SHORT.get(step, step)


def print_table(rows: list[dict]) -> None:
    stages = _stage_names(rows)
    cols = [("queries", 8), ("setup s", 8), ("chain s", 8), ("chain cpu", 9)]
    cols += [(_short(s), 11) for s in stages]
    cols += [("other s", 8), ("peak RSS", 9), ("ru_maxrss", 9), ("load 1m", 11)]
    header = " ".join(f"{name:>{width}}" for name, width in cols)
    print(header)
    print("-" * len(header))
    for r in rows:
        steps = [r["steps"].get(s) for s in stages]
        other = r["chain_s"] - sum(s for s in steps if s is not None)
        cells = [f"{r['queries']:>8,}", f"{r['setup_s']:>8.2f}", f"{r['chain_s']:>8.2f}"]
        cells.append(f"{r['chain_cpu_s']:>9.2f}")
        cells += [f"{s:>11.2f}" if s is not None else f"{'-':>11}" for s in steps]
        cells += [f"{other:>8.2f}", f"{r['hwm_mib']:>5.0f} MiB", f"{r['maxrss_mib']:>5.0f} MiB"]
        cells.append(f"{r['load'][0]:>5.2f}→{r['load'][1]:<5.2f}")
        print(" ".join(cells))
    print("\nper step, sampled every 50 ms: CPU seconds of this process (all threads), then RSS when")
    print("the step started → its peak while it ran (MiB)")
    print(" ".join([f"{'queries':>8}", *(f"{_short(s):>11}" for s in stages)]))
    for r in rows:
        use = [r["step_use"].get(s) for s in stages]
        cpu = [f"{u['cpu_s']:>11.2f}" if u else f"{'-':>11}" for u in use]
        rss = [f"{u['rss_start']:.0f}→{u['rss_peak']:.0f}" if u else "-" for u in use]
        print(" ".join([f"{r['queries']:>8,}", *cpu]))
        print(" ".join([f"{'':>8}", *(f"{cell:>11}" for cell in rss)]))
    print("\nmetrics (sanity: real retrieval, neither 0 nor 1):")
    for r in rows:
        shown = ", ".join(
            f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}" for k, v in sorted(r["metrics"].items())
        )
        print(f"  {r['queries']:>8,}: {shown}")


def print_growth(rows: list[dict]) -> None:
    by_size = {r["queries"]: r for r in rows}
    for small, large in ((1_000, 10_000), (10_000, 100_000)):
        a, b = by_size.get(small), by_size.get(large)
        if not (a and b):
            continue
        stages = [s for s in _stage_names(rows) if s in a["steps"] and s in b["steps"]]
        per_stage = ", ".join(f"{_short(s)} ×{b['steps'][s] / a['steps'][s]:.1f}" for s in stages)
        print(
            f"\ngrowth {small:,} → {large:,} queries (×{large // small}): chain time "
            f"×{b['chain_s'] / a['chain_s']:.2f} (CPU ×{b['chain_cpu_s'] / a['chain_cpu_s']:.2f}), "
            "setup+chain ×"
            f"{(b['setup_s'] + b['chain_s']) / (a['setup_s'] + a['chain_s']):.2f}, "
            f"peak RSS ×{b['hwm_mib'] / a['hwm_mib']:.2f}\n  per stage: {per_stage}"
        )
    big, base = by_size.get(100_000), by_size.get(10_000)
    if big and base:
        growth = big["chain_s"] / base["chain_s"]
        print(
            f"\ntargets: 10k → 100k chain time ×{growth:.2f} (≤ {TARGET_GROWTH:.0f}×: "
            f"{'met' if growth <= TARGET_GROWTH else 'MISSED'}); peak RSS at 100k {big['hwm_mib']:.0f} MiB "
            f"(≤ {TARGET_PEAK_MIB:.0f} MiB: {'met' if big['hwm_mib'] <= TARGET_PEAK_MIB else 'MISSED'})"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default=SIZES, help="comma-separated query counts")
    ap.add_argument("--corpus", type=Path, default=DEMO_CORPUS, help="markdown folder (default: demo)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--answers", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--baseline", choices=("none", "auto"), default="none")
    ap.add_argument("--profile", action="store_true", help="cProfile the chain; print top functions")
    ap.add_argument("--data", type=Path, help="reuse/keep generated golden files in this directory")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--generate", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--config", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.worker:
        print(json.dumps(worker(args.config, args.profile)))
        return
    if args.generate:
        print(json.dumps(str(write_golden(args.corpus, args.generate, args.seed, args.data))))
        return

    corpus = args.corpus.resolve()
    if not corpus.is_dir():
        ap.error(f"--corpus {args.corpus}: not a directory")
    try:
        sizes = [int(s) for s in args.sizes.split(",")]
    except ValueError:
        ap.error(f"--sizes {args.sizes!r}: expected comma-separated integers")
    if any(size < 1 for size in sizes):
        ap.error(f"--sizes {args.sizes!r}: query counts must be positive")
    tmp = Path(tempfile.mkdtemp(prefix="bench_scale_"))
    folder = args.data or tmp
    folder.mkdir(parents=True, exist_ok=True)
    print(
        f"corpus {corpus}, seed {args.seed}, answers {'on' if args.answers else 'off'}, "
        f"baseline {args.baseline}, cores {os.cpu_count()}, python {sys.version.split()[0]}",
        flush=True,
    )
    rows = []
    try:
        for size in sizes:
            t0 = time.perf_counter()
            # generated in a child: the parent stays small (a child's ru_maxrss includes it)
            gen = ["--generate", str(size), "--corpus", str(corpus), "--seed", str(args.seed)]
            golden = Path(_child(*gen, "--data", str(folder)))
            print(f"golden set of {size:,} queries in {time.perf_counter() - t0:.1f} s: {golden}", flush=True)
            row = run_size(golden, corpus, args, tmp / f"home-{size}")
            rows.append(row)
            print(
                f"  setup {row['setup_s']:.2f} s, chain {row['chain_s']:.2f} s, "
                f"peak RSS {row['hwm_mib']:.0f} MiB",
                flush=True,
            )
            if row.get("profile"):
                print(row["profile"], flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print()
    print_table(rows)
    print_growth(rows)


if __name__ == "__main__":
    main()
