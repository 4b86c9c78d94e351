"""An offline Haystack 2 "generator" for the traced pipelines of ``otel_traces.py``.

It replies with the top document's first non-heading line and reports OpenAI-style token usage
(whitespace-split word counts) in its ``meta``, so the OpenInference instrumentor records it as an
LLM span with ``llm.output_messages`` and ``llm.token_count.*``. A prompt containing
``FAIL_WORD`` makes it raise (a traced failure). Its own module: Haystack and the instrumentor
resolve a component's class by module path, so it cannot live inside a function.
"""

from typing import Any

from haystack import Document, component

FAIL_WORD = "explode"


@component
class ExtractiveGenerator:  # "Generator" in the name: the instrumentor traces it as an LLM
    @component.output_types(replies=list[str], meta=list[dict])
    def run(self, prompt: str, documents: list[Document]) -> dict[str, Any]:
        if FAIL_WORD in prompt:
            raise RuntimeError(f"the generator refuses questions that {FAIL_WORD}")
        lines = [
            line.strip()
            for d in documents[:1]
            for line in (d.content or "").split("\n")
            if line.strip() and not line.startswith("#")
        ]
        reply = lines[0] if lines else "not in context"
        usage = {"prompt_tokens": len(prompt.split()), "completion_tokens": len(reply.split())}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        return {"replies": [reply], "meta": [{"model": "extractive-first-line", "usage": usage}]}
