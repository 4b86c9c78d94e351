"""The LLM judge (SPEC §6): graded groundedness and correctness of answers, pinned and cached.

``config`` (settings), ``completion`` (backend-neutral replies and the backend protocol),
``prompts`` (versioned templates and the judge input), ``parse`` (reply → score), ``local``
(transformers backend), ``openai_client`` (chat-completions backend), ``serve`` (an
OpenAI-compatible server over the local backend), ``cache``, ``run`` (judge a run) and
``metrics`` (run-level judge numbers).
"""
