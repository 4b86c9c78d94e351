import json
import sys


def search(query, k):  # your retriever: hits best first (search_hit.v1 fields)
    return [{"doc_path": "guide.md", "heading_path": ["Setup"], "snippet": query}][:k]


for line in sys.stdin:  # one request per line; end of input means exit
    req = json.loads(line)
    if req.get("op") == "version":  # sent once after start; the reply marks the process ready
        reply = {"index_version": "my-index-1"}
    else:
        try:
            hits = search(req["query"], req["k"])
            answer = {"text": hits[0]["snippet"], "citations": []} if req["answer"] else None
            reply = {"hits": hits, "answer": answer}
        except Exception as exc:  # this query fails; the process keeps serving
            reply = {"error": str(exc)}
    print(json.dumps({"id": req["id"], **reply}), flush=True)
