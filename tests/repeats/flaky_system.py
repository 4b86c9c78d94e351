"""A nondeterministic search system for the repeat tests: ``python flaky_system.py P Q`` speaks the
command adapter's ``protocol: jsonl`` (one long-lived process, a JSON request per line).

For query ``ID`` it returns six hits: ``ID-gold`` (the golden chunk) and five fillers. On each call,
independently, with probability ``P`` the gold hit is swapped out of the top three (to rank 4),
else it is at rank 1. With answers asked, the answer text is ``"first"`` or, with probability
``Q`` (independently), ``"second"``.

The draws come from ``os.urandom``: every call is an independent Bernoulli trial whatever the
process, its start time or its pid (a seed from the clock or a counter would need state shared
between processes, or could repeat), which is exactly what the tests' binomial intervals assume.
"""

import json
import os
import sys

p_swap, p_answer = float(sys.argv[1]), float(sys.argv[2])


def draw() -> float:
    """A uniform number in [0, 1) from the operating system's entropy."""
    return int.from_bytes(os.urandom(8), "big") / 2**64


for line in sys.stdin:
    request = json.loads(line)
    if request.get("op") == "version":
        print(json.dumps({"id": "version", "index_version": "flaky-1"}), flush=True)
        continue
    qid = request["id"]
    gold = {"chunk_id": f"{qid}-gold", "doc_id": f"{qid}-doc"}
    fillers = [{"chunk_id": f"{qid}-f{i}", "doc_id": f"{qid}-f{i}"} for i in range(1, 6)]
    order = [*fillers[:3], gold, *fillers[3:]] if draw() < p_swap else [gold, *fillers]
    reply = {"id": qid, "hits": [{"rank": i + 1, "score": 1.0 / (i + 1), **h} for i, h in enumerate(order)]}
    if request.get("answer"):
        text = "second" if draw() < p_answer else "first"
        reply["answer"] = {"text": text, "citations": [{"chunk_id": order[0]["chunk_id"]}]}
    print(json.dumps(reply), flush=True)
