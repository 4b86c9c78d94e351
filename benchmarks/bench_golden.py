"""Benchmark: loading a large canonical golden set (JSONL, and YAML for information).

    python benchmarks/bench_golden.py                      # 10k and 100k queries, 3 rounds each
    python benchmarks/bench_golden.py --sizes 100000 --rounds 1
    python benchmarks/bench_golden.py --data /tmp/golden-bench   # keep/reuse the generated files

Generates a seeded, realistic canonical golden set (1–3 supports per query with ``rel_path`` and
``heading_path``, some with ``chunk_id`` / lines / snippets, tags, ~10 % unanswerable queries,
intent groups whose members share identical supports, some multi-hop groups) as canonical JSONL
and canonical YAML. Each measurement runs in a fresh subprocess, so that peak RSS
(``resource.getrusage(RUSAGE_SELF).ru_maxrss`` in the child) is the load's own:

- ``load``: ``load_golden(path)`` (parse, map, validate, hash);
- ``load+tables``: the same, then ``queries_table`` + ``supports_table`` (golden/tables.py).

The child imports the golden modules without running the package ``__init__`` (which imports
Dagster for the code location); "import RSS" is the child's RSS after those imports, before
loading; "peak RSS" is ``ru_maxrss`` (cross-checked with ``VmHWM``). The data is generated in a
child too: on Linux a child's ``ru_maxrss`` starts from the RSS of the process it was spawned
from, so a parent holding the generated set would inflate it. Reported: median wall seconds over
the rounds and the largest peak RSS. Targets (issue): the 100k-query JSONL load in ≤ 5 s and
≤ 1 GiB peak RSS. Not a test: timings depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_SECONDS = 5.0
TARGET_PEAK_MIB = 1024.0
MODES = ("load", "load+tables")

SENTENCES = (
    "how does the index store chunk embeddings when a document changes and which config key sets the "
    "model why was sqlite chosen over a vector database what happens on re-ingest of renamed files "
    "where are derived caches kept can hybrid search weight lexical scores differently"
)
WORDS = SENTENCES.split()
WORDS_KO = ["색인", "검색", "문서", "캐시", "설정", "모델", "벡터", "하이브리드", "인용", "거절"]
WORDS_DE = [
    "Wie",
    "lange",
    "dauert",
    "die",
    "Indizierung",
    "großer",
    "Ordner",
    "mit",
    "Bildern",
    "und",
    "PDFs",
]
AREAS = ["docs/components/search", "docs/components/rag", "docs/components/store", "tasks", "notes/homelab"]
HEADINGS = ["Overview", "Design", "Configuration", "Decision", "Ingest", "Fallback", "Limits", "RRF"]
CATEGORIES = ["factual", "factual", "factual", "multi_hop", "recency_conflict", "code", "general"]
TAGS = ["search", "rag", "store", "ingest", "config", "ko", "regression", "pdf", "image"]


# ------------------------------------------------------------------------------------------ data


def _support(rng: random.Random) -> dict:
    area = rng.choice(AREAS)
    rel_path = f"{area}/topic-{rng.randrange(5000)}.md"
    depth = rng.randint(1, 3)
    support: dict = {"rel_path": rel_path, "heading_path": [rel_path.rsplit("/", 1)[1][:-3].title()]}
    support["heading_path"] += rng.sample(HEADINGS, depth - 1)
    if rng.random() < 0.3:
        support["chunk_id"] = f"{rel_path}#c{rng.randrange(40)}"
    if rng.random() < 0.1:
        support["doc_id"] = f"doc-{rng.randrange(20000)}"
    if rng.random() < 0.25:
        start = rng.randint(1, 400)
        support["line_start"], support["line_end"] = start, start + rng.randint(0, 60)
    if rng.random() < 0.2:
        support["snippet"] = " ".join(rng.choices(WORDS, k=rng.randint(3, 8)))
    if rng.random() < 0.15:
        support["grade"] = 2
    return support


def _text(rng: random.Random, lang: str) -> str:
    words = {"ko": WORDS_KO, "de": WORDS_DE}.get(lang, WORDS)
    return " ".join(rng.choices(words, k=rng.randint(5, 14))) + "?"


def _query(rng: random.Random, n: int) -> dict:
    lang = rng.choices(["en", "ko", "de"], weights=[8, 1, 1])[0]
    q: dict = {"id": f"q-{n:07d}", "query": _text(rng, lang), "lang": lang}
    if rng.random() < 0.10:
        q.update(answerable=False, category=rng.choice(["unanswerable", "out_of_scope", "adversarial"]))
        q["forbidden"] = [rng.choice(WORDS)]
        return q
    q["category"] = rng.choice(CATEGORIES)
    q["difficulty"] = rng.choice(["easy", "medium", "hard"])
    q["tags"] = rng.sample(TAGS, rng.randint(0, 3))
    q["supports"] = [_support(rng) for _ in range(rng.randint(1, 3))]
    if q["category"] == "multi_hop" and len(q["supports"]) > 1:
        q["required_support_groups"] = [[i] for i in range(len(q["supports"]))]
    if q["category"] == "recency_conflict":
        q["recency_rule"] = rng.choice(["cite_newer", "cite_both", "acknowledge_both"])
    if rng.random() < 0.3:
        q["must_contain"] = [rng.choice(WORDS)]
    return q


def generate_queries(n_queries: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    queries: list[dict] = []
    while len(queries) < n_queries:
        q = _query(rng, len(queries))
        queries.append(q)
        # ~3 % of answerable queries start an intent group: 1–2 paraphrases with identical supports
        if q.get("supports") and rng.random() < 0.03:
            q["group"] = f"grp-{q['id']}"
            for _ in range(rng.randint(1, 2)):
                if len(queries) == n_queries:
                    break
                twin = _query(rng, len(queries))
                twin.update(group=q["group"], supports=q["supports"], answerable=True)
                twin.pop("required_support_groups", None)
                queries.append(twin)
    return queries


def write_files(folder: Path, n_queries: int, seed: int) -> dict[str, Path]:
    import yaml

    paths = {"jsonl": folder / f"golden-{n_queries}.jsonl", "yaml": folder / f"golden-{n_queries}.yaml"}
    if all(p.exists() for p in paths.values()):
        return paths
    queries = generate_queries(n_queries, seed)
    with paths["jsonl"].open("w", encoding="utf-8") as fh:
        for q in queries:
            fh.write(json.dumps(q, ensure_ascii=False) + "\n")
    doc = {"schema_version": "1", "name": f"bench-{n_queries}", "queries": queries}
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    with paths["yaml"].open("w", encoding="utf-8") as fh:
        yaml.dump(doc, fh, Dumper=dumper, allow_unicode=True, sort_keys=False, width=100)
    return paths


# ------------------------------------------------------------------------------------------ worker


def _rss_mib() -> float:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def worker(path: Path, mode: str) -> dict:
    # Import the golden modules without the package __init__ (it imports Dagster for the code
    # location, which is not what is measured here).
    pkg = types.ModuleType("kebab_eval_pipeline")
    pkg.__path__ = [str(ROOT / "kebab_eval_pipeline")]
    sys.modules.setdefault("kebab_eval_pipeline", pkg)
    from kebab_eval_pipeline.golden.load import load_golden

    import_rss = _rss_mib()
    t0 = time.perf_counter()
    loaded = load_golden(path)
    t1 = time.perf_counter()
    n_supports = len(loaded.columns.supports["query_id"])  # before tables() lets the columns go
    if mode == "load+tables":
        t1 = time.perf_counter()
        queries, supports = loaded.tables()
        assert len(queries) == len(loaded) and len(supports) == n_supports
    t2 = time.perf_counter()
    return {
        "load_s": t1 - t0 if mode == "load" else None,
        "tables_s": t2 - t1 if mode == "load+tables" else None,
        "total_s": t2 - t0,
        "import_rss_mib": import_rss,
        "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "hwm_mib": _hwm_mib(),
        "queries": len(loaded),
        "supports": n_supports,
        "warnings": len(loaded.warnings),
    }


def _hwm_mib() -> float:
    """Peak RSS of this process image (``VmHWM``): a cross-check of ``ru_maxrss``."""
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _child(*argv: str) -> str:
    proc = subprocess.run(
        [sys.executable, __file__, *argv],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )
    if proc.returncode:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}):\n{proc.stderr}")
    return proc.stdout.strip().splitlines()[-1]


def measure(path: Path, mode: str) -> dict:
    return json.loads(_child("--worker", mode, "--path", str(path)))


# ------------------------------------------------------------------------------------------ main


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000", help="comma-separated query counts")
    ap.add_argument("--rounds", type=int, default=3, help="fresh subprocesses per measurement")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--formats", default="jsonl,yaml")
    ap.add_argument("--data", type=Path, help="reuse/keep generated files in this directory")
    ap.add_argument("--worker", choices=MODES, help=argparse.SUPPRESS)
    ap.add_argument("--generate", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--path", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.worker:
        print(json.dumps(worker(args.path, args.worker)))
        return
    if args.generate:
        paths = write_files(args.path, args.generate, args.seed)
        print(json.dumps({k: str(v) for k, v in paths.items()}))
        return

    tmp = None
    folder = args.data
    if folder is None:
        tmp = tempfile.TemporaryDirectory(prefix="bench_golden_")
        folder = Path(tmp.name)
    folder.mkdir(parents=True, exist_ok=True)
    sizes = [int(s) for s in args.sizes.split(",")]
    formats = args.formats.split(",")

    rows = []
    for size in sizes:
        t0 = time.perf_counter()
        # generated in a child: the parent stays small, since a child's ru_maxrss starts from the
        # RSS of the parent it was spawned from (Linux keeps the high-water mark across exec)
        paths = {
            k: Path(v)
            for k, v in json.loads(
                _child("--generate", str(size), "--path", str(folder), "--seed", str(args.seed))
            ).items()
        }
        print(f"generated {size:,} queries in {time.perf_counter() - t0:.1f} s → {folder}", flush=True)
        for fmt in formats:
            path = paths[fmt]
            for mode in MODES:
                runs = [measure(path, mode) for _ in range(args.rounds)]
                first = runs[0]
                key = "load_s" if mode == "load" else "tables_s"
                rows.append(
                    {
                        "size": size,
                        "format": fmt,
                        "mode": mode,
                        "file_mib": path.stat().st_size / 2**20,
                        "step_s": statistics.median(r[key] for r in runs),
                        "total_s": statistics.median(r["total_s"] for r in runs),
                        "best_total_s": min(r["total_s"] for r in runs),
                        "import_rss_mib": statistics.median(r["import_rss_mib"] for r in runs),
                        "peak_mib": max(r["peak_mib"] for r in runs),
                        "hwm_mib": max(r["hwm_mib"] for r in runs),
                        "supports": first["supports"],
                    }
                )
                r = rows[-1]
                print(
                    f"  {fmt:<5} {mode:<12} total {r['total_s']:6.2f} s (best {r['best_total_s']:.2f}), "
                    f"peak {r['peak_mib']:.0f} MiB",
                    flush=True,
                )

    python = sys.version.split()[0]
    print(f"\nrounds per row: {args.rounds} (median wall seconds, largest peak RSS); python {python}")
    header = (
        f"{'queries':>8} {'supports':>9} {'fmt':<5} {'mode':<12} {'file MiB':>8} {'load s':>7} "
        f"{'tables s':>9} {'total s':>8} {'import RSS':>11} {'peak RSS':>9} {'VmHWM':>9}"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        load = f"{r['step_s']:.2f}" if r["mode"] == "load" else "-"
        tables = f"{r['step_s']:.2f}" if r["mode"] != "load" else "-"
        print(
            f"{r['size']:>8,} {r['supports']:>9,} {r['format']:<5} {r['mode']:<12} {r['file_mib']:>8.1f} "
            f"{load:>7} {tables:>9} {r['total_s']:>8.2f} {r['import_rss_mib']:>7.0f} MiB "
            f"{r['peak_mib']:>5.0f} MiB {r['hwm_mib']:>5.0f} MiB"
        )

    def row(size: int, fmt: str, mode: str) -> dict | None:
        return next((r for r in rows if (r["size"], r["format"], r["mode"]) == (size, fmt, mode)), None)

    if len(sizes) > 1:
        small, large = min(sizes), max(sizes)
        print(f"\nscaling {small:,} → {large:,} queries (×{large / small:.0f}):")
        for fmt in formats:
            for mode in MODES:
                a, b = row(small, fmt, mode), row(large, fmt, mode)
                if a and b:
                    print(f"  {fmt:<5} {mode:<12} time ×{b['total_s'] / a['total_s']:.1f}")
    target = row(100_000, "jsonl", "load")
    if target:
        ok_time = target["total_s"] <= TARGET_SECONDS
        ok_mem = target["peak_mib"] <= TARGET_PEAK_MIB
        print(
            f"\ntarget, 100k-query JSONL load: {target['total_s']:.2f} s (≤ {TARGET_SECONDS:.0f} s: "
            f"{'met' if ok_time else 'MISSED'}), peak RSS {target['peak_mib']:.0f} MiB "
            f"(≤ {TARGET_PEAK_MIB:.0f} MiB: {'met' if ok_mem else 'MISSED'})"
        )
        with_tables = row(100_000, "jsonl", "load+tables")
        if with_tables:
            print(
                f"  with queries_table + supports_table: {with_tables['total_s']:.2f} s, "
                f"peak RSS {with_tables['peak_mib']:.0f} MiB"
            )
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
