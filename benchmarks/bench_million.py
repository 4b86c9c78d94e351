"""Benchmark: a replayed 1,000,000-query run through Dagster, against 100,000, and the comparison
of two 1M runs (issue 25).

    python benchmarks/bench_million.py                                 # 100k and 1M queries × 10 hits
    python benchmarks/bench_million.py --sizes 100000x10,1000000x10 --compare
    python benchmarks/bench_million.py --sizes 20000x10 --compare      # a quick look
    python benchmarks/bench_million.py --data /tmp/million             # keep/reuse the generated files

Data: ``bench_end_to_end.generate``'s seeded WFGY gold set and trace (generated in a child process
of its own, untimed). With ``--compare`` a second trace ("run B") is derived from the first: for
three queries in ten the first three hits are rotated and one query in twenty loses its top hit,
so the two runs differ on some queries and not on most (as a real change does).

Each run is ``kebab-eval run`` (the CLI's own ``run`` command, called in-process, as in
``bench_end_to_end.py``) in a fresh child process with nothing else in it — no competitor tool,
no data generation — so the child's ``VmHWM`` is the run's own peak RSS. Config: ``system: {kind:
replay, format: wfgy}``, ``match: chunk``, answers on, default gates, the default shard size
(so a 1M run has 100 retrieval shards). Run A has ``baseline: none``; run B (``--compare``) runs in
the same ``DAGSTER_HOME`` with ``baseline: <run A>``, so its chain ends in the comparison of the
two runs (``compare.resamples`` as given by ``--resamples``; the report records the number).

Printed per run: the command's wall time, what it did before the chain (checks, instance, input
observation), per step (shard steps summed per kind) the seconds from start to success in the
run's event log, and RSS sampled every 100 ms: when the step started → its peak; then the peak
RSS of the process and the rows in the UI's per-query tables (their cap).

Targets (issue 25): the 1M run ≤ 11× the 100k time, peak RSS ≤ 4 GiB; the comparison of two 1M
runs completes. Not a test: timings depend on the machine (the load average is printed).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_end_to_end import _sizes, generate
from bench_golden import _hwm_mib
from bench_scale import Sampler

ROOT = Path(__file__).resolve().parents[1]
TARGET_GROWTH = 11.0
TARGET_PEAK_MIB = 4096.0
SHARD = re.compile(r"\[[^\]]*\]$")


def perturb_trace(src: Path, dst: Path, seed: int = 7) -> Path:
    """Run B's trace: run A's with the first three hits rotated for 30 % of queries and the top
    hit dropped for 5 % (streamed; reused if ``dst`` exists)."""
    import orjson

    if dst.exists():
        return dst
    rng = random.Random(seed)
    part = dst.with_suffix(".part")
    with src.open("rb") as fin, part.open("wb") as fout:
        for line in fin:
            rec = orjson.loads(line)
            ids = rec["retrieved_ids"]
            draw = rng.random()
            if draw < 0.3 and len(ids) >= 3:
                rec["retrieved_ids"] = [ids[1], ids[2], ids[0], *ids[3:]]
            elif draw < 0.35 and ids:
                rec["retrieved_ids"] = ids[1:]
            fout.write(orjson.dumps(rec) + b"\n")
    part.replace(dst)
    return dst


def _family(step: str) -> str:
    """A shard step's kind: ``retrieval_results.retrieve_shard[shard_0003]`` → ``…retrieve_shard``."""
    return SHARD.sub("", step)


