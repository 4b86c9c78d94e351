"""HTTP plumbing shared by the http adapter, the judge's OpenAI-compatible client and the two
servers (``kebab-eval ref serve``, ``kebab-eval judge serve``).

* :mod:`.checks` — is a configured URL or header usable (checked when the config loads);
* :mod:`.secrets` — header values from environment variables, and scrubbing them (and URL
  credentials) out of every message;
* :mod:`.retry` — backoff between attempts (``Retry-After`` honoured) and quoting a failed reply;
* :mod:`.serve` — reading a JSON request body, refusing unauthenticated non-loopback binds,
  binding and running Uvicorn.

A foundation package: it imports nothing from the rest of ``kebab_eval_pipeline`` but
:mod:`~kebab_eval_pipeline.foundation.errors`. Its modules are imported on their own (this ``__init__``
imports none of them), so reading a config does not import Uvicorn.
"""
