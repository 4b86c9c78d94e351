"""A command-adapter ask that answers in a different JSON shape per query text (argv[1]).

Shapes: ``nested`` ({"answer": {...}}), ``bare`` (the answer object itself), ``string``
({"answer": "text", "citations": [...]}), ``wfgy`` ({"claim": "not in context"}); ``fail``
exits 4 with a message on stderr.
"""

import json
import sys

query = sys.argv[1]
if query == "nested":
    out = {
        "answer": {
            "text": "Keep the starter at 24 °C [#1].",
            "citations": [{"chunk_id": "c1", "marker": 1}],
            "prompt_template_version": "tpl-7",
            "model": "tiny-gen",
            "usage": {"prompt_tokens": 120, "completion_tokens": 9},
        }
    }
elif query == "bare":
    out = {
        "text": "Use 20 g of salt per kilo.",
        "citations": [{"citation": {"path": "vegetables/sauerkraut.md", "start": 3, "end": 5}}],
        "refused": False,
    }
elif query == "string":
    out = {"answer": "Twenty grams.", "citations": ["c1"]}
elif query == "wfgy":
    out = {"claim": "not in context", "citations": []}
elif query == "fail":
    sys.stderr.write("generator unavailable: model not loaded\n")
    sys.exit(4)
else:
    out = {"answer": {"text": f"unknown shape {query}"}}
print(json.dumps(out, ensure_ascii=False))
