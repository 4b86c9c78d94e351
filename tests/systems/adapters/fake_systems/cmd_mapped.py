"""A command-adapter search whose JSON is not search_hit.v1: hits under data.results, nested fields."""

import json
import sys

query = sys.argv[1]
results = [
    {"id": "doc-b#2", "src": {"path": "b.md"}, "text": f"second for {query}", "relevance": 0.4},
    {"id": "doc-a#1", "src": {"path": "a.md"}, "text": f"first for {query}", "relevance": 0.9},
]
print(json.dumps({"data": {"results": results, "total": 2}}))
