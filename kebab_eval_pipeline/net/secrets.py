"""Credentials in HTTP requests: header values read from environment variables, and the text a
message quotes stripped of them.

Secrets come from the environment (the http adapter's ``headers_from_env``, the judge's
``api_key_env``). What an error message or the run's metadata quotes — an exception's text, a
URL, a response body that echoes a header — goes through :func:`scrub_text` / :func:`redact_url`:
URL user info and query strings are dropped, secret values become ``***``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from urllib.parse import urlsplit, urlunsplit

from kebab_eval_pipeline.errors import InputError, Offender
from kebab_eval_pipeline.net.checks import header_value_problem

_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")
REDACTED = "***"
_URL_IN_TEXT = re.compile(r"https?://[^\s'\"<>]+")


def resolve_headers(refs: Mapping[str, str], env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Header values from environment variables: ``{"Authorization": "API_KEY"}`` or
    ``{"Authorization": "Bearer ${API_KEY}"}``.

    Raises ValueError naming the header and the variable (never a value) when one is unset
    or empty, and InputError (field ``system.headers_from_env.<header>``) when a value holds
    CR/LF, NUL, another control character or non-ASCII text.
    """
    env = os.environ if env is None else env
    headers, missing = {}, []
    for header, ref in refs.items():
        names = _env_names(ref)
        absent = [n for n in names if not env.get(n)]
        if absent:
            missing += [f"{header} needs ${n}" for n in absent]
            continue
        headers[header] = (
            _ENV_REF.sub(lambda m: env[m.group(1) or m.group(2)], ref) if "$" in ref else env[ref]
        )
    if missing:
        raise ValueError("environment variable(s) not set: " + "; ".join(missing))
    # A CR/LF in a variable would inject a header (or fail every query as `connection`): refused
    # before the first query, naming the header and the variable, never the value.
    bad = [
        Offender(
            "<environment>",
            f"{problem} (from {', '.join('$' + n for n in _env_names(refs[name]))})",
            field=f"system.headers_from_env.{name}",
        )
        for name, value in headers.items()
        if (problem := header_value_problem(value)) is not None
    ]
    if bad:
        raise InputError("a header value from the environment cannot be sent", bad)
    return headers


def _env_names(ref: str) -> list[str]:
    """The variables a ``headers_from_env`` entry reads: ``"API_KEY"`` or ``"Bearer ${API_KEY}"``."""
    return [a or b for a, b in _ENV_REF.findall(ref)] if "$" in ref else [ref]


def redact_url(url: str) -> str:
    """``url`` without user info and query string (either may carry a credential)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def scrub_text(text: str, secrets: Sequence[str]) -> str:
    """``text`` with URLs stripped of user info and query string (httpx names the URL in its
    messages) and every one of ``secrets`` (longest first) replaced by ``***``."""
    text = _URL_IN_TEXT.sub(lambda m: redact_url(m.group(0)), text)
    for secret in secrets:
        text = text.replace(secret, REDACTED)
    return text
