"""Benchmark: OpenMP threads that spin or wait passively, for the local judge (foundation/openmp).

    python benchmarks/bench_openmp_wait.py                 # 6 judge prompts × 3 rounds
    python benchmarks/bench_openmp_wait.py --prompts 12 --rounds 5

The judge's PyTorch runs on GNU OpenMP threads, which by default spin after each parallel region.
The package sets ``OMP_WAIT_POLICY=PASSIVE`` before PyTorch loads; this measures what that costs
alone and what it saves next to other work.

Competitors, side by side in this one benchmark run: the same prompts judged by the default model
(SmolLM2-135M-Instruct) in a fresh process per case and round, with ``OMP_WAIT_POLICY=ACTIVE``
(libgomp's spinning, what PyTorch does unless told otherwise) and ``PASSIVE`` (the package's
default), each on a quiet machine and next to one busy core (a Python busy loop, standing for
another pytest worker, another executor step or another CI job). Inputs: the demo run's real
judge inputs with the short CI setting (context_k 2, context_chars 300, max_tokens 40). Rounds
alternate the cases. Printed per case: the median wall and CPU seconds of the judgements (the
model load apart), and the ratios PASSIVE/ACTIVE. The replies must be identical in every case.
Not a test: timings depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = """
import json, sys, time
sys.path.insert(0, sys.argv[2])
from bench_judge import demo_inputs, items_for, prompts_for
from kebab_eval_pipeline.judge.completion import Decoding
from kebab_eval_pipeline.judge.config import JudgeSettings
from kebab_eval_pipeline.judge.local import LocalJudge

n = int(sys.argv[1])
golden, retrieval, _ = demo_inputs()
items = items_for(golden, retrieval, JudgeSettings(context_k=2, context_chars=300))
prompts = prompts_for(items, list(items)[: (n + 1) // 2])[:n]
judge = LocalJudge(None)
decoding = Decoding(max_tokens=40)
judge.complete(prompts[0], decoding)  # the load, and the shared prefix computed once
wall, cpu = time.perf_counter(), time.process_time()
replies = [judge.complete(p, decoding).text for p in prompts]
print(json.dumps({"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu, "replies": replies}))
"""


def judged(policy: str, prompts: int) -> dict:
    env = {**os.environ, "OMP_WAIT_POLICY": policy, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(prompts), str(Path(__file__).parent)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"the judge child failed ({policy}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    cases = [(load, policy) for load in ("quiet", "one busy core") for policy in ("ACTIVE", "PASSIVE")]
    results: dict[tuple[str, str], list[dict]] = {case: [] for case in cases}
    for _ in range(args.rounds):
        for load, policy in cases:
            burner = None
            if load != "quiet":
                burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
            try:
                results[load, policy].append(judged(policy, args.prompts))
            finally:
                if burner is not None:
                    burner.kill()
                    burner.wait()
    replies = {json.dumps(r["replies"]) for runs in results.values() for r in runs}
    print(
        f"{args.prompts} judge prompts (demo, CI setting, 40-token replies), {args.rounds} rounds, "
        f"{os.cpu_count()} cores; replies identical in every case: {len(replies) == 1}"
    )
    print(f"{'machine':<15} {'OMP_WAIT_POLICY':<16} {'wall s':>8} {'cpu s':>8}")
    medians = {}
    for load, policy in cases:
        wall = statistics.median(r["wall"] for r in results[load, policy])
        cpu = statistics.median(r["cpu"] for r in results[load, policy])
        medians[load, policy] = (wall, cpu)
        print(f"{load:<15} {policy:<16} {wall:>8.2f} {cpu:>8.2f}")
    for load in ("quiet", "one busy core"):
        (wa, ca), (wp, cp) = medians[load, "ACTIVE"], medians[load, "PASSIVE"]
        print(f"{load}: PASSIVE/ACTIVE wall {wp / wa:.2f}, cpu {cp / ca:.2f}")
    if len(replies) != 1:
        raise SystemExit("the replies differ between cases")


if __name__ == "__main__":
    main()