def run_once(trace: Path, gold: Path, home: Path, run_id: str, baseline: str, resamples: int) -> dict:
    """``kebab-eval run`` once in this (fresh) process; its figures."""
    import dagster as dg
    from bench_end_to_end import step_spans

    from kebab_eval_pipeline.cli.instance import open_instance
    from kebab_eval_pipeline.cli.run import run as cli_run
    from kebab_eval_pipeline.store.runs import RunStore

    home.mkdir(parents=True, exist_ok=True)
    if not (home / "dagster.yaml").exists():
        (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n", encoding="utf-8")
    os.environ["DAGSTER_HOME"] = str(home)
    config = home / f"{run_id}.yaml"
    config.write_text(
        json.dumps(
            {
                "golden": str(gold),
                "system": {"kind": "replay", "path": str(trace), "format": "wfgy"},
                "match": "chunk",
                "baseline": baseline,
                "compare": {"resamples": resamples},
                "storage": str(home / "runs"),
            }
        ),
        encoding="utf-8",
    )
    open_instance().dispose()  # the home's SQLite schema exists before the clock starts
    rss_before = _hwm_mib()
    sampler = Sampler(interval=0.1)
    sampler.start()
    out = io.StringIO()
    started_wall = time.time()
    t0 = time.perf_counter()
    failure = None
    with contextlib.redirect_stdout(out):
        try:
            cli_run(run_id=run_id, config=config)
        except SystemExit as exc:  # a failed gate is exit 1 in the CLI: the figures still count
            failure = f"exit {exc.code}"
        except Exception as exc:  # reported beside the figures
            failure = f"{type(exc).__name__}: {exc}"
    total = time.perf_counter() - t0
    sampler.done.set()
    sampler.join()
    instance = dg.DagsterInstance.get()
    record = instance.get_run_records(limit=1)[0]
    spans = step_spans(instance, record.dagster_run.run_id)
    chain_start = spans.pop("<run>", (started_wall, started_wall))[0]
    families: dict[str, dict] = {}
    for step, (start, end) in sorted(spans.items(), key=lambda kv: kv[1][0]):
        fam = families.setdefault(_family(step), {"s": 0.0, "n": 0, "start": start, "end": end})
        fam["s"] += end - start
        fam["n"] += 1
        fam["end"] = max(fam["end"], end)
    for fam in families.values():
        use = sampler.between(fam["start"], fam["end"])
        fam.update({"rss_start": use["rss_start"], "rss_peak": use["rss_peak"]} if use else {})
    stored = RunStore(home / "runs").stored_run(run_id)
    result = {
        "run_id": run_id,
        "total_s": total,
        "before_chain_s": chain_start - started_wall,
        "chain_s": total - (chain_start - started_wall),
        "steps": families,
        "hwm_mib": _hwm_mib(),
        "rss_at_start_mib": rss_before,
        "status": record.dagster_run.status.value,
        "failure": failure,
        "metrics": {k: stored.metrics.metrics.get(k) for k in ("ndcg@10", "mrr", "recall@10", "success@10")},
        "stdout_tail": out.getvalue()[-1500:],
    }
    materialized = instance.get_latest_materialization_event(dg.AssetKey("query_scores"))
    if materialized is not None:
        meta = materialized.asset_materialization.metadata
        result["ui_rows"] = {
            key: len(value.value.records)
            for key, value in meta.items()
            if hasattr(value, "value") and hasattr(getattr(value, "value", None), "records")
        }
    report = instance.get_latest_materialization_event(dg.AssetKey("comparison_report"))
    if baseline != "none" and report is not None:
        meta = report.asset_materialization.metadata
        result["comparison"] = {
            key: (f"{len(value.value.records)} rows" if hasattr(value.value, "records") else value.value)
            for key, value in meta.items()
            if key == "baseline_run"
            or key.startswith(("verdict/", "delta/ndcg", "p_value/ndcg"))
            or hasattr(value.value, "records")
        }
        said = re.findall(r"[^\n]*resamples[^\n]*", meta["report"].value)
        result["comparison"]["resamples (report)"] = said[0].strip()[:160] if said else "not said"
    return result


def _child(argv: list[str]) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KEBAB_EVAL_")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "benchmarks")])
    proc = subprocess.run(
        [sys.executable, __file__, *argv], capture_output=True, text=True, env=env, check=False
    )
    if proc.returncode:
        raise SystemExit(
            f"{' '.join(argv)} failed ({proc.returncode}):\n{proc.stderr[-6000:]}{proc.stdout[-3000:]}"
        )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def report(size: str, r: dict) -> None:
    print(f"\n{size} — run {r['run_id']} ({r['status']}{', ' + r['failure'] if r['failure'] else ''})")
    print(
        f"  wall {r['total_s']:.1f} s: before chain {r['before_chain_s']:.1f} s, chain {r['chain_s']:.1f} s; "
        f"load {r['load_before']:.2f} → {r['load_after']:.2f}"
    )
    print(f"  {'step (shards summed)':<44}{'steps':>6}{'s':>9}   RSS start → peak MiB")
    for name, fam in r["steps"].items():
        rss = f"{fam['rss_start']:.0f} → {fam['rss_peak']:.0f}" if "rss_peak" in fam else "-"
        print(f"  {name:<44}{fam['n']:>6}{fam['s']:>9.2f}   {rss}")
    print(f"  peak RSS {r['hwm_mib']:.0f} MiB (imports and instance: {r['rss_at_start_mib']:.0f} MiB)")
    if r.get("ui_rows"):
        print("  UI per-query tables (rows): " + ", ".join(f"{k} {v}" for k, v in r["ui_rows"].items()))
    print("  " + ", ".join(f"{k} {v:.4f}" for k, v in r["metrics"].items() if v is not None))
    if r.get("comparison"):
        print("  comparison: " + ", ".join(f"{k} {v}" for k, v in r["comparison"].items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100000x10,1000000x10", help="comma-separated NxH sizes")
    ap.add_argument(
        "--compare", action="store_true", help="a second run of each size, compared with the first"
    )
    ap.add_argument("--resamples", type=int, default=10_000, help="compare.resamples of the runs")
    ap.add_argument("--data", type=Path, help="reuse/keep generated files in this directory")
    ap.add_argument("--generate", help=argparse.SUPPRESS)
    ap.add_argument("--run", nargs=5, help=argparse.SUPPRESS)  # trace gold home run_id baseline
    args = ap.parse_args()
    if args.generate:
        n, h = _sizes(args.generate)[0]
        paths = generate(args.data, n, h)
        perturb_trace(paths["trace"], paths["trace"].with_name(paths["trace"].stem + "-b.jsonl"))
        print(json.dumps({k: str(v) for k, v in paths.items()}))
        return
    if args.run:
        trace, gold, home, run_id, baseline = args.run
        load = os.getloadavg()[0]
        result = run_once(Path(trace), Path(gold), Path(home), run_id, baseline, args.resamples)
        result.update(load_before=load, load_after=os.getloadavg()[0])
        print(json.dumps(result))
        return
    tmp = Path(tempfile.mkdtemp(prefix="bench_million_"))
    folder = args.data or tmp
    folder.mkdir(parents=True, exist_ok=True)
    print(f"python {sys.version.split()[0]}, cores {os.cpu_count()}, data in {folder}", flush=True)
    walls: dict[str, float] = {}
    peaks: dict[str, float] = {}
    try:
        for n, h in _sizes(args.sizes):
            size = f"{n:,} × {h}"
            t0 = time.perf_counter()
            paths = _child(["--generate", f"{n}x{h}", "--data", str(folder)])
            print(f"\n{size}: data ready in {time.perf_counter() - t0:.0f} s (untimed)", flush=True)
            home = tmp / f"home-{n}x{h}"
            trace_a = paths["trace"]
            trace_b = str(Path(trace_a).with_name(Path(trace_a).stem + "-b.jsonl"))
            common = ["--data", str(folder), "--resamples", str(args.resamples)]
            a = _child(["--run", trace_a, paths["gold"], str(home), f"a-{n}", "none", *common])
            report(size, a)
            walls[size], peaks[size] = a["total_s"], a["hwm_mib"]
            if args.compare:
                b = _child(["--run", trace_b, paths["gold"], str(home), f"b-{n}", f"a-{n}", *common])
                report(size + " (run B, compared with run A)", b)
                peaks[size] = max(peaks[size], b["hwm_mib"])
            shutil.rmtree(home, ignore_errors=True)
        sizes = list(walls)
        if len(sizes) >= 2:
            small, large = sizes[0], sizes[-1]
            growth = walls[large] / walls[small]
            print(
                f"\ntargets: {small} → {large} wall ×{growth:.2f} (≤ {TARGET_GROWTH:.0f}×: "
                f"{'met' if growth <= TARGET_GROWTH else 'MISSED'}); "
                f"peak RSS at {large} {peaks[large]:.0f} MiB "
                f"(≤ {TARGET_PEAK_MIB:.0f}: {'met' if peaks[large] <= TARGET_PEAK_MIB else 'MISSED'})"
            )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
